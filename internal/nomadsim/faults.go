package nomadsim

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// Fault is a fault injected into API requests, for reliability tests. A request
// matches when its path starts with PathPrefix (empty: every path) and, if Method
// is set, its method is Method.
type Fault struct {
	PathPrefix string        `json:"path_prefix"`
	Method     string        `json:"method,omitempty"`
	ErrorRate  float64       `json:"error_rate"`       // 0..1: share of matching requests that fail
	Status     int           `json:"status,omitempty"` // status of a failure: 500 (default) or 429 ...
	Latency    time.Duration `json:"latency,omitempty"`
	// Count limits how many failures the fault causes (0: no limit).
	Count int `json:"count,omitempty"`
	// Hang makes a failure a request that is accepted and never answered: the
	// server reads it and then says nothing until the caller gives up (closes the
	// connection) or the emulator closes, as a server stuck on a lock or a
	// half-open connection behind a load balancer does. Status is then unused.
	Hang bool `json:"hang,omitempty"`
}

type faultSet struct {
	rules []*faultRule
}

type faultRule struct {
	Fault
	fired int
}

// InjectFault adds a fault rule.
func (s *Sim) InjectFault(f Fault) error {
	if f.ErrorRate < 0 || f.ErrorRate > 1 {
		return fmt.Errorf("error_rate %v: must be between 0 and 1", f.ErrorRate)
	}
	if f.Status == 0 {
		f.Status = http.StatusInternalServerError
	}
	if f.Status < 400 || f.Status > 599 {
		return fmt.Errorf("status %d: must be an HTTP error status (400-599)", f.Status)
	}
	if f.Latency < 0 {
		return fmt.Errorf("latency %v: must not be negative", f.Latency)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.rules = append(s.faults.rules, &faultRule{Fault: f})
	return nil
}

// ClearFaults removes every fault rule.
func (s *Sim) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults.rules = nil
}

// applyFaults delays or fails r according to the fault rules. It reports whether it
// answered the request.
func (s *Sim) applyFaults(w http.ResponseWriter, r *http.Request) bool {
	s.mu.Lock()
	var delay time.Duration
	fail := 0
	hang := false
	for _, f := range s.faults.rules {
		if !strings.HasPrefix(r.URL.Path, f.PathPrefix) || (f.Method != "" && f.Method != r.Method) {
			continue
		}
		delay += f.Latency
		if fail == 0 && f.ErrorRate > 0 && (f.Count == 0 || f.fired < f.Count) && s.rng.Float64() < f.ErrorRate {
			f.fired++
			fail, hang = f.Status, f.Hang
			d := map[string]string{"path": r.URL.Path, "method": r.Method, "status": fmt.Sprint(fail)}
			if hang {
				d = map[string]string{"path": r.URL.Path, "method": r.Method, "hang": "true"}
			}
			s.eventLocked(Event{Type: EventFault, Details: d})
		}
	}
	s.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return true
		}
	}
	if hang {
		select {
		case <-r.Context().Done():
		case <-s.ctx.Done():
		}
		return true
	}
	if fail != 0 {
		msg := "injected fault"
		if fail == http.StatusTooManyRequests {
			msg = "Too many requests"
		}
		simhttp.WriteError(w, fail, msg)
		return true
	}
	return false
}
