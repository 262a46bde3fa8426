package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// flakyRebooter fails every reboot and counts them.
type flakyRebooter struct {
	mu    sync.Mutex
	calls int
	ch    chan struct{}
}

func (f *flakyRebooter) Reboot(context.Context) error {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	select {
	case f.ch <- struct{}{}:
	default:
	}
	return errors.New("reboot refused")
}

// An agent whose reboot failed retries only while the stored plan still grants it:
// once the host is released (plan idle), no retry reboots the host undrained.
func TestRetryNeedsACurrentGrant(t *testing.T) {
	_, h, client := simHost(t, 1)
	st := store.New(client.Variables(), "rollboot", "")
	bootID, err := ReadBootID(filepath.Join(h.Dir, "boot_id"))
	if err != nil {
		t.Fatal(err)
	}
	reb := &flakyRebooter{ch: make(chan struct{}, 4)}
	ctx := context.Background()
	a := New(Options{Host: h.Name, Store: st, Local: client.Agent(), NodeList: client.Nodes(), BootIDFile: filepath.Join(h.Dir, "boot_id"),
		Detectors: []Detector{FileDetector{Path: filepath.Join(h.Dir, "reboot-required")}},
		Rebooter:  reb, RetryAfter: 100 * time.Millisecond, PollEvery: 20 * time.Millisecond})
	stop, _ := run(t, a)

	// The coordinator's part, played by the test: a grant for this boot.
	idx, err := st.PutPlan(ctx, store.Plan{Host: h.Name, Phase: store.PhaseDrained, ManualRequest: true, GrantID: "g1", BootIDAtGrant: bootID, NodeID: h.NodeID})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-reb.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not try to reboot")
	}
	// It failed; the operator releases the host before the retry.
	if _, err := st.PutPlan(ctx, store.Plan{Host: h.Name, Phase: store.PhaseIdle, ModifyIndex: idx}); err != nil {
		t.Fatal(err)
	}
	// Many retry periods later, no second reboot.
	select {
	case <-reb.ch:
		t.Fatal("the agent rebooted again after its grant was withdrawn")
	case <-time.After(time.Second):
	}
	stop()
	if _, err := os.Stat(h.Dir); err != nil {
		t.Fatal(err)
	}
}

// TestStartedAfterTheRecord: Started runs once, when the agent has published
// the record of this boot, and not again as the agent goes on.
func TestStartedAfterTheRecord(t *testing.T) {
	_, h, client := simHost(t, 1)
	st := store.New(client.Variables(), "rollboot", "")
	type call struct {
		published bool
		err       error
	}
	calls := make(chan call, 4)
	a := New(Options{Host: h.Name, Store: st, Local: client.Agent(), NodeList: client.Nodes(), BootIDFile: filepath.Join(h.Dir, "boot_id"),
		Detectors: []Detector{FileDetector{Path: filepath.Join(h.Dir, "reboot-required")}},
		Rebooter:  &flakyRebooter{ch: make(chan struct{}, 1)}, PollEvery: 20 * time.Millisecond,
		Started: func() {
			_, err := st.Host(context.Background(), h.Name)
			calls <- call{published: err == nil, err: err}
		}})
	stop, _ := run(t, a)
	defer stop()
	select {
	case c := <-calls:
		if !c.published {
			t.Fatalf("Started ran before the host record was published: %v", c.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Started did not run")
	}
	select {
	case <-calls:
		t.Fatal("Started ran twice")
	case <-time.After(300 * time.Millisecond): // fifteen polls
	}
}

// A grant withdrawn while its attempt runs (the coordinator granted the slot
// again: a new grant ID) ends the attempt at once, and the new grant is
// carried out without waiting RetryAfter: the coordinator counts its rejoin
// deadline from the new grant. The withdrawn grant is not tried again.
func TestWithdrawnGrantNoRetryWait(t *testing.T) {
	_, h, client := simHost(t, 1)
	st := store.New(client.Variables(), "rollboot", "")
	bootID, err := ReadBootID(filepath.Join(h.Dir, "boot_id"))
	if err != nil {
		t.Fatal(err)
	}
	started := filepath.Join(t.TempDir(), "hook-started")
	reb := &flakyRebooter{ch: make(chan struct{}, 4)}
	a := New(Options{Host: h.Name, Store: st, Local: client.Agent(), NodeList: client.Nodes(), BootIDFile: filepath.Join(h.Dir, "boot_id"),
		Detectors: []Detector{FileDetector{Path: filepath.Join(h.Dir, "reboot-required")}},
		// The first attempt's hook runs long enough for the grant to change.
		PreHooks: [][]string{{"sh", "-c", `test -e ` + started + ` && exit 0; touch ` + started + `; sleep 1`}},
		Rebooter: reb, RetryAfter: time.Hour, PollEvery: 20 * time.Millisecond})
	stop, _ := run(t, a)
	defer stop()

	ctx := context.Background()
	idx, err := st.PutPlan(ctx, store.Plan{Host: h.Name, Phase: store.PhaseDrained, ManualRequest: true, GrantID: "g1", BootIDAtGrant: bootID, NodeID: h.NodeID})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first attempt's hook did not run")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := st.PutPlan(ctx, store.Plan{Host: h.Name, Phase: store.PhaseDrained, ManualRequest: true, GrantID: "g2", BootIDAtGrant: bootID,
		NodeID: h.NodeID, ModifyIndex: idx}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reb.ch:
	case <-time.After(15 * time.Second): // far below RetryAfter
		t.Fatal("the new grant was not carried out: the agent waited after the withdrawn one")
	}
	reb.mu.Lock()
	calls := reb.calls
	reb.mu.Unlock()
	if calls != 1 {
		t.Fatalf("%d reboot calls, want 1 (the withdrawn grant must not reach the reboot)", calls)
	}
}
