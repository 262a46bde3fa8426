package coordinator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

// TestBadRecordsDoNotStopReconcile: through the emulator, a record that fails to
// decode and a record shadowing another host's node are skipped and reported;
// every other host goes on.
func TestBadRecordsDoNotStopReconcile(t *testing.T) {
	sim, c := simtest.Start(t, nomadsim.Config{Clients: 3}, nil)
	ctx := context.Background()
	st := store.New(c.Variables(), "rollboot", "")
	node := func(h string) string {
		n, err := sim.Node(h)
		if err != nil {
			t.Fatal(err)
		}
		return n.ID
	}
	put := func(rec store.HostRecord) {
		if _, err := st.PutHost(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	put(store.HostRecord{Host: "client-1", NodeID: node("client-1"), BootID: "b1"})
	put(store.HostRecord{Host: "client-3", NodeID: node("client-3"), BootID: "b3", RebootRequired: true,
		Reason: "sentinel", RequestedAt: time.Now().UTC()})
	// client-2's record does not decode.
	if _, _, err := c.Variables().Create(&api.Variable{Path: "rollboot/hosts/client-2",
		Items: map[string]string{"host": "client-2", "reboot_required": "maybe"}}, nil); err != nil {
		t.Fatal(err)
	}
	// A record under another name shadows client-1's node and asks for a reboot.
	put(store.HostRecord{Host: "client-9", NodeID: node("client-1"), BootID: "x", RebootRequired: true,
		Reason: "forged", RequestedAt: time.Now().Add(-time.Hour).UTC()})

	co := New(Options{
		Deps: Deps{Nodes: c.Nodes(), Store: st, Jobs: c.Jobs()},
		Rules: rules.Rules{
			DefaultGroup: policy.Group{Name: policy.DefaultGroupName, Concurrency: 2},
			Timing:       phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Minute, RetryMaxBackoff: time.Hour},
		},
	})
	// One pass: the needs seen, stored pending and granted (regrant.go).
	if err := co.ReconcileOnce(ctx); err != nil {
		t.Fatal(err)
	}
	plans, err := st.Plans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := plans["client-3"]; p.Phase != store.PhaseDraining {
		t.Errorf("client-3 is %q, want draining: one bad record stopped the others", p.Phase)
	}
	if p, ok := plans["client-9"]; ok {
		t.Errorf("the shadowing record got a plan: %+v", p)
	}
	n1, _ := sim.Node("client-1")
	if n1.DrainStrategy != nil || n1.SchedulingEligibility != "eligible" {
		t.Errorf("client-1 was drained for a record that is not its own")
	}
	var ignored []string
	for _, b := range co.Ignored() {
		ignored = append(ignored, b.Host)
	}
	if strings.Join(ignored, ",") != "client-2,client-9" {
		t.Errorf("ignored = %v, want client-2 and client-9", co.Ignored())
	}
}

// TestIgnoredRecordStillGivesTheNodeBack: a host mid-cycle whose record is
// forged (and so ignored) still gets the node its plan took out of service back.
func TestIgnoredRecordStillGivesTheNodeBack(t *testing.T) {
	sim, c := simtest.Start(t, nomadsim.Config{Clients: 2}, nil)
	ctx := context.Background()
	st := store.New(c.Variables(), "rollboot", "")
	n1, _ := sim.Node("client-1")
	n2, _ := sim.Node("client-2")
	if _, err := c.Nodes().ToggleEligibility(n1.ID, false, nil); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if _, err := st.PutPlan(ctx, store.Plan{Host: "client-1", Phase: store.PhaseRejoining, PhaseSince: now, GrantID: "g1",
		NodeID: n1.ID, EligibleBefore: true, BootIDAtGrant: "b1",
		Timeline: map[string]time.Time{store.PhasePending: now, store.PhaseRejoining: now}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutHost(ctx, store.HostRecord{Host: "client-1", NodeID: n2.ID, BootID: "b2"}); err != nil {
		t.Fatal(err)
	}
	co := New(Options{
		Deps: Deps{Nodes: c.Nodes(), Store: st},
		Rules: rules.Rules{
			Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Minute, RetryMaxBackoff: time.Hour},
		},
	})
	for i := 0; i < 3; i++ {
		if err := co.ReconcileOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	n, _ := sim.Node("client-1")
	if n.SchedulingEligibility != "eligible" {
		t.Errorf("client-1 left %s", n.SchedulingEligibility)
	}
	if n, _ := sim.Node("client-2"); n.DrainStrategy != nil || n.SchedulingEligibility != "eligible" {
		t.Errorf("client-2 touched: %+v", n.DrainStrategy)
	}
}
