package nomadsim

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

func lockEvents(s *Sim, typ string) []Event {
	var out []Event
	for _, e := range s.Events(0) {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

func TestLockAcquireRenewRelease(t *testing.T) {
	s := vtSim(t, Config{})
	c := vtClient(t, s, "", "")
	vars := c.Variables()
	if _, _, err := vars.Create(&api.Variable{Path: "rollboot/leader", Items: api.VariableItems{"old": "data"}}, nil); err != nil {
		t.Fatal(err)
	}

	// Acquire with defaults: server-made ID, 15s/15s; Items are overwritten.
	v, wm, err := vars.AcquireLock(&api.Variable{Path: "rollboot/leader", Items: api.VariableItems{"holder": "a"}}, nil)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if v.Lock == nil || len(v.Lock.ID) != 36 || v.Lock.TTL != "15s" || v.Lock.LockDelay != "15s" {
		t.Fatalf("lock %+v", v.Lock)
	}
	if v.Items["holder"] != "a" || v.Items["old"] != "" || wm.LastIndex != v.ModifyIndex {
		t.Fatalf("acquired %+v (write index %d)", v, wm.LastIndex)
	}
	id := v.Lock.ID

	// A second acquirer conflicts: 409 {Namespace, Path}, no lock, no index header.
	r := vtDo(t, s, "PUT", "/v1/var/rollboot/leader?lock-acquire", "", `{"Items":{"holder":"b"}}`)
	want := `{"Namespace":"default","Path":"rollboot/leader","CreateIndex":0,"CreateTime":0,"ModifyIndex":0,"ModifyTime":0}`
	if r.code != 409 || strings.TrimSpace(r.body) != want || r.header.Get("X-Nomad-Index") != "" {
		t.Fatalf("second acquire: %d %q %v", r.code, r.body, r.header)
	}

	// Renew: 200 with the metadata (lock included), no index header.
	r = vtDo(t, s, "PUT", "/v1/var/rollboot/leader?lock-renew", "", `{"Lock":{"ID":"`+id+`"}}`)
	if r.code != 200 || r.header.Get("X-Nomad-Index") != "" || !strings.Contains(r.body, `"ID":"`+id+`"`) || strings.Contains(r.body, "Items") {
		t.Fatalf("renew: %d %q %v", r.code, r.body, r.header)
	}
	meta, _, err := vars.RenewLock(&api.Variable{Path: "rollboot/leader", Lock: &api.VariableLock{ID: id}}, nil)
	if err != nil || meta.Lock.ID != id || meta.ModifyIndex != v.ModifyIndex {
		t.Fatalf("RenewLock: %+v %v", meta, err)
	}

	// Locked: plain writes and deletes conflict with a zero value.
	_, _, err = vars.Update(&api.Variable{Path: "rollboot/leader", Items: api.VariableItems{"x": "y"}}, nil)
	if code, body := vtStatus(t, err); code != 409 || !strings.Contains(body, `"ModifyIndex":0`) {
		t.Fatalf("plain update of locked: %d %q", code, body)
	}
	r = vtDo(t, s, "DELETE", "/v1/var/rollboot/leader", "", "")
	if r.code != 409 || strings.TrimSpace(r.body) != want {
		t.Fatalf("delete of locked: %d %q", r.code, r.body)
	}
	// A lock definition in a plain write is refused.
	r = vtDo(t, s, "PUT", "/v1/var/rollboot/leader", "", `{"Items":{"x":"y"},"Lock":{"ID":"`+id+`","TTL":"20s"}}`)
	if r.code != 400 || r.body != "RPC Error:: 400,RPC Error:: 400,variable should not contain lock definition" {
		t.Fatalf("lock definition: %d %q", r.code, r.body)
	}
	// The holder updates with Lock.ID only.
	u, _, err := vars.Update(&api.Variable{Path: "rollboot/leader", Items: api.VariableItems{"holder": "a", "n": "2"},
		Lock: &api.VariableLock{ID: id}}, nil)
	if err != nil || u.Items["n"] != "2" || u.Lock == nil || u.Lock.ID != id {
		t.Fatalf("holder update: %+v %v", u, err)
	}

	// Release errors: wrong ID 409, Items present 400.
	_, _, err = vars.ReleaseLock(&api.Variable{Path: "rollboot/leader", Lock: &api.VariableLock{ID: "wrong"}}, nil)
	if code, body := vtStatus(t, err); code != 409 || !strings.Contains(body, `"Path":"rollboot/leader"`) || strings.Contains(body, "Items") {
		t.Fatalf("release with wrong ID: %d %q", code, body)
	}
	r = vtDo(t, s, "PUT", "/v1/var/rollboot/leader?lock-release", "", `{"Items":{},"Lock":{"ID":"`+id+`"}}`)
	if r.code != 400 || r.body != "RPC Error:: 400,lock release operation doesn't take variable items" {
		t.Fatalf("release with items: %d %q", r.code, r.body)
	}
	r = vtDo(t, s, "PUT", "/v1/var/rollboot/leader?lock-release", "", `{}`)
	if r.code != 400 || r.body != "RPC Error:: 400,missing lock information" {
		t.Fatalf("release without lock: %d %q", r.code, r.body)
	}
	// Release keeps Items, moves ModifyIndex.
	rel, _, err := vars.ReleaseLock(&api.Variable{Path: "rollboot/leader", Lock: &api.VariableLock{ID: id}}, nil)
	if err != nil || rel.Lock != nil || rel.ModifyIndex <= u.ModifyIndex {
		t.Fatalf("release: %+v %v", rel, err)
	}
	got, _, err := vars.Read("rollboot/leader", nil)
	if err != nil || got.Lock != nil || got.Items["n"] != "2" {
		t.Fatalf("after release: %+v %v", got, err)
	}
	// Not locked / missing (plain state-store errors: 500 in Nomad).
	_, _, err = vars.ReleaseLock(&api.Variable{Path: "rollboot/leader", Lock: &api.VariableLock{ID: id}}, nil)
	if code, body := vtStatus(t, err); code != 500 || body != "variable doesn't hold a lock" {
		t.Fatalf("release unlocked: %d %q", code, body)
	}
	_, _, err = vars.ReleaseLock(&api.Variable{Path: "nope", Lock: &api.VariableLock{ID: id}}, nil)
	if code, body := vtStatus(t, err); code != 500 || body != "variable doesn't exist" {
		t.Fatalf("release missing: %d %q", code, body)
	}
	// Renew errors.
	renew := []struct {
		path, id string
		code     int
		msg      string
	}{
		{"nope", id, 404, "variable doesn't exist"},
		{"rollboot/leader", id, 409, "variable doesn't hold a lock"},
	}
	for _, tc := range renew {
		_, _, err := vars.RenewLock(&api.Variable{Path: tc.path, Lock: &api.VariableLock{ID: tc.id}}, nil)
		if code, body := vtStatus(t, err); code != tc.code || body != tc.msg {
			t.Errorf("renew %s: %d %q", tc.path, code, body)
		}
	}
	// Acquire again (creates if absent, too) and renew with a wrong ID.
	v2, _, err := vars.AcquireLock(&api.Variable{Path: "fresh/lock"}, nil)
	if err != nil || v2.Lock == nil || v2.Items != nil && len(v2.Items) != 0 {
		t.Fatalf("acquire on absent: %+v %v", v2, err)
	}
	_, _, err = vars.RenewLock(&api.Variable{Path: "fresh/lock", Lock: &api.VariableLock{ID: id}}, nil)
	if code, body := vtStatus(t, err); code != 409 || body != "attempting to modify locked variable" {
		t.Fatalf("renew wrong ID: %d %q", code, body)
	}
	// TTL range.
	for _, ttl := range []string{"9s", "25h"} {
		r := vtDo(t, s, "PUT", "/v1/var/other/lock?lock-acquire", "", `{"Lock":{"TTL":"`+ttl+`"}}`)
		if r.code != 400 || r.body != "RPC Error:: 400,1 error occurred:\n\t* TTL must be between 10 seconds and 24 hours\n\n" {
			t.Fatalf("TTL %s: %d %q", ttl, r.code, r.body)
		}
	}
	// TTL as integer nanoseconds.
	r = vtDo(t, s, "PUT", "/v1/var/other/lock?lock-acquire", "", `{"Lock":{"TTL":20000000000,"LockDelay":"1s"}}`)
	if r.code != 200 || !strings.Contains(r.body, `"TTL":"20s"`) {
		t.Fatalf("numeric TTL: %d %q", r.code, r.body)
	}

	if n := len(lockEvents(s, EventLockAcquire)); n != 3 {
		t.Fatalf("%d acquire events", n)
	}
	rels := lockEvents(s, EventLockRelease)
	if len(rels) != 1 || rels[0].Details["lock_id"] != id || rels[0].Details["reason"] != "released" {
		t.Fatalf("release events %+v", rels)
	}
}

// waitUntil blocks until the wall clock reaches at: the expiry test probes the lock
// at chosen points of its TTL, which is time itself, not a condition.
func waitUntil(at time.Time) {
	if d := time.Until(at); d > 0 {
		<-time.After(d)
	}
}

func TestLockExpiry(t *testing.T) {
	const ttl, delay = 100 * time.Millisecond, 400 * time.Millisecond
	s := vtSim(t, Config{AllowShortLockTTL: true})
	c := vtClient(t, s, "", "")
	vars := c.Variables()
	lock := &api.VariableLock{TTL: ttl.String(), LockDelay: delay.String()}
	v, _, err := vars.AcquireLock(&api.Variable{Path: "l", Items: api.VariableItems{"k": "v"}, Lock: lock}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := v.Lock.ID
	renewed := time.Now()

	// Renewing within 2×TTL keeps it.
	waitUntil(renewed.Add(3 * ttl / 2))
	// Taken before the call: the server restarts its timer after this instant, so
	// the release cannot come earlier than renewed+2×TTL+LockDelay.
	renewed = time.Now()
	if _, _, err := vars.RenewLock(&api.Variable{Path: "l", Lock: &api.VariableLock{ID: id}}, nil); err != nil {
		t.Fatalf("renew within 2×TTL: %v", err)
	}
	renewedAfter := time.Now()

	// After 2×TTL the timer fired: renewals fail although the lock is still there
	// during LockDelay.
	waitUntil(renewedAfter.Add(2*ttl + delay/4))
	_, _, err = vars.RenewLock(&api.Variable{Path: "l", Lock: &api.VariableLock{ID: id}}, nil)
	if code, body := vtStatus(t, err); code != 409 || body != "attempting to modify locked variable" {
		t.Fatalf("renew after 2×TTL: %d %q", code, body)
	}
	if got, _, err := vars.Read("l", nil); err != nil || got.Lock == nil || got.Lock.ID != id || got.ModifyIndex != v.ModifyIndex {
		t.Fatalf("lock gone before LockDelay: %+v %v", got, err)
	}
	// A second acquirer still conflicts.
	if _, _, err := vars.AcquireLock(&api.Variable{Path: "l"}, nil); err == nil {
		t.Fatal("acquired during LockDelay")
	}

	// Then the leader releases it: ModifyIndex moves, Items stay.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.WaitFor(ctx, func(v *View) bool {
		for _, e := range v.Events() {
			if e.Type == EventLockRelease {
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal("lock never expired")
	}
	released := time.Since(renewed)
	if released < 2*ttl+delay {
		t.Fatalf("released %v after the last renewal, before 2×TTL+LockDelay", released)
	}
	ev := lockEvents(s, EventLockRelease)[0]
	if ev.Details["reason"] != "expired" || ev.Details["lock_id"] != id {
		t.Fatalf("event %+v", ev)
	}
	got, _, err := vars.Read("l", nil)
	if err != nil || got.Lock != nil || got.ModifyIndex <= v.ModifyIndex || got.Items["k"] != "v" {
		t.Fatalf("after expiry: %+v %v", got, err)
	}
	if _, _, err := vars.AcquireLock(&api.Variable{Path: "l", Lock: lock}, nil); err != nil {
		t.Fatalf("acquire after expiry: %v", err)
	}
}

func TestLockShortTTLNeedsConfig(t *testing.T) {
	s := vtSim(t, Config{})
	r := vtDo(t, s, "PUT", "/v1/var/l?lock-acquire", "", `{"Lock":{"TTL":"100ms"}}`)
	if r.code != 400 {
		t.Fatalf("100ms TTL accepted without AllowShortLockTTL: %d", r.code)
	}
}

// TestLockLeaserFailover runs two api.LockLeasers on one lock: A holds it, then
// fails (its context is cancelled, or its host goes down so it cannot renew); B
// takes over, and the two never hold it at once.
func TestLockLeaserFailover(t *testing.T) {
	for _, mode := range []string{"cancel", "stop renewing"} {
		t.Run(mode, func(t *testing.T) {
			const ttl = 100 * time.Millisecond
			s := vtSim(t, Config{AllowShortLockTTL: true, Clients: 1, BootTime: 10 * time.Second})
			h, _ := s.Host("client-1")
			ca := vtClient(t, s, "http://"+h.Addr, "") // A talks to its host's agent
			cb := vtClient(t, s, "", "")

			var mu sync.Mutex
			holders, maxHolders := 0, 0
			var order []string
			held := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
			protected := func(name string) func(context.Context) error {
				return func(ctx context.Context) error {
					mu.Lock()
					holders++
					maxHolders = max(maxHolders, holders)
					order = append(order, name)
					close(held[name])
					mu.Unlock()
					<-ctx.Done()
					mu.Lock()
					holders--
					mu.Unlock()
					return nil
				}
			}
			leaser := func(c *api.Client) *api.LockLeaser {
				l, err := c.Locks(api.WriteOptions{}, api.Variable{Path: "rollboot/leader",
					Lock: &api.VariableLock{TTL: ttl.String(), LockDelay: "50ms"}})
				if err != nil {
					t.Fatal(err)
				}
				return c.NewLockLeaser(l)
			}
			ctxA, cancelA := context.WithCancel(context.Background())
			ctxB, cancelB := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); _ = leaser(ca).Start(ctxA, protected("a")) }()
			t.Cleanup(func() { cancelA(); cancelB(); wg.Wait() })

			timeout := time.After(10 * time.Second)
			select {
			case <-held["a"]:
			case <-timeout:
				t.Fatal("A never acquired")
			}
			go func() { defer wg.Done(); _ = leaser(cb).Start(ctxB, protected("b")) }()
			// B keeps being refused while A renews: several of B's retry periods.
			select {
			case <-held["b"]:
				t.Fatal("B acquired while A held the lock")
			case <-time.After(5 * ttl):
			}
			failed := time.Now()
			if mode == "cancel" {
				cancelA()
			} else if err := s.Reboot("client-1"); err != nil {
				t.Fatal(err)
			}
			select {
			case <-held["b"]:
			case <-timeout:
				t.Fatal("B never took over")
			}
			took := time.Since(failed)
			if mode == "stop renewing" && took < 2*ttl {
				t.Fatalf("B took over %v after A stopped renewing: before the TTL ran out", took)
			}
			mu.Lock()
			defer mu.Unlock()
			if maxHolders != 1 || strings.Join(order, ",") != "a,b" {
				t.Fatalf("holders at once %d, order %v", maxHolders, order)
			}
			acq := lockEvents(s, EventLockAcquire)
			if len(acq) < 2 || acq[0].Details["lock_id"] == acq[len(acq)-1].Details["lock_id"] {
				t.Fatalf("acquire events %+v", acq)
			}
			// A cancelled leaser releases on exit (api/locks.go Start), unless its
			// cancelled context wins the race in retryPut; then the TTL expires.
			rel := lockEvents(s, EventLockRelease)
			if len(rel) == 0 || (mode == "stop renewing" && rel[0].Details["reason"] != "expired") {
				t.Fatalf("release events %+v", rel)
			}
		})
	}
}

func TestLockHolderSeesLockOthersDoNot(t *testing.T) {
	s := vtSim(t, Config{ACL: true})
	w := s.CreateToken("writer", vtParsePolicy(t, `
namespace "default" {
  variables {
    path "*" { capabilities = ["read", "write", "list", "destroy"] }
  }
}`))
	r := vtDo(t, s, "PUT", "/v1/var/l?lock-acquire", w.SecretID, `{"Items":{"a":"b"}}`)
	var v api.Variable
	if r.code != 200 || json.Unmarshal([]byte(r.body), &v) != nil || v.Lock == nil {
		t.Fatalf("acquire: %d %s", r.code, r.body)
	}
	// The holder's update reply keeps the lock; a GET by the same token hides it.
	r = vtDo(t, s, "PUT", "/v1/var/l", w.SecretID, `{"Items":{"a":"c"},"Lock":{"ID":"`+v.Lock.ID+`"}}`)
	if r.code != 200 || !strings.Contains(r.body, v.Lock.ID) {
		t.Fatalf("holder update: %d %s", r.code, r.body)
	}
	if r := vtDo(t, s, "GET", "/v1/var/l", w.SecretID, ""); r.code != 200 || strings.Contains(r.body, "Lock") {
		t.Fatalf("GET shows lock to non-management: %s", r.body)
	}
	// After an update with the ID the stored lock has the default TTL again.
	if r := vtDo(t, s, "GET", "/v1/var/l", s.ManagementToken(), ""); !strings.Contains(r.body, `"TTL":"15s"`) {
		t.Fatalf("stored lock: %s", r.body)
	}
}
