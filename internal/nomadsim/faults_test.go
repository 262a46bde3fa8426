package nomadsim

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Injected faults reach the real api client as Nomad errors would: the status
// code and body of an UnexpectedResponseError, on the matching paths only.
func TestFaultInjection(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1, Seed: 7})

	t.Run("429 on one path, others untouched", func(t *testing.T) {
		if err := s.InjectFault(Fault{PathPrefix: "/v1/nodes", ErrorRate: 1, Status: 429}); err != nil {
			t.Fatal(err)
		}
		defer s.ClearFaults()
		_, _, err := c.Nodes().List(nil)
		wantStatus(t, err, 429, "Too many requests")
		if _, err := c.Status().Leader(); err != nil {
			t.Errorf("unfaulted path failed: %v", err)
		}
	})

	t.Run("count limits the failures", func(t *testing.T) {
		if err := s.InjectFault(Fault{PathPrefix: "/v1/nodes", ErrorRate: 1, Count: 2}); err != nil {
			t.Fatal(err)
		}
		defer s.ClearFaults()
		for i := 0; i < 2; i++ {
			_, _, err := c.Nodes().List(nil)
			wantStatus(t, err, 500, "injected fault")
		}
		if _, _, err := c.Nodes().List(nil); err != nil {
			t.Errorf("third call failed: %v", err)
		}
	})

	t.Run("an error rate fails about that share of calls", func(t *testing.T) {
		if err := s.InjectFault(Fault{PathPrefix: "/v1/nodes", ErrorRate: 0.3}); err != nil {
			t.Fatal(err)
		}
		defer s.ClearFaults()
		failed := 0
		for i := 0; i < 200; i++ {
			if _, _, err := c.Nodes().List(nil); err != nil {
				failed++
			}
		}
		// 200 draws at 30%: far outside [30, 90] only with a broken rate.
		if failed < 30 || failed > 90 {
			t.Errorf("%d of 200 calls failed at rate 0.3", failed)
		}
	})

	t.Run("latency is added", func(t *testing.T) {
		if err := s.InjectFault(Fault{PathPrefix: "/v1/status", Latency: 50 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		defer s.ClearFaults()
		start := time.Now()
		if _, err := c.Status().Leader(); err != nil {
			t.Fatal(err)
		}
		// A lower bound only: a slow machine cannot make this fail.
		if d := time.Since(start); d < 50*time.Millisecond {
			t.Errorf("call took %s, want at least the injected 50ms", d)
		}
	})

	t.Run("a hanging request is never answered", func(t *testing.T) {
		// Set through the control API, as a fault suite run from outside does.
		body := `{"path_prefix":"/v1/nodes","error_rate":1,"count":1,"hang":true}`
		resp, err := http.Post(s.Address()+"/sim/v1/faults", "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /sim/v1/faults: %s", resp.Status)
		}
		defer s.ClearFaults()
		before := len(s.Events(0))
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, _, err = c.Nodes().List((&api.QueryOptions{}).WithContext(ctx))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("hung request ended with %v; want the caller's deadline", err)
		}
		hung := false
		for _, e := range s.Events(before) {
			hung = hung || (e.Type == EventFault && e.Details["hang"] == "true")
		}
		if !hung {
			t.Error("no fault event for the hung request")
		}
		// Count 1: the next request is answered, and other paths never hung.
		if _, _, err := c.Nodes().List(nil); err != nil {
			t.Errorf("request after the hang: %v", err)
		}
	})

	t.Run("bad faults are refused", func(t *testing.T) {
		for _, f := range []Fault{{ErrorRate: 1.5}, {ErrorRate: 1, Status: 302}, {Latency: -time.Second}} {
			if err := s.InjectFault(f); err == nil {
				t.Errorf("fault %+v accepted", f)
			}
		}
	})
}
