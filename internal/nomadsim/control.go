package nomadsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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
	st.VaultSealed = s.vault.Sealed(h.Name)
	if _, err := os.Stat(filepath.Join(h.Dir, SentinelFile)); err == nil {
		st.RebootRequired = true
	}
	if h.Server != nil {
		// Voter is the current Raft suffrage: false while autopilot has removed the
		// server or it is back as a non-voter (raftsim autopilot.go).
		m := s.servers.ByHost(h.Name)
		st.Server = &ServerStatus{ID: h.Server.ID, Name: h.Server.Name, RaftAddr: h.Server.RaftAddr, Voter: m != nil && m.Voter()}
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

type controlError struct {
	code int
	msg  string
}

func ctlErr(code int, format string, args ...any) *controlError {
	return &controlError{code: code, msg: fmt.Sprintf(format, args...)}
}

// controlFunc serves one control endpoint: its JSON answer, or an error.
type controlFunc func(r *http.Request) (any, *controlError)

// controlRoute is one control endpoint: a path pattern of http.ServeMux (with
// {host} wildcards), the methods it serves, and its function.
type controlRoute struct {
	path    string
	methods []string
	serve   controlFunc
}

var (
	ctlGet    = []string{http.MethodGet}
	ctlWrite  = []string{http.MethodPut, http.MethodPost}
	ctlDelete = []string{http.MethodDelete}
)

// controlRoutes are the control API's endpoints (docs/emulator.md, "Control API").
func (s *Sim) controlRoutes() []controlRoute {
	return []controlRoute{
		{"/hosts", ctlGet, s.ctlHosts},
		{"/hosts/{host}", ctlGet, s.ctlHost},
		{"/hosts/{host}/reboot", ctlWrite, s.ctlReboot},
		{"/hosts/{host}/reboot-required", ctlWrite, s.ctlSetRebootRequired},
		{"/hosts/{host}/reboot-required", ctlDelete, s.ctlClearRebootRequired},
		{"/hosts/{host}/packages", ctlWrite, s.ctlSetPackagesNeeded},
		{"/hosts/{host}/boot-block", ctlWrite, s.ctlBootBlock(true)},
		{"/hosts/{host}/boot-block", ctlDelete, s.ctlBootBlock(false)},
		{"/faults", ctlGet, s.ctlFaults},
		{"/faults", ctlWrite, s.ctlInjectFault},
		{"/faults", ctlDelete, s.ctlClearFaults},
		{"/leader", ctlWrite, s.ctlLeader},
		{"/latency", ctlGet, s.ctlLatency},
		{"/latency", ctlWrite, s.ctlSetLatency},
		{"/servers/{host}/health", ctlWrite, s.ctlServerHealth},
		{"/consul/servers/{host}/health", ctlWrite, s.ctlAux(s.SetConsulServerHealthy)},
		{"/vault/servers/{host}/health", ctlWrite, s.ctlAux(s.SetVaultServerHealthy)},
		{"/vault/servers/{host}/seal", ctlWrite, s.ctlSeal(s.SealVault, true)},
		{"/vault/servers/{host}/unseal", ctlWrite, s.ctlSeal(s.UnsealVault, false)},
		{"/event-stream", ctlGet, s.ctlEventStream},
		{"/event-stream", ctlWrite, s.ctlSetEventStream},
		{"/snapshot/restore", ctlWrite, s.ctlRestoreSnapshot},
		{"/events", ctlGet, s.ctlEvents},
		{"/jobs", ctlGet, s.ctlJobs},
		{"/jobs", ctlWrite, s.ctlAddJob},
		{"/identities", ctlGet, s.ctlIdentities},
	}
}

// controlHandler serves the control API: each route on "METHOD path" patterns of
// an http.ServeMux. Every answer is JSON; a path served for other methods answers
// 405 (with Allow), any other path 404, as {"error": "..."}.
func (s *Sim) controlHandler() http.Handler {
	mux := http.NewServeMux()
	allowed := map[string][]string{}
	var paths []string
	for _, rt := range s.controlRoutes() {
		path := strings.TrimSuffix(controlPrefix, "/") + rt.path
		for _, m := range rt.methods {
			mux.Handle(m+" "+path, rt.serve)
		}
		if allowed[path] == nil {
			paths = append(paths, path)
		}
		allowed[path] = append(allowed[path], rt.methods...)
	}
	for _, path := range paths {
		methods := strings.Join(slices.Compact(slices.Sorted(slices.Values(allowed[path]))), ", ")
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", methods)
			writeControlError(w, ctlErr(http.StatusMethodNotAllowed, "method %s not allowed on %s (allowed: %s)",
				r.Method, r.URL.Path, methods))
		})
	}
	mux.HandleFunc(controlPrefix, func(w http.ResponseWriter, r *http.Request) {
		writeControlError(w, ctlErr(http.StatusNotFound, "no such endpoint: %s", r.URL.Path))
	})
	return mux
}

// ServeHTTP writes f's answer as JSON, or its error.
func (f controlFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	out, cerr := f(r)
	if cerr != nil {
		writeControlError(w, cerr)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// writeControlError writes {"error": "..."} with the error's status.
func writeControlError(w http.ResponseWriter, cerr *controlError) {
	writeJSON(w, cerr.code, map[string]string{"error": cerr.msg})
}

// ---- hosts ---------------------------------------------------------------------

func (s *Sim) ctlHosts(*http.Request) (any, *controlError) { return s.HostStatuses(), nil }

// ctlHostName is the {host} of r, which must exist (404).
func (s *Sim) ctlHostName(r *http.Request) (string, *controlError) {
	name := r.PathValue("host")
	if _, ok := s.Host(name); !ok {
		return "", ctlErr(http.StatusNotFound, "host %q not found", name)
	}
	return name, nil
}

// ctlHostOp runs op on the {host} of r, then answers the host's status: 404 for
// an unknown host, 400 when op fails.
func (s *Sim) ctlHostOp(r *http.Request, op func(host string) error) (any, *controlError) {
	name, cerr := s.ctlHostName(r)
	if cerr != nil {
		return nil, cerr
	}
	if err := op(name); err != nil {
		return nil, ctlErr(http.StatusBadRequest, "%v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hostStatusLocked(s.hosts[name]), nil
}

func (s *Sim) ctlHost(r *http.Request) (any, *controlError) {
	return s.ctlHostOp(r, func(string) error { return nil })
}

func (s *Sim) ctlReboot(r *http.Request) (any, *controlError) { return s.ctlHostOp(r, s.Reboot) }

// ctlSetRebootRequired creates the sentinel; the reason is the body's or ?reason=.
func (s *Sim) ctlSetRebootRequired(r *http.Request) (any, *controlError) {
	if _, cerr := s.ctlHostName(r); cerr != nil {
		return nil, cerr
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if cerr := decodeControlBodyOptional(r, &body); cerr != nil {
		return nil, cerr
	}
	if q := r.URL.Query().Get("reason"); q != "" {
		body.Reason = q
	}
	return s.ctlHostOp(r, func(host string) error { return s.SetRebootRequired(host, body.Reason) })
}

func (s *Sim) ctlClearRebootRequired(r *http.Request) (any, *controlError) {
	return s.ctlHostOp(r, s.ClearRebootRequired)
}

// ---- faults, leader, latency, events, jobs ------------------------------------

func (s *Sim) ctlFaults(*http.Request) (any, *controlError) { return s.faultList(), nil }

func (s *Sim) ctlInjectFault(r *http.Request) (any, *controlError) {
	var f Fault
	if cerr := decodeControlBody(r, &f); cerr != nil {
		return nil, cerr
	}
	if err := s.InjectFault(f); err != nil {
		return nil, ctlErr(http.StatusBadRequest, "%v", err)
	}
	return s.faultList(), nil
}

func (s *Sim) ctlClearFaults(*http.Request) (any, *controlError) {
	s.ClearFaults()
	return s.faultList(), nil
}

// ctlBool reads the boolean query parameter name: 400 when it is not one.
func ctlBool(r *http.Request, name string) (bool, *controlError) {
	v := r.URL.Query().Get(name)
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, ctlErr(http.StatusBadRequest, "%s=%q: want true or false", name, v)
	}
	return b, nil
}

func (s *Sim) ctlLeader(r *http.Request) (any, *controlError) {
	lost, cerr := ctlBool(r, "lost")
	if cerr != nil {
		return nil, cerr
	}
	if err := s.SetLeaderLost(lost); err != nil {
		return nil, ctlErr(http.StatusBadRequest, "%v", err)
	}
	return map[string]bool{"lost": lost}, nil
}

func (s *Sim) ctlLatency(*http.Request) (any, *controlError) {
	return map[string]string{"latency": s.RequestLatency().String()}, nil
}

// ctlSetLatency sets the request latency from ?latency= or the body's "latency"
// (a Go duration string or integer nanoseconds).
func (s *Sim) ctlSetLatency(r *http.Request) (any, *controlError) {
	var body struct {
		Latency json.RawMessage `json:"latency"`
	}
	if cerr := decodeControlBodyOptional(r, &body); cerr != nil {
		return nil, cerr
	}
	if q := r.URL.Query().Get("latency"); q != "" {
		body.Latency, _ = json.Marshal(q)
	}
	d, err := decodeDurationJSON(body.Latency)
	if err == nil {
		err = s.SetRequestLatency(d)
	}
	if err != nil {
		return nil, ctlErr(http.StatusBadRequest, "latency: %v", err)
	}
	return s.ctlLatency(r)
}

// ctlEvents lists the event log; after=N keeps the entries with seq > N.
func (s *Sim) ctlEvents(r *http.Request) (any, *controlError) {
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
}

func (s *Sim) ctlJobs(*http.Request) (any, *controlError) { return s.Jobs(), nil }

func (s *Sim) ctlAddJob(r *http.Request) (any, *controlError) {
	var spec JobSpec
	if cerr := decodeControlBody(r, &spec); cerr != nil {
		return nil, cerr
	}
	if err := s.AddJob(spec); err != nil {
		return nil, ctlErr(http.StatusBadRequest, "%v", err)
	}
	return s.Jobs(), nil
}

// ---- event stream --------------------------------------------------------------

func (s *Sim) ctlEventStream(*http.Request) (any, *controlError) { return s.EventStream(), nil }

// ctlSetEventStream changes the event stream's knobs given in the body
// ({"broker_disabled":bool,"silent":bool,"subscriber_delay":"50ms"}) or the
// query (?broker_disabled=, ?silent=, ?subscriber_delay=); those not given stay.
func (s *Sim) ctlSetEventStream(r *http.Request) (any, *controlError) {
	var body struct {
		BrokerDisabled  *bool           `json:"broker_disabled"`
		Silent          *bool           `json:"silent"`
		SubscriberDelay json.RawMessage `json:"subscriber_delay"`
	}
	if cerr := decodeControlBodyOptional(r, &body); cerr != nil {
		return nil, cerr
	}
	q := r.URL.Query()
	for name, dst := range map[string]**bool{"broker_disabled": &body.BrokerDisabled, "silent": &body.Silent} {
		if q.Has(name) {
			b, cerr := ctlBool(r, name)
			if cerr != nil {
				return nil, cerr
			}
			*dst = &b
		}
	}
	if v := q.Get("subscriber_delay"); v != "" {
		body.SubscriberDelay, _ = json.Marshal(v)
	}
	if len(body.SubscriberDelay) > 0 {
		d, err := decodeDurationJSON(body.SubscriberDelay)
		if err == nil {
			err = s.SetEventSubscriberDelay(d)
		}
		if err != nil {
			return nil, ctlErr(http.StatusBadRequest, "subscriber_delay: %v", err)
		}
	}
	if body.BrokerDisabled != nil {
		s.SetEventBrokerDisabled(*body.BrokerDisabled)
	}
	if body.Silent != nil {
		s.SetEventStreamSilent(*body.Silent)
	}
	return s.EventStream(), nil
}

func (s *Sim) ctlRestoreSnapshot(*http.Request) (any, *controlError) {
	s.RestoreSnapshot()
	return s.EventStream(), nil
}

// ---- servers -------------------------------------------------------------------

// ctlServerHealth is SetServerHealthy: 404 for an unknown host, 400 for one
// without a Nomad server or a bad ?healthy=.
func (s *Sim) ctlServerHealth(r *http.Request) (any, *controlError) {
	name, cerr := s.ctlHostName(r)
	if cerr != nil {
		return nil, cerr
	}
	if h, _ := s.Host(name); h.Server == nil {
		return nil, ctlErr(http.StatusBadRequest, "host %q runs no Nomad server", name)
	}
	return s.ctlAux(s.SetServerHealthy)(r)
}

// ctlAux serves a Set*ServerHealthy of the {host} of r with ?healthy=.
func (s *Sim) ctlAux(set func(host string, healthy bool) error) controlFunc {
	return func(r *http.Request) (any, *controlError) {
		name, cerr := s.ctlHostName(r)
		if cerr != nil {
			return nil, cerr
		}
		healthy, cerr := ctlBool(r, "healthy")
		if cerr != nil {
			return nil, cerr
		}
		if err := set(name, healthy); err != nil {
			return nil, ctlErr(http.StatusBadRequest, "%v", err)
		}
		return map[string]any{"host": name, "healthy": healthy}, nil
	}
}

// ctlSeal serves SealVault or UnsealVault (sealed tells which) on the {host} of r.
func (s *Sim) ctlSeal(op func(host string) error, sealed bool) controlFunc {
	return func(r *http.Request) (any, *controlError) {
		name, cerr := s.ctlHostName(r)
		if cerr != nil {
			return nil, cerr
		}
		if err := op(name); err != nil {
			return nil, ctlErr(http.StatusBadRequest, "%v", err)
		}
		return map[string]any{"host": name, "sealed": sealed}, nil
	}
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
