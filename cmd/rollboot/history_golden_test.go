//go:build !norollbootsim

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// `rollboot history`, with -json, -host and -n, against the emulator holding a
// clean cycle, a forced one asked for by hand, a failed attempt, a released
// stuck host approved by an operator (approval = "manual") and a record
// that does not decode (skipped). Pinned byte for byte.
func TestHistoryGolden(t *testing.T) {
	s, err := nomadsim.New(nomadsim.Config{Clients: 1, Seed: 1})
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
	at := time.Date(2026, 3, 4, 5, 0, 0, 0, time.UTC)
	tl := func(offsets ...any) map[string]time.Time {
		m := map[string]time.Time{}
		for i := 0; i < len(offsets); i += 2 {
			m[offsets[i].(string)] = at.Add(offsets[i+1].(time.Duration))
		}
		return m
	}
	for _, h := range []store.HistoryRecord{
		{Host: "web-1", Group: "web", GrantID: "g1", Outcome: "rebooted", Reason: "sentinel file /var/run/reboot-required",
			BootIDBefore: "b1", BootIDAfter: "b2", Finished: at.Add(4 * time.Minute),
			Timeline: tl(store.PhasePending, time.Duration(0), store.PhaseDraining, 5*time.Second, store.PhaseDrained, 65*time.Second,
				store.PhaseRebooting, 70*time.Second, store.PhaseRejoining, 110*time.Second, store.PhaseIdle, 4*time.Minute)},
		{Host: "web-2", Group: "web", GrantID: "g2", Outcome: "rebooted", Reason: "manual request: kernel CVE", RequestedBy: "ops@bastion",
			Forced: true, BootIDBefore: "b3", BootIDAfter: "b4", Finished: at.Add(20 * time.Minute),
			Timeline: tl(store.PhasePending, 5*time.Minute, store.PhaseDraining, 6*time.Minute, store.PhaseDrained, 16*time.Minute,
				store.PhaseRebooting, 16*time.Minute, store.PhaseRejoining, 17*time.Minute, store.PhaseIdle, 20*time.Minute)},
		{Host: "web-1", Group: "web", GrantID: "g3", Outcome: "failed", Reason: "sentinel file /var/run/reboot-required",
			Error: "pre-reboot hook failed (exit status 3): check-disk: disk full", BootIDBefore: "b2", BootIDAfter: "b2",
			Finished: at.Add(30 * time.Minute),
			Timeline: tl(store.PhasePending, 25*time.Minute, store.PhaseDraining, 26*time.Minute, store.PhaseDrained, 27*time.Minute,
				store.PhaseRebooting, 28*time.Minute, store.PhaseIdle, 30*time.Minute)},
		{Host: "db-1", Group: "db", GrantID: "g4", Outcome: "released", Reason: "manual request", RequestedBy: "fleetlock:zincati-7",
			ApprovedBy: "alice", BootIDBefore: "b5", Finished: at.Add(90 * time.Minute),
			Timeline: tl(store.PhasePending, 40*time.Minute, store.PhaseDraining, 41*time.Minute, store.PhaseDrained, 42*time.Minute,
				store.PhaseStuck, 72*time.Minute, store.PhaseIdle, 90*time.Minute)},
	} {
		if err := st.AppendHistory(ctx, h, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Variables().Create(&api.Variable{Path: "rollboot/history/00000000000000000001-bad-x",
		Items: map[string]string{"host": "bad", "finished": "yesterday"}}, nil); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := newRootCmd()
		var out, errs bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errs) // a warning: this state has history but no host
		cmd.SetArgs(append([]string{"history", "--address", s.Address()}, args...))
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("history %v: %v\n%s%s", args, err, out.String(), errs.String())
		}
		return out.String()
	}
	golden(t, "history.txt", run())
	golden(t, "history.json", run("--json"))
	golden(t, "history-web-1-last.txt", run("--host", "web-1", "-n", "1"))
	// One dash, as the nomad CLI takes them, works too.
	if got := normalizeArgs(newRootCmd(), []string{"history", "-host", "web-1", "-json", "-n", "1"}); strings.Join(got, " ") != "history --host web-1 --json -n 1" {
		t.Errorf("normalized %q", got)
	}
	// A host rollboot does not know is an error, not an empty table.
	unknown := newRootCmd()
	unknown.SetArgs([]string{"history", "--address", s.Address(), "--host", "nobody"})
	unknown.SetOut(&bytes.Buffer{})
	unknown.SetErr(&bytes.Buffer{})
	if err := unknown.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), `unknown host "nobody"`) {
		t.Errorf("history of an unknown host: %v", err)
	}
	cmd := newRootCmd()
	cmd.SetArgs([]string{"history", "--address", s.Address(), "-n", "-1"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), "-n: must be 0") {
		t.Errorf("-n -1: %v", err)
	}
}
