package preview

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
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

// sample is a rollout with one of each kind of host the plan shows: in
// progress, starting now, waiting for a slot, for a window (tomorrow), held by
// something time does not end, and a host left out; history for one group only.
// The candidate lets web take three hosts at once and moves batch-2 to web.
func sampleInput(candidate bool) Input {
	web := group("web", 2, 5, nil)
	if candidate {
		web = group("web", 3, 5, nil)
	}
	web.Active = 1
	batch := group("batch", 1, 3, daily(22*time.Hour, 23*time.Hour))
	batch.Hold = "outside the maintenance windows (next opens at 2026-11-30T22:00:00Z)"
	window := phase.WaitReason{Kind: phase.WaitGroupBudget, Detail: batch.Hold}
	missing := phase.WaitReason{Kind: phase.WaitAgentMissing, Detail: "allocation failed"}
	w3 := pending("web-3", "web", -4*m)
	w3.Waiting = missing
	b1, b2 := pending("batch-1", "batch", -20*m), pending("batch-2", "batch", -10*m)
	b1.Waiting, b2.Waiting = window, window
	if candidate {
		b2 = pending("batch-2", "web", -10*m)
	}
	w1 := active("web-1", "web", store.PhaseRebooting, -1*m)
	w1.Waiting = phase.WaitReason{Kind: phase.WaitRebooting}
	w1.Plan.Reason = "/var/run/reboot-required exists"
	w2 := starts(pending("web-2", "web", -5*m))
	w2.Plan.Reason = "uptime 31.4d > 30d"
	return Input{
		Now: now,
		Observed: Observed{Now: now, Groups: []ObservedGroup{web, batch},
			Hosts: []ObservedHost{w1,
				w2, w3, pending("web-4", "web", -3*m), pending("web-5", "web", -2*m), b1, b2},
			Unreadable: map[string]string{"web-6": "list allocations: 500 Internal Server Error"}},
		DrainDeadline: 30 * m,
		Settle:        map[string]time.Duration{"batch": 5 * m},
		History:       []store.HistoryRecord{cycle("web", -60*m, 1*m, 2*m, 1*m), cycle("web", -40*m, 3*m, 2*m, 1*m)},
	}
}

func TestRenderGolden(t *testing.T) {
	p := Build(sampleInput(false))
	var txt, js bytes.Buffer
	r := Report{Policy: Source{Name: "local configuration file /etc/rollboot/rollboot.hcl"}, Plan: p}
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "plan.txt", txt.String())
	golden(t, "plan.json", js.String())
}

// A candidate that lets web take three hosts at once and moves batch-2 to web
// moves web's queue forward, and batch-2 out of batch's window.
func TestRenderDiffGolden(t *testing.T) {
	before, after := Build(sampleInput(false)), Build(sampleInput(true))
	d := Diff(before, after)
	r := Report{Policy: Source{Name: "stored policy", Version: "7"}, Plan: before,
		Candidate: &Source{Name: "file candidate.hcl"}, After: &after, Diff: &d}
	var txt bytes.Buffer
	if err := WriteText(&txt, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "diff.txt", txt.String())
}

func TestRenderNothingToDo(t *testing.T) {
	p := Build(Input{Now: now, Observed: Observed{Now: now,
		Groups: []ObservedGroup{group("web", 1, 3, nil)}}})
	var txt bytes.Buffer
	if err := WriteText(&txt, Report{Policy: Source{Name: "built-in defaults"}, Plan: p}); err != nil {
		t.Fatal(err)
	}
	golden(t, "nothing.txt", txt.String())
}

// A host next in line shows its cordon, or why it has none, after what it
// waits for.
func TestStatusTextCordon(t *testing.T) {
	for _, tc := range []struct {
		h    Host
		want string
	}{
		{Host{Position: 1, Reason: `waiting for a slot in group "all"`, Cordon: "cordoned"}, `waits: waiting for a slot in group "all"; cordoned`},
		{Host{Position: 1, Reason: "r", Cordon: "no cordon: the capacity gate holds c1"}, "waits: r; no cordon: the capacity gate holds c1"},
		{Host{Position: 1, Reason: "r"}, "waits: r"},
	} {
		if got := statusText(tc.h); got != tc.want {
			t.Errorf("statusText = %q, want %q", got, tc.want)
		}
	}
}
