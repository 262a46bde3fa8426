package agent

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

func TestNotAboutSelf(t *testing.T) {
	tests := []struct {
		name   string
		plan   store.Plan
		nodeID string // the node the host's own Nomad agent reports
		want   string // "" = the plan is about this host
	}{
		{name: "this host and its node", plan: store.Plan{Host: "web-1", NodeID: "n1"}, nodeID: "n1"},
		{name: "a host without a node, a plan without one", plan: store.Plan{Host: "web-1"}},
		{name: "another host", plan: store.Plan{Host: "web-2", NodeID: "n1"}, nodeID: "n1", want: `about host "web-2"`},
		{name: "another node", plan: store.Plan{Host: "web-1", NodeID: "n2"}, nodeID: "n1", want: "names node n2, but this host's node is n1"},
		{name: "a node for a host without one", plan: store.Plan{Host: "web-1", NodeID: "n2"}, want: "runs no Nomad client"},
		{name: "no node for a host with one", plan: store.Plan{Host: "web-1"}, nodeID: "n1", want: "names no node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := notAboutSelf(tt.plan, "web-1", tt.nodeID)
			if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
				t.Errorf("notAboutSelf = %q, want %q", got, tt.want)
			}
		})
	}
}

// markerHook is a pre-reboot hook that leaves a file behind, and the file.
func markerHook(t *testing.T) ([][]string, string) {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "hook-ran")
	return [][]string{{"touch", marker}}, marker
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// A plan that names another node is refused before anything runs: no hook, no
// reboot, no reboot announced; the refusal is published as a failed attempt of
// its grant (the coordinator undoes the drain and backs off) and logged.
func TestPlanAboutAnotherNodeIsRefused(t *testing.T) {
	e := newAgentEnv(t, nomadsim.Config{Clients: 2})
	other := e.sim.Hosts()[0].NodeID
	reb := &countingRebooter{ch: make(chan struct{}, 4)}
	log := &syncbuf.Buffer{}
	o := e.options(reb, log)
	var marker string
	o.PreHooks, marker = markerHook(t)
	stop, _ := run(t, New(o))
	defer stop()
	e.drainFor(t, "g1")
	if _, err := e.st.PutPlan(context.Background(), store.Plan{Host: e.h.Name, Phase: store.PhaseDrained, ManualRequest: true, GrantID: "g1",
		BootIDAtGrant: e.bootID, NodeID: other}); err != nil {
		t.Fatal(err)
	}
	rec := waitRecord(t, e.st, e.h.Name, "the refusal", func(r store.HostRecord) bool { return r.Failure != nil })
	f := rec.Failure
	if f.Grant != "g1" || f.Step != stepPlanCheck || !strings.Contains(f.Message, other) || !strings.Contains(f.Message, e.h.NodeID) {
		t.Errorf("failure = %+v", f)
	}
	if rec.RebootingGrant == "g1" {
		t.Error("the reboot of a plan not about this host was announced")
	}
	if !strings.Contains(log.String(), `msg="plan refused: it is not about this host`) {
		t.Errorf("no refusal logged:\n%s", log.String())
	}
	select {
	case <-reb.ch:
		t.Fatal("rebooted for a plan about another node")
	case <-time.After(300 * time.Millisecond): // fifteen polls and recheck periods
	}
	if exists(t, marker) {
		t.Fatal("a pre-reboot hook ran for a plan about another node")
	}
}

// The node gate runs before the pre-reboot hooks too: a node an operator made
// eligible again between the drain and the hooks holds the reboot, and no hook
// runs while it holds, also once the node is ineligible again (work may have
// landed meanwhile); once the node is drained again the hooks run and the host
// reboots.
func TestNodeGateHoldsBeforeTheHooks(t *testing.T) {
	e := newAgentEnv(t, nomadsim.Config{Clients: 1})
	reb := &countingRebooter{ch: make(chan struct{}, 4)}
	o := e.options(reb, nil)
	var marker string
	o.PreHooks, marker = markerHook(t)
	e.drainFor(t, "g1")
	if _, err := e.client.Nodes().ToggleEligibility(e.h.NodeID, true, nil); err != nil {
		t.Fatal(err)
	}
	stop, _ := run(t, New(o))
	defer stop()
	if _, err := e.st.PutPlan(context.Background(), store.Plan{Host: e.h.Name, Phase: store.PhaseDrained, ManualRequest: true, GrantID: "g1",
		BootIDAtGrant: e.bootID, NodeID: e.h.NodeID}); err != nil {
		t.Fatal(err)
	}
	rec := waitRecord(t, e.st, e.h.Name, "the hold", func(r store.HostRecord) bool { return r.HoldReason != "" })
	if !strings.Contains(rec.HoldReason, "eligible") || rec.RebootingGrant != "g1" {
		t.Errorf("hold %q for grant %q", rec.HoldReason, rec.RebootingGrant)
	}
	select {
	case <-reb.ch:
		t.Fatal("rebooted a node Nomad may place work on")
	case <-time.After(300 * time.Millisecond): // six recheck periods
	}
	if exists(t, marker) {
		t.Fatal("a pre-reboot hook ran while the node gate held")
	}
	if _, err := e.client.Nodes().ToggleEligibility(e.h.NodeID, false, nil); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, e.st, e.h.Name, "the hold on the eligibility change", func(r store.HostRecord) bool {
		return strings.Contains(r.HoldReason, "eligibility changed after its drain completed")
	})
	if exists(t, marker) {
		t.Fatal("a pre-reboot hook ran for a node that was eligible after its drain")
	}
	e.drainFor(t, "g1")
	select {
	case <-reb.ch:
	case <-time.After(20 * time.Second):
		t.Fatal("no reboot after the node was drained again")
	}
	if !exists(t, marker) {
		t.Fatal("the host rebooted without its pre-reboot hook")
	}
}

// While the agent holds a reboot, a record rewritten by someone else (any agent
// token can) is put back, as it is while the agent is idle.
func TestRecordRestoredDuringAHold(t *testing.T) {
	e := newAgentEnv(t, nomadsim.Config{Clients: 1})
	reb := &countingRebooter{ch: make(chan struct{}, 4)}
	e.drainFor(t, "g1")
	if _, err := e.client.Nodes().ToggleEligibility(e.h.NodeID, true, nil); err != nil {
		t.Fatal(err)
	}
	stop, _ := run(t, New(e.options(reb, nil)))
	defer stop()
	ctx := context.Background()
	if _, err := e.st.PutPlan(ctx, store.Plan{Host: e.h.Name, Phase: store.PhaseDrained, ManualRequest: true, GrantID: "g1",
		BootIDAtGrant: e.bootID, NodeID: e.h.NodeID}); err != nil {
		t.Fatal(err)
	}
	held := waitRecord(t, e.st, e.h.Name, "the hold", func(r store.HostRecord) bool { return r.HoldReason != "" })
	forged := held
	forged.HoldReason, forged.RebootingGrant, forged.RebootRequired, forged.Reason = "", "", true, "forged"
	idx, err := e.st.PutHost(ctx, forged)
	if err != nil {
		t.Fatal(err)
	}
	rec := waitRecord(t, e.st, e.h.Name, "the record restored", func(r store.HostRecord) bool { return r.ModifyIndex > idx })
	if rec.Reason == "forged" || rec.HoldReason == "" || rec.RebootingGrant != "g1" {
		t.Errorf("record after the forgery: %+v", rec)
	}
	if reb.count() != 0 {
		t.Fatal("the hold ended without the node being ineligible")
	}
}

// A grant answers this host's own need, or a request: a need another host
// wrote into this host's record (any agent token can) brings a grant that
// this host's agent refuses, since its own detectors see none.
func TestNotItsNeed(t *testing.T) {
	booted := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		name string
		plan store.Plan
		rec  store.HostRecord
		want string
	}{
		{name: "its own need", plan: store.Plan{Reason: "kernel"}, rec: store.HostRecord{RebootRequired: true}},
		{name: "a request, no need of its own", plan: store.Plan{Reason: "manual request", ManualRequest: true}},
		{name: "its detectors failed: it cannot tell", plan: store.Plan{Reason: "kernel"}, rec: store.HostRecord{DetectError: "boom"}},
		{name: "a need it does not see", plan: store.Plan{Reason: "forged"}, want: `a need this host does not see ("forged", not a request)`},
		{name: "its own uptime", plan: store.Plan{Reason: "uptime 31d > 30d", UptimeBootedAt: booted}, rec: store.HostRecord{BootedAt: booted}},
		{name: "an uptime of another boot (a forged boot time)", plan: store.Plan{Reason: "uptime 31d > 30d", UptimeBootedAt: booted.Add(-time.Hour)},
			rec: store.HostRecord{BootedAt: booted}, want: `a need this host does not see ("uptime 31d > 30d", not a request)`},
		{name: "an uptime need, its boot time unknown", plan: store.Plan{Reason: "uptime 31d > 30d", UptimeBootedAt: booted},
			want: `a need this host does not see`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := notItsNeed(tt.plan, tt.rec)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("notItsNeed = %q, want %q", got, tt.want)
			}
		})
	}
}
