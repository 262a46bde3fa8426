package nomadsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// controlPrefix is the emulator's own control API: JSON, served on every listener,
// without ACLs and never subject to injected faults. It is not part of Nomad.
const controlPrefix = "/sim/v1/"

// HostStatus is one host as the control API shows it.
type HostStatus struct {
	Name           string        `json:"name"`
	Addr           string        `json:"addr"`
	Up             bool          `json:"up"`
	BootID         string        `json:"boot_id"`
	Boots          int           `json:"boots"`
	Dir            string        `json:"dir"`
	RebootRequired bool          `json:"reboot_required"`
	NodeID         string        `json:"node_id,omitempty"`
	NodeStatus     string        `json:"node_status,omitempty"`
	NodePool       string        `json:"node_pool,omitempty"`
	Eligibility    string        `json:"eligibility,omitempty"`
	Draining       bool          `json:"draining,omitempty"`
	Allocs         int           `json:"allocs,omitempty"`
	Server         *ServerStatus `json:"server,omitempty"`
	ConsulAddr     string        `json:"consul_addr,omitempty"`
	VaultAddr      string        `json:"vault_addr,omitempty"`
	VaultSealed    bool          `json:"vault_sealed,omitempty"`
}

// ServerStatus is the Nomad server of a host as the control API shows it.
type ServerStatus struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	RaftAddr string `json:"raft_addr"`
	Voter    bool   `json:"voter"`
}

// HostStatuses returns the status of every host, in creation order.
func (s *Sim) HostStatuses() []HostStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]HostStatus, 0, len(s.hostOrder))
	for _, h := range s.sortedHostsLocked() {
		out = append(out, s.hostStatusLocked(h))
	}
	return out
}

func (s *Sim) hostStatusLocked(h *Host) HostStatus {
	st := HostStatus{
		Name: h.Name, Addr: h.Addr, Up: h.Up, BootID: h.BootID, Boots: h.Boots, Dir: h.Dir,
		NodeID: h.NodeID,
	}
	st.ConsulAddr, st.VaultAddr = h.ConsulAddr, h.VaultAddr
	if m := s.vault.g.byHostLocked(h); m != nil {
		st.VaultSealed = m.sealed
	}
	if _, err := os.Stat(filepath.Join(h.Dir, SentinelFile)); err == nil {
		st.RebootRequired = true
	}
	if h.Server != nil {
		// Voter is the current Raft suffrage: false while autopilot has removed the
		// server or it is back as a non-voter (autopilot.go).
		e := s.servers.byHostLocked(h)
		st.Server = &ServerStatus{ID: h.Server.ID, Name: h.Server.Name, RaftAddr: h.Server.RaftAddr, Voter: e != nil && e.voter}
	}
	if sn, ok := s.cluster.nodes[h.NodeID]; ok && h.NodeID != "" {
		st.NodeStatus = sn.node.Status
		st.NodePool = sn.node.NodePool
		st.Eligibility = sn.node.SchedulingEligibility
		st.Draining = sn.node.DrainStrategy != nil
		st.Allocs = s.cluster.numAllocsLocked(h.NodeID)
	}
	return st
}

// MarshalJSON writes latency as a Go duration string ("50ms").
func (f Fault) MarshalJSON() ([]byte, error) {
	type plain Fault
	aux := struct {
		plain
		Latency string `json:"latency,omitempty"`
	}{plain: plain(f)}
	if f.Latency != 0 {
		aux.Latency = f.Latency.String()
	}
	return json.Marshal(aux)
}

// UnmarshalJSON reads latency as a Go duration string ("50ms") or integer ns.
func (f *Fault) UnmarshalJSON(b []byte) error {
	type plain Fault
	aux := struct {
		*plain
		Latency json.RawMessage `json:"latency,omitempty"`
	}{plain: (*plain)(f)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	d, err := decodeDurationJSON(aux.Latency)
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	f.Latency = d
	return nil
}

func (s *Sim) registerControlRoutes(mux *http.ServeMux) {
	mux.HandleFunc(controlPrefix, s.handleControl)
}

type controlError struct {
	code int
	msg  string
}

func ctlErr(code int, format string, args ...any) *controlError {
	return &controlError{code: code, msg: fmt.Sprintf(format, args...)}
}

// handleControl routes the control API. Every answer is JSON; errors are
// {"error": "..."} with 400, 404 or 405.
func (s *Sim) handleControl(w http.ResponseWriter, r *http.Request) {
	out, cerr := s.control(r)
	if cerr != nil {
		writeJSON(w, cerr.code, map[string]string{"error": cerr.msg})
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) control(r *http.Request) (any, *controlError) {
	parts := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, controlPrefix), "/"), "/")
	method := r.Method
	allow := func(ms ...string) *controlError {
		for _, m := range ms {
			if m == method {
				return nil
			}
		}
		return ctlErr(http.StatusMethodNotAllowed, "method %s not allowed on %s (allowed: %s)", method, r.URL.Path, strings.Join(ms, ", "))
	}
	switch {
	case len(parts) == 1 && parts[0] == "hosts":
		if e := allow(http.MethodGet); e != nil {
			return nil, e
		}
		return s.HostStatuses(), nil

	case len(parts) >= 2 && parts[0] == "hosts":
		name := parts[1]
		if _, ok := s.Host(name); !ok {
			return nil, ctlErr(http.StatusNotFound, "host %q not found", name)
		}
		switch {
		case len(parts) == 2:
			if e := allow(http.MethodGet); e != nil {
				return nil, e
			}
		case len(parts) == 3 && parts[2] == "reboot":
			if e := allow(http.MethodPost, http.MethodPut); e != nil {
				return nil, e
			}
			if err := s.Reboot(name); err != nil {
				return nil, ctlErr(http.StatusBadRequest, "%v", err)
			}
		case len(parts) == 3 && parts[2] == "reboot-required":
			if e := allow(http.MethodPut, http.MethodPost, http.MethodDelete); e != nil {
				return nil, e
			}
			var err error
			if method == http.MethodDelete {
				err = s.ClearRebootRequired(name)
			} else {
				var body struct {
					Reason string `json:"reason"`
				}
				if cerr := decodeControlBodyOptional(r, &body); cerr != nil {
					return nil, cerr
				}
				reason := body.Reason
				if q := r.URL.Query().Get("reason"); q != "" {
					reason = q
				}
				err = s.SetRebootRequired(name, reason)
			}
			if err != nil {
				return nil, ctlErr(http.StatusBadRequest, "%v", err)
			}
		default:
			return nil, ctlErr(http.StatusNotFound, "no such endpoint: %s", r.URL.Path)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.hostStatusLocked(s.hosts[name]), nil

	case len(parts) == 1 && parts[0] == "faults":
		switch method {
		case http.MethodPost, http.MethodPut:
			var f Fault
			if cerr := decodeControlBody(r, &f); cerr != nil {
				return nil, cerr
			}
			if err := s.InjectFault(f); err != nil {
				return nil, ctlErr(http.StatusBadRequest, "%v", err)
			}
			return s.faultList(), nil
		case http.MethodDelete:
			s.ClearFaults()
			return s.faultList(), nil
		case http.MethodGet:
			return s.faultList(), nil
		}
		return nil, allow(http.MethodGet, http.MethodPost, http.MethodDelete)

	case len(parts) == 1 && parts[0] == "leader":
		if e := allow(http.MethodPut, http.MethodPost); e != nil {
			return nil, e
		}
		lost, err := strconv.ParseBool(r.URL.Query().Get("lost"))
		if err != nil {
			return nil, ctlErr(http.StatusBadRequest, "lost=%q: want true or false", r.URL.Query().Get("lost"))
		}
		if err := s.SetLeaderLost(lost); err != nil {
			return nil, ctlErr(http.StatusBadRequest, "%v", err)
		}
		return map[string]bool{"lost": lost}, nil

	case len(parts) == 3 && parts[0] == "servers" && parts[2] == "health":
		if e := allow(http.MethodPut, http.MethodPost); e != nil {
			return nil, e
		}
		name := parts[1]
		h, ok := s.Host(name)
		if !ok {
			return nil, ctlErr(http.StatusNotFound, "host %q not found", name)
		}
		if h.Server == nil {
			return nil, ctlErr(http.StatusBadRequest, "host %q runs no Nomad server", name)
		}
		healthy, err := strconv.ParseBool(r.URL.Query().Get("healthy"))
		if err != nil {
			return nil, ctlErr(http.StatusBadRequest, "healthy=%q: want true or false", r.URL.Query().Get("healthy"))
		}
		if err := s.SetServerHealthy(name, healthy); err != nil {
			return nil, ctlErr(http.StatusBadRequest, "%v", err)
		}
		return map[string]any{"host": name, "healthy": healthy}, nil

	case len(parts) == 4 && (parts[0] == "consul" || parts[0] == "vault") && parts[1] == "servers":
		return s.controlAux(r, parts[0], parts[2], parts[3], allow)

	case len(parts) == 1 && parts[0] == "events":
		if e := allow(http.MethodGet); e != nil {
			return nil, e
		}
		after := 0
		if v := r.URL.Query().Get("after"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, ctlErr(http.StatusBadRequest, "after=%q: want a non-negative integer", v)
			}
			after = n
		}
		ev := s.Events(after)
		if ev == nil {
			ev = []Event{}
		}
		return ev, nil

	case len(parts) == 1 && parts[0] == "jobs":
		switch method {
		case http.MethodGet:
			return s.Jobs(), nil
		case http.MethodPost, http.MethodPut:
			var spec JobSpec
			if cerr := decodeControlBody(r, &spec); cerr != nil {
				return nil, cerr
			}
			if err := s.AddJob(spec); err != nil {
				return nil, ctlErr(http.StatusBadRequest, "%v", err)
			}
			return s.Jobs(), nil
		}
		return nil, allow(http.MethodGet, http.MethodPost)
	}
	return nil, ctlErr(http.StatusNotFound, "no such endpoint: %s", r.URL.Path)
}

func (s *Sim) faultList() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Fault, 0, len(s.faults.rules))
	for _, f := range s.faults.rules {
		out = append(out, f.Fault)
	}
	return out
}

func decodeControlBody(r *http.Request, v any) *controlError {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return ctlErr(http.StatusBadRequest, "bad request body: %v", err)
	}
	return nil
}

func decodeControlBodyOptional(r *http.Request, v any) *controlError {
	if r.ContentLength == 0 {
		return nil
	}
	return decodeControlBody(r, v)
}

// controlAux serves /sim/v1/{consul,vault}/servers/<host>/{health,seal,unseal}.
func (s *Sim) controlAux(r *http.Request, kind, name, op string, allow func(...string) *controlError) (any, *controlError) {
	if e := allow(http.MethodPut, http.MethodPost); e != nil {
		return nil, e
	}
	if _, ok := s.Host(name); !ok {
		return nil, ctlErr(http.StatusNotFound, "host %q not found", name)
	}
	var err error
	out := map[string]any{"host": name}
	switch {
	case op == "health":
		healthy, perr := strconv.ParseBool(r.URL.Query().Get("healthy"))
		if perr != nil {
			return nil, ctlErr(http.StatusBadRequest, "healthy=%q: want true or false", r.URL.Query().Get("healthy"))
		}
		if kind == "consul" {
			err = s.SetConsulServerHealthy(name, healthy)
		} else {
			err = s.SetVaultServerHealthy(name, healthy)
		}
		out["healthy"] = healthy
	case kind == "vault" && op == "seal":
		err = s.SealVault(name)
		out["sealed"] = true
	case kind == "vault" && op == "unseal":
		err = s.UnsealVault(name)
		out["sealed"] = false
	default:
		return nil, ctlErr(http.StatusNotFound, "no such endpoint: %s", r.URL.Path)
	}
	if err != nil {
		return nil, ctlErr(http.StatusBadRequest, "%v", err)
	}
	return out, nil
}
