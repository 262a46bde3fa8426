package store_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/store"
)

func putRaw(t *testing.T, c *api.Client, path string, items map[string]string) {
	t.Helper()
	if _, _, err := c.Variables().Create(&api.Variable{Path: path, Items: items}, nil); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

func TestHostsSkipsAndReportsBadRecords(t *testing.T) {
	st, _, c := newStore(t)
	ctx := context.Background()
	for _, h := range []string{"a", "c.example"} {
		if _, err := st.PutHost(ctx, store.HostRecord{Host: h, BootID: "b"}); err != nil {
			t.Fatal(err)
		}
	}
	putRaw(t, c, "rollboot/hosts/b", map[string]string{"host": "b", "reboot_required": "maybe"})
	putRaw(t, c, "rollboot/hosts/d", map[string]string{"host": "a", "node_id": "n-of-a"}) // shadows a
	tests := []struct {
		name string
		read func() ([]store.HostRecord, []store.BadRecord, error)
	}{
		{name: "HostsChecked", read: func() ([]store.HostRecord, []store.BadRecord, error) {
			r, b, _, err := st.HostsChecked(ctx, 0, 0)
			return r, b, err
		}},
		{name: "cached read", read: func() ([]store.HostRecord, []store.BadRecord, error) {
			r, b, _, err := st.HostsChecked(ctx, 0, 0)
			return r, b, err
		}},
		{name: "Hosts", read: func() ([]store.HostRecord, []store.BadRecord, error) {
			r, _, err := st.Hosts(ctx, 0, 0)
			return r, nil, err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			recs, bad, err := tt.read()
			if err != nil {
				t.Fatalf("one bad record stopped the read: %v", err)
			}
			var names []string
			for _, r := range recs {
				names = append(names, r.Host)
			}
			if strings.Join(names, ",") != "a,c.example" {
				t.Errorf("hosts = %v, want a,c.example", names)
			}
			if tt.name == "Hosts" {
				return
			}
			if len(bad) != 2 || bad[0].Host != "b" || !strings.Contains(bad[0].Err, "reboot_required") ||
				bad[1].Host != "d" || !strings.Contains(bad[1].Err, `names host "a"`) {
				t.Errorf("bad = %+v", bad)
			}
		})
	}
}

func TestControlParsedLeniently(t *testing.T) {
	st, _, c := newStore(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	good, _ := json.Marshal(at)
	putRaw(t, c, "rollboot/control", map[string]string{
		"paused":   "false",
		"requests": `{"web-1":{"at":"` + at.Format(time.RFC3339) + `"},"web-2":{"at":"yesterday"}}`,
		"cancels":  `{"web-3":"soon","web-4":` + string(good) + `}`,
		"releases": `not json`,
	})
	ctl, err := st.Control(ctx)
	if err != nil {
		t.Fatalf("a bad entry stopped the read: %v", err)
	}
	if _, ok := ctl.Requests["web-1"]; !ok || len(ctl.Requests) != 1 {
		t.Errorf("requests = %+v, want web-1 only", ctl.Requests)
	}
	if ctl.Cancels["web-3"].IsZero() || !ctl.Cancels["web-4"].Equal(at) {
		t.Errorf("cancels = %+v: an unreadable cancel must still cancel", ctl.Cancels)
	}
	if ctl.Paused || len(ctl.Problems) != 3 {
		t.Errorf("paused %v, problems = %q", ctl.Paused, ctl.Problems)
	}
	for _, want := range []string{`"web-2"`, `"web-3"`, `"releases"`} {
		if !strings.Contains(strings.Join(ctl.Problems, "\n"), want) {
			t.Errorf("problems %q do not name %s", ctl.Problems, want)
		}
	}
}

func TestUnreadablePauseFlagHolds(t *testing.T) {
	st, _, c := newStore(t)
	putRaw(t, c, "rollboot/control", map[string]string{"paused": "maybe"})
	ctl, err := st.Control(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !ctl.Paused || !strings.Contains(ctl.PauseReason, "cannot be read") || len(ctl.Problems) != 1 {
		t.Errorf("control = %+v", ctl)
	}
}

// TestRequestsDoNotAccumulateInControl: each host's request lives in its own
// variable, deleted once carried out; the control variable stays small.
func TestRequestsDoNotAccumulateInControl(t *testing.T) {
	st, _, c := newStore(t)
	ctx := context.Background()
	const n = 300 // 283 requests filled the single variable to Nomad's 64 KiB limit
	for i := 0; i < n; i++ {
		host := "fleetlock-" + strings.Repeat("0", 40) + string(rune('a'+i%26)) + strings.Repeat("x", i%7) + itoa(i)
		if _, err := st.UpdateControl(ctx, func(ctl *store.Control) error {
			if ctl.Requests == nil {
				ctl.Requests = map[string]store.Request{}
			}
			ctl.Requests[host] = store.Request{At: time.Now().UTC(), By: "fleetlock:id", Reason: "FleetLock pre-reboot"}
			return nil
		}); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if _, err := st.UpdateControl(ctx, func(ctl *store.Control) error { ctl.Paused = true; return nil }); err != nil {
		t.Fatal(err)
	}
	v, _, err := c.Variables().Read("rollboot/control", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v.Items["requests"]; ok || len(v.Items["paused"]) == 0 {
		t.Errorf("control variable holds %v", v.Items)
	}
	ctl, err := st.Control(ctx)
	if err != nil || len(ctl.Requests) != n || !ctl.Paused {
		t.Fatalf("control: %d requests, paused %v, err %v", len(ctl.Requests), ctl.Paused, err)
	}
	// Carried out: every request is removed, and its variable with it.
	if _, err := st.UpdateControl(ctx, func(ctl *store.Control) error {
		for h := range ctl.Requests {
			delete(ctl.Requests, h)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	metas, _, err := c.Variables().PrefixList("rollboot/requests/", nil)
	if err != nil || len(metas) != 0 {
		t.Errorf("request variables left: %d (err %v)", len(metas), err)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestControlMigration: requests written by an older version into the control
// variable are honoured, and move out of it when they change.
func TestControlMigration(t *testing.T) {
	st, _, c := newStore(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC).Format(time.RFC3339)
	putRaw(t, c, "rollboot/control", map[string]string{
		"paused":   "false",
		"requests": `{"web-1":{"at":"` + at + `","by":"alice"},"web-2":{"at":"` + at + `"}}`,
		"releases": `{"web-3":"` + at + `"}`,
	})
	ctl, err := st.Control(ctx)
	if err != nil || len(ctl.Requests) != 2 || ctl.Requests["web-1"].By != "alice" || len(ctl.Releases) != 1 {
		t.Fatalf("old entries not honoured: %+v, %v", ctl, err)
	}
	// The coordinator clears web-1's request (its reboot is done); a cancel of web-2.
	if _, err := st.UpdateControl(ctx, func(ctl *store.Control) error {
		delete(ctl.Requests, "web-1")
		delete(ctl.Requests, "web-2")
		ctl.Cancels = map[string]time.Time{"web-2": time.Now().UTC()}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	v, _, _ := c.Variables().Read("rollboot/control", nil)
	if _, ok := v.Items["requests"]; ok || !strings.Contains(v.Items["releases"], "web-3") {
		t.Errorf("control variable after migration: %v", v.Items)
	}
	ctl, err = st.Control(ctx)
	if err != nil || len(ctl.Requests) != 0 || ctl.Cancels["web-2"].IsZero() || ctl.Releases["web-3"].IsZero() {
		t.Errorf("after migration: %+v, %v", ctl, err)
	}
}

func TestResetControl(t *testing.T) {
	st, _, c := newStore(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC).Format(time.RFC3339)
	putRaw(t, c, "rollboot/control", map[string]string{
		"paused":   "true",
		"requests": `{"web-1":{"at":"` + at + `"},"web-2":{"at":7}}`,
	})
	putRaw(t, c, "rollboot/requests/web-4", map[string]string{"host": "web-4", "requested_at": "later", "release_at": at})
	rep, err := st.ResetControl(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Moved, ",") != "web-1" || len(rep.Dropped) != 2 {
		t.Errorf("report = %+v", rep)
	}
	v, _, _ := c.Variables().Read("rollboot/control", nil)
	if len(v.Items) != 2 || v.Items["paused"] != "true" || v.Items["version"] != "1" {
		t.Errorf("control variable = %v, want the pause flag (and the schema version) only", v.Items)
	}
	ctl, err := st.Control(ctx)
	if err != nil || len(ctl.Problems) != 0 || len(ctl.Requests) != 1 || ctl.Releases["web-4"].IsZero() {
		t.Errorf("after reset: %+v, %v", ctl, err)
	}
}

// TestPlanPartlyUnreadable: a plan with an item that cannot be read is kept with
// what could be read (its host still holds its slot) and reported.
func TestPlanPartlyUnreadable(t *testing.T) {
	st, _, c := newStore(t)
	ctx := context.Background()
	if _, err := st.PutPlan(ctx, store.Plan{Host: "web-1", Phase: store.PhaseIdle}); err != nil {
		t.Fatal(err)
	}
	putRaw(t, c, "rollboot/plan/web-2", map[string]string{"host": "web-2", "phase": "draining", "group": "web",
		"grant_id": "g1", "attempt": "many", "node_id": "n2"})
	plans, bad, err := st.PlansChecked(ctx)
	if err != nil {
		t.Fatalf("one bad plan stopped the read: %v", err)
	}
	p := plans["web-2"]
	if !p.Active() || p.Group != "web" || p.GrantID != "g1" || p.Attempt != 0 || p.ModifyIndex == 0 {
		t.Errorf("plan = %+v, want it kept (draining, group web) with attempt read as 0", p)
	}
	if len(plans) != 2 || len(bad) != 1 || bad[0].Host != "web-2" || !strings.Contains(bad[0].Err, `"attempt"`) {
		t.Errorf("plans %d, bad = %+v", len(plans), bad)
	}
	// The coordinator's next write (CAS on the stored index) repairs it.
	p.Attempt = 1
	if _, err := st.PutPlan(ctx, p); err != nil {
		t.Fatal(err)
	}
	if _, bad, _ := st.PlansChecked(ctx); len(bad) != 0 {
		t.Errorf("still bad after a write: %+v", bad)
	}
}

// TestControlMergeKeepsOldEntries: an entry left in the control variable by an
// older version still counts next to a newer per-host variable of the same host.
func TestControlMergeKeepsOldEntries(t *testing.T) {
	st, _, c := newStore(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC).Format(time.RFC3339)
	putRaw(t, c, "rollboot/control", map[string]string{"cancels": `{"web-1":"` + at + `"}`})
	putRaw(t, c, "rollboot/requests/web-1", map[string]string{"host": "web-1", "requested_at": at})
	ctl, err := st.Control(ctx)
	if err != nil || ctl.Cancels["web-1"].IsZero() || ctl.Requests["web-1"].At.IsZero() {
		t.Fatalf("merged control = %+v, %v", ctl, err)
	}
	if _, err := st.ResetControl(ctx); err != nil {
		t.Fatal(err)
	}
	v, _, err := c.Variables().Read("rollboot/requests/web-1", nil)
	if err != nil || v.Items["cancel_at"] == "" || v.Items["requested_at"] == "" {
		t.Errorf("after reset: %v, %v", v, err)
	}
}

func TestHostControlParsedLeniently(t *testing.T) {
	st, _, c := newStore(t)
	putRaw(t, c, "rollboot/requests/web~1", map[string]string{"host": "web.1", "requested_at": "later",
		"cancel_at": "never", "release_at": "2026-12-02T10:00:00Z"})
	ctl, err := st.Control(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ctl.Requests["web.1"]; ok || ctl.Cancels["web.1"].IsZero() || ctl.Releases["web.1"].IsZero() {
		t.Errorf("control = %+v: want no request, a cancel (at the write time) and the release", ctl)
	}
	if len(ctl.Problems) != 2 || !strings.Contains(ctl.Problems[1], "counted as a cancel") {
		t.Errorf("problems = %q", ctl.Problems)
	}
}
