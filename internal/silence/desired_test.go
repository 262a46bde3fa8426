package silence

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

func mustRules(t *testing.T, srcs ...string) Rules {
	t.Helper()
	tps, err := CheckMatchers(srcs)
	if err != nil {
		t.Fatal(err)
	}
	return Rules{Matchers: tps, Duration: 30 * time.Minute, Tail: 5 * time.Minute}
}

func TestDesired(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	on := mustRules(t, `instance=~"{{.HostRegex}}(:[0-9]+)?"`, `job!="x"`)
	off := Rules{Duration: 30 * time.Minute, Tail: 5 * time.Minute}
	wantMatchers := []Matcher{{Name: "instance", Value: `web\.1(:[0-9]+)?`, IsRegex: true, IsEqual: true},
		{Name: "job", Value: "x"}, Own}
	plan := func(phase string, since time.Duration) store.Plan {
		return store.Plan{Host: "web.1", Group: "web", Phase: phase, PhaseSince: now.Add(since)}
	}
	kept := func(ends time.Duration) Kept { return Kept{ID: "s1", EndsAt: now.Add(ends)} }
	for _, tc := range []struct {
		name    string
		plan    *store.Plan
		rules   Rules
		kept    *Kept
		want    Action
		recheck time.Time
	}{
		{name: "drain starts: created", plan: ptr(plan(store.PhaseDraining, 0)), rules: on,
			want: Action{Op: OpCreate, Host: "web.1", Matchers: wantMatchers, EndsAt: now.Add(30 * time.Minute)}},
		{name: "out, plenty left: nothing until half is left", plan: ptr(plan(store.PhaseRebooting, -time.Minute)), rules: on,
			kept: ptr(kept(20 * time.Minute)), recheck: now.Add(5 * time.Minute)},
		{name: "out, less than half left: extended", plan: ptr(plan(store.PhaseRejoining, -time.Minute)), rules: on,
			kept: ptr(kept(14 * time.Minute)), want: Action{Op: OpExtend, Host: "web.1", ID: "s1", EndsAt: now.Add(30 * time.Minute)}},
		{name: "out, silence ran out: created again", plan: ptr(plan(store.PhaseDrained, -time.Minute)), rules: on,
			kept: ptr(kept(-time.Second)), want: Action{Op: OpCreate, Host: "web.1", Matchers: wantMatchers, EndsAt: now.Add(30 * time.Minute)}},
		{name: "stuck: ended at once, never extended", plan: ptr(plan(store.PhaseStuck, -time.Second)), rules: on,
			kept: ptr(kept(time.Minute)), want: Action{Op: OpEnd, Host: "web.1", ID: "s1"}},
		{name: "stuck without a silence: none created", plan: ptr(plan(store.PhaseStuck, -time.Second)), rules: on},
		{name: "back: shortened to the tail", plan: ptr(plan(store.PhaseIdle, -time.Minute)), rules: on,
			kept: ptr(kept(20 * time.Minute)), want: Action{Op: OpExtend, Host: "web.1", ID: "s1", EndsAt: now.Add(4 * time.Minute)}},
		{name: "back, in the tail: nothing until it ends", plan: ptr(plan(store.PhaseIdle, -time.Minute)), rules: on,
			kept: ptr(kept(4 * time.Minute)), recheck: now.Add(4 * time.Minute)},
		{name: "back, tail over: ended", plan: ptr(plan(store.PhaseIdle, -6*time.Minute)), rules: on,
			kept: ptr(kept(time.Minute)), want: Action{Op: OpEnd, Host: "web.1", ID: "s1"}},
		{name: "back after an aborted drain: the tail too", plan: ptr(plan(store.PhaseBackoff, -time.Minute)), rules: on,
			kept: ptr(kept(20 * time.Minute)), want: Action{Op: OpExtend, Host: "web.1", ID: "s1", EndsAt: now.Add(4 * time.Minute)}},
		{name: "ended: forgotten", plan: ptr(plan(store.PhaseIdle, -time.Hour)), rules: on,
			kept: ptr(kept(-time.Minute)), want: Action{Op: OpForget, Host: "web.1"}},
		{name: "silences turned off for the group: ended", plan: ptr(plan(store.PhaseRebooting, -time.Minute)), rules: off,
			kept: ptr(kept(20 * time.Minute)), want: Action{Op: OpEnd, Host: "web.1", ID: "s1"}},
		{name: "off: none created", plan: ptr(plan(store.PhaseDraining, 0)), rules: off},
		{name: "pending: none created", plan: ptr(plan(store.PhasePending, 0)), rules: on},
		{name: "plan gone: ended", rules: on, kept: ptr(kept(20 * time.Minute)), want: Action{Op: OpEnd, Host: "web.1", ID: "s1"}},
		{name: "creation failed, host back: shown until its tail ends", plan: ptr(plan(store.PhaseIdle, -time.Minute)), rules: on,
			kept: &Kept{Err: "create: refused", ErrAt: now.Add(-time.Minute)}, recheck: now.Add(4 * time.Minute)},
		{name: "creation failed, tail over: forgotten", plan: ptr(plan(store.PhaseIdle, -6*time.Minute)), rules: on,
			kept: &Kept{Err: "create: refused", ErrAt: now.Add(-time.Minute)}, want: Action{Op: OpForget, Host: "web.1"}},
		{name: "creation failed, host stuck: forgotten", plan: ptr(plan(store.PhaseStuck, -time.Minute)), rules: on,
			kept: &Kept{Err: "create: refused", ErrAt: now.Add(-time.Minute)}, want: Action{Op: OpForget, Host: "web.1"}},
		{name: "creation failed lately: tried again after Retry", plan: ptr(plan(store.PhaseDraining, -time.Minute)), rules: on,
			kept: &Kept{Err: "create: refused", ErrAt: now.Add(-5 * time.Second)}, recheck: now.Add(10 * time.Second)},
		{name: "creation failed a while ago: tried again", plan: ptr(plan(store.PhaseDraining, -time.Minute)), rules: on,
			kept: &Kept{Err: "create: refused", ErrAt: now.Add(-time.Minute)},
			want: Action{Op: OpCreate, Host: "web.1", Matchers: wantMatchers, EndsAt: now.Add(30 * time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Plans: map[string]store.Plan{}, Kept: map[string]Kept{}, Now: now, Retry: 15 * time.Second,
				Rules: func(g string) Rules {
					if g != "web" {
						t.Errorf("rules of group %q", g)
					}
					return tc.rules
				}}
			if tc.plan != nil {
				in.Plans["web.1"] = *tc.plan
			}
			if tc.kept != nil {
				in.Kept["web.1"] = *tc.kept
			}
			d := Desired(in)
			var want []Action
			if tc.want.Op != "" {
				want = []Action{tc.want}
			}
			if !reflect.DeepEqual(d.Actions, want) {
				t.Errorf("actions\n %+v\nwant\n %+v", d.Actions, want)
			}
			if !d.RecheckAt.Equal(tc.recheck) {
				t.Errorf("recheck at %v, want %v", d.RecheckAt, tc.recheck)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestParseMatcher(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Matcher
		err  string
	}{
		{in: `instance="web-1:9100"`, want: Matcher{Name: "instance", Value: "web-1:9100", IsEqual: true}},
		{in: `instance != web-1`, want: Matcher{Name: "instance", Value: "web-1"}},
		{in: `instance=~"web-1.*"`, want: Matcher{Name: "instance", Value: "web-1.*", IsRegex: true, IsEqual: true}},
		{in: `job!~"a|b"`, want: Matcher{Name: "job", Value: "a|b", IsRegex: true}},
		{in: `host=""`, want: Matcher{Name: "host", IsEqual: true}},
		{in: `=x`, err: "is not a matcher"},
		{in: `job~x`, err: "has no operator"},
		{in: `job="x`, err: "quotes do not close"},
		{in: `job=~"("`, err: "invalid regular expression"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseMatcher(tc.in)
			if tc.err != "" {
				if err == nil || !contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
			if back, err := ParseMatcher(got.String()); err != nil || back != got {
				t.Errorf("String %q parses as %+v, %v", got.String(), back, err)
			}
		})
	}
}

// Own leaves out every rollboot alert and nothing else: a silence can never
// cover the alerts that report the rollout itself.
func TestOwnLeavesOutRollbootAlerts(t *testing.T) {
	for name, silenced := range map[string]bool{
		"RollbootHostStuck": false, "RollbootRebootRequiredTooLong": false, "Rollboot": false,
		"NodeDown": true, "HighLoad": true, "": true, "MyRollbootAlert": true,
	} {
		if got := Own.matches(name); got != silenced {
			t.Errorf("alertname %q: silenced %v, want %v", name, got, silenced)
		}
	}
	ms, err := mustRules(t, `alertname=~".*"`, `instance="{{.Host}}"`).render(Vars{Host: "a"})
	if err != nil || ms[len(ms)-1] != Own {
		t.Errorf("a silence's matchers %v (%v) do not end with Own", ms, err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
