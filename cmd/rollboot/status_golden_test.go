//go:build !norollbootsim

package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/status"
	"github.com/rollboot/rollboot/internal/store"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// `rollboot status` and `status -json`, run against the emulator holding one of
// each kind of record the view shows: a host with a need and a plan, a host
// whose agent holds and failed, a record naming another host's node, a record
// that does not decode, a plan without a record, a plan with an unreadable item,
// a manual request for a host without an agent, an unreadable control entry, a
// pause, and a stored policy newer than the one the leader enforces. The output is pinned byte for byte (node IDs replaced by their host's name).
func TestStatusGolden(t *testing.T) {
	s, err := nomadsim.New(nomadsim.Config{Servers: 1, Clients: 3, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c, err := api.NewClient(&api.Config{Address: s.Address()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := store.New(c.Variables(), "rollboot", "default")
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	node := map[string]string{}
	for _, h := range s.Hosts() {
		node[h.Name] = h.NodeID
	}
	for _, rec := range []store.HostRecord{
		{Host: "client-1", NodeID: node["client-1"], Roles: []string{store.RoleNomadClient}, BootID: "boot-1",
			RebootRequired: true, Reason: "sentinel file /var/run/reboot-required", RequestedAt: at, DetectError: "command check-kernel: exit status 2"},
		{Host: "client-2", NodeID: node["client-2"], Roles: []string{store.RoleNomadClient, store.RoleFleetLock}, FleetLockID: "zincati-2",
			BootID: "boot-2", RebootingGrant: "g2", HoldReason: "the node runs a service allocation",
			Failure:       &store.RebootFailure{Grant: "g1", Step: store.StepPreHook, ExitStatus: 3, Message: "check-disk: disk full", At: at},
			DiscoverError: "consul: lookup consul.invalid: no such host"},
		{Host: "client-3", NodeID: node["client-1"], Roles: []string{store.RoleNomadClient}},
	} {
		if _, err := st.PutHost(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []store.Plan{
		{Host: "client-1", Group: "all", Phase: store.PhaseDraining, GrantID: "g9", Waiting: "drain: 2 allocations left"},
		{Host: "client-2", Group: "all", Phase: store.PhaseRebooting, GrantID: "g2", LastError: "cannot read node: 500"},
		{Host: "gone", NodeID: "0123456789abcdef", Group: "edge", Phase: store.PhaseStuck, Reason: "manual request",
			LastError: "the host did not come back within 10m0s"},
	} {
		if _, err := st.PutPlan(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// A policy stored twice, the leader enforcing the first version still.
	for v := 1; v <= 2; v++ {
		rec := store.PolicyRecord{PolicyVersion: store.PolicyVersion{Version: v, Source: "group \"all\" {}\n", Filename: "p.hcl", AppliedBy: "ops", AppliedAt: at}}
		cur, _ := st.Policy(ctx)
		if _, err := st.PutPolicy(ctx, rec, cur.ModifyIndex); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.PutEnforcement(ctx, store.Enforcement{Leader: "coord-1 (pid 7)", PolicyVersion: 1, Since: at}, 0); err != nil {
		t.Fatal(err)
	}
	vars := c.Variables()
	for _, v := range []*api.Variable{
		{Path: "rollboot/hosts/ghost", Items: map[string]string{"host": "ghost", "reboot_required": "maybe"}},
		{Path: "rollboot/plan/odd", Items: map[string]string{"host": "odd", "phase": store.PhaseIdle, "attempt": "many"}},
		{Path: "rollboot/control", Items: map[string]string{"paused": "true", "pause_reason": "change freeze",
			"requests": `{"lonely":{"at":"` + at.Format(time.RFC3339Nano) + `","by":"ops"},"client-3":{"at":"soon"}}`}},
	} {
		if _, _, err := vars.Create(v, nil); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := newRootCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"status", "--address", s.Address()}, args...))
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("status %v: %v\n%s", args, err, out.String())
		}
		text := out.String()
		for host, id := range node {
			if id != "" {
				text = strings.ReplaceAll(text, id, "<node of "+host+">")
				text = strings.ReplaceAll(text, id[:8], host) // as wide: the table stays aligned
			}
		}
		return text
	}
	if err := st.AppendHistory(ctx, store.HistoryRecord{Host: "client-2", Group: "all", GrantID: "g0", Outcome: "rebooted",
		Reason: "sentinel file /var/run/reboot-required", BootIDBefore: "boot-0", BootIDAfter: "boot-2",
		Timeline: map[string]time.Time{store.PhasePending: at.Add(-time.Hour), store.PhaseDraining: at.Add(-50 * time.Minute),
			store.PhaseRebooting: at.Add(-45 * time.Minute), store.PhaseRejoining: at.Add(-44 * time.Minute)},
		Finished: at.Add(-40 * time.Minute)}, 10); err != nil {
		t.Fatal(err)
	}
	golden(t, "status.json", run("--json"))
	table := run()
	golden(t, "status.txt", table)
	for i, l := range strings.Split(table, "\n") {
		if n := utf8.RuneCountInString(l); n > status.TableWidth {
			t.Errorf("status.txt line %d has %d columns, more than %d", i+1, n, status.TableWidth)
		}
	}
	golden(t, "status-verbose.txt", run("--verbose"))
	// One host in full: its reason whole, its request with who made it, its
	// last cycle.
	golden(t, "status-host.txt", run("client-2"))
	golden(t, "status-host.json", run("client-2", "--json"))
	golden(t, "status-host-lonely.txt", run("lonely"))
	cmd := newRootCmd()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{"status", "client-9", "--address", s.Address()})
	if err := cmd.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), `unknown host "client-9"`) || !strings.Contains(err.Error(), `"client-1"`) {
		t.Errorf("status of an unknown host: %v", err)
	}
}
