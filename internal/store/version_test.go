package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// A host record of a version this rollboot does not know is refused whole:
// skipped and reported like any record that cannot be used, naming the version.
func TestHostRecordVersions(t *testing.T) {
	tests := []struct {
		name    string
		version string // "" : no version item
		used    bool
		why     string
	}{
		{name: "no version: version 1", used: true},
		{name: "version 1", version: "1", used: true},
		{name: "newer version", version: "2", why: "version 2 is newer than this rollboot reads"},
		{name: "much newer", version: "17", why: "version 17 is newer"},
		{name: "unreadable version", version: "two", why: `version "two" cannot be read`},
		{name: "version 0", version: "0", why: `version "0" cannot be read`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _, c := newStore(t)
			items := map[string]string{"host": "web-1", "boot_id": "b1", "reboot_required": "true"}
			if tt.version != "" {
				items["version"] = tt.version
			}
			putRaw(t, c, "rollboot/hosts/web-1", items)
			recs, bad, _, err := st.HostsChecked(context.Background(), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tt.used {
				if len(recs) != 1 || !recs[0].RebootRequired || len(bad) != 0 {
					t.Errorf("records %+v, bad %+v", recs, bad)
				}
				return
			}
			if len(recs) != 0 || len(bad) != 1 || bad[0].Host != "web-1" || !strings.Contains(bad[0].Err, tt.why) {
				t.Errorf("records %+v, bad %+v: want it skipped, saying %q", recs, bad, tt.why)
			}
			if _, err := st.Host(context.Background(), "web-1"); !errors.Is(err, store.ErrUnknownVersion) || !errors.Is(err, store.ErrUnreadable) {
				t.Errorf("Host: err = %v", err)
			}
		})
	}
}

// A plan of a version this rollboot does not know holds its host: it counts as
// holding a slot, is reported, and is never overwritten.
func TestPlanVersions(t *testing.T) {
	tests := []struct {
		name    string
		version string
		held    bool
	}{
		{name: "no version: version 1"},
		{name: "version 1", version: "1"},
		{name: "version 2", version: "2"},
		{name: "newer version", version: "3", held: true},
		{name: "unreadable version", version: "x", held: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _, c := newStore(t)
			ctx := context.Background()
			items := map[string]string{"host": "web-1", "phase": "idle", "group": "web", "shape": "new"}
			if tt.version != "" {
				items["version"] = tt.version
			}
			putRaw(t, c, "rollboot/plan/web-1", items)
			plans, bad, err := st.PlansChecked(ctx)
			if err != nil {
				t.Fatal(err)
			}
			p := plans["web-1"]
			if !tt.held {
				if p.Phase != store.PhaseIdle || p.Group != "web" || len(bad) != 0 {
					t.Errorf("plan %+v, bad %+v", p, bad)
				}
				return
			}
			if p.Phase != store.PhaseUnreadable || !p.Active() || p.Group != "" || p.ModifyIndex == 0 ||
				!strings.Contains(p.Waiting, "newer rollboot") {
				t.Errorf("plan %+v: want it held (unreadable, active), nothing read", p)
			}
			if len(bad) != 1 || bad[0].Host != "web-1" || !strings.Contains(bad[0].Err, "version") || !strings.Contains(bad[0].Err, "not overwritten") {
				t.Errorf("bad = %+v", bad)
			}
			p.Phase = store.PhaseUnreadable
			if _, err := st.PutPlan(ctx, p); !errors.Is(err, store.ErrUnknownVersion) {
				t.Errorf("PutPlan over it: err = %v, want ErrUnknownVersion", err)
			}
			v, _, _ := c.Variables().Read("rollboot/plan/web-1", nil)
			if v.Items["shape"] != "new" || v.Items["version"] != tt.version {
				t.Errorf("the plan was overwritten: %v", v.Items)
			}
			if _, err := st.Plan(ctx, "web-1"); !errors.Is(err, store.ErrUnknownVersion) {
				t.Errorf("Plan: err = %v, want ErrUnknownVersion", err)
			}
		})
	}
}

// A plan that holds a cordon is written as version 2, which a reader that
// does not know cordons refuses (it would take the node for an operator's);
// any other plan stays version 1, and reads back the same.
func TestPlanWriteVersion(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		plan store.Plan
		want string
	}{
		{name: "no cordon", plan: store.Plan{Host: "web-1", Phase: store.PhasePending, NoCordon: "capacity"}, want: "1"},
		{name: "cordon", plan: store.Plan{Host: "web-1", Phase: store.PhasePending, CordonedAt: at, CordonNode: "n1"}, want: "2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, _, c := newStore(t)
			ctx := context.Background()
			if _, err := st.PutPlan(ctx, tt.plan); err != nil {
				t.Fatal(err)
			}
			v, _, err := c.Variables().Read("rollboot/plan/web-1", nil)
			if err != nil {
				t.Fatal(err)
			}
			if v.Items["version"] != tt.want {
				t.Errorf("version = %q, want %q", v.Items["version"], tt.want)
			}
			p, err := st.Plan(ctx, "web-1")
			if err != nil {
				t.Fatal(err)
			}
			if !p.CordonedAt.Equal(tt.plan.CordonedAt) || p.CordonNode != tt.plan.CordonNode || p.NoCordon != tt.plan.NoCordon {
				t.Errorf("read back %+v, want %+v", p, tt.plan)
			}
		})
	}
}

// History records, per-host control variables and the control variable of a
// version this rollboot does not know are refused the safe way.
func TestOtherRecordVersions(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC).Format(time.RFC3339)
	t.Run("history record skipped", func(t *testing.T) {
		st, _, c := newStore(t)
		putRaw(t, c, "rollboot/history/1-a-g1", map[string]string{"host": "a", "outcome": "rebooted", "version": "2"})
		putRaw(t, c, "rollboot/history/2-b-g2", map[string]string{"host": "b", "outcome": "rebooted", "version": "1"})
		h, err := st.History(context.Background())
		if err != nil || len(h) != 1 || h[0].Host != "b" {
			t.Errorf("history = %+v, %v", h, err)
		}
	})
	t.Run("host control: a cancel, never overwritten", func(t *testing.T) {
		st, _, c := newStore(t)
		ctx := context.Background()
		putRaw(t, c, "rollboot/requests/web-1", map[string]string{"host": "web-1", "version": "2", "requested_at": at, "release_at": at})
		ctl, err := st.Control(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := ctl.Requests["web-1"]; ok || ctl.Cancels["web-1"].IsZero() || !ctl.Releases["web-1"].IsZero() {
			t.Errorf("control = %+v: want a cancel alone", ctl)
		}
		if len(ctl.Problems) != 1 || !strings.Contains(ctl.Problems[0], "version 2") || !strings.Contains(ctl.Problems[0], "not overwritten") {
			t.Errorf("problems = %q", ctl.Problems)
		}
		_, err = st.UpdateControl(ctx, func(c *store.Control) error { delete(c.Cancels, "web-1"); return nil })
		if !errors.Is(err, store.ErrUnknownVersion) {
			t.Errorf("overwriting it: err = %v", err)
		}
		// Other hosts are not held up.
		if _, err := st.UpdateControl(ctx, func(c *store.Control) error {
			c.Requests = map[string]store.Request{"web-2": {At: time.Now().UTC()}}
			return nil
		}); err != nil {
			t.Errorf("request for another host: %v", err)
		}
		if _, err := st.ResetControl(ctx); err != nil {
			t.Errorf("reset: %v", err)
		}
		if v, _, _ := c.Variables().Read("rollboot/requests/web-1", nil); v == nil || v.Items["version"] != "2" {
			t.Errorf("the variable was overwritten: %+v", v)
		}
	})
	t.Run("control variable: paused, never overwritten", func(t *testing.T) {
		st, _, c := newStore(t)
		ctx := context.Background()
		putRaw(t, c, "rollboot/control", map[string]string{"paused": "false", "version": "3"})
		ctl, err := st.Control(ctx)
		if err != nil || !ctl.Paused || !strings.Contains(ctl.PauseReason, "newer rollboot") || len(ctl.Problems) != 1 ||
			!strings.Contains(ctl.Problems[0], "version 3") {
			t.Fatalf("control = %+v, %v: want paused and reported", ctl, err)
		}
		if _, err := st.UpdateControl(ctx, func(c *store.Control) error { c.Paused = false; return nil }); !errors.Is(err, store.ErrUnknownVersion) {
			t.Errorf("resume over it: err = %v", err)
		}
		if _, err := st.ResetControl(ctx); !errors.Is(err, store.ErrUnknownVersion) {
			t.Errorf("reset over it: err = %v", err)
		}
		if v, _, _ := c.Variables().Read("rollboot/control", nil); v.Items["version"] != "3" || v.Items["paused"] != "false" {
			t.Errorf("the control variable was overwritten: %v", v.Items)
		}
	})
}
