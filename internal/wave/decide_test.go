package wave

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func at(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }

func pending(name, group, fp string) Host {
	return Host{Name: name, Group: group, Fingerprint: fp, Plan: store.Plan{Host: name, Phase: store.PhasePending, PhaseSince: t0}}
}

func withPlan(h Host, phaseName string, since time.Time, mod func(*store.Plan)) Host {
	h.Plan.Phase, h.Plan.PhaseSince = phaseName, since
	if mod != nil {
		mod(&h.Plan)
	}
	return h
}

var canaryRules = Rules{"web": {Canaries: 1, Soak: 30 * time.Minute}}

func TestHoldsCanaries(t *testing.T) {
	w := func(members ...Member) State {
		return State{Waves: []Wave{{Group: "web", Fingerprint: "k1", Seen: t0, Members: members}}}
	}
	tests := []struct {
		name  string
		rules Rules
		st    State
		queue []Host
		now   time.Time
		want  map[string]phase.WaitKind // absent: may go
		until time.Time
	}{
		{name: "the first in line is the canary, the rest wait for it", rules: canaryRules, st: w(),
			queue: []Host{pending("a", "web", "k1"), pending("b", "web", "k1")}, now: at(1),
			want: map[string]phase.WaitKind{"b": phase.WaitCanary}},
		{name: "two canaries go together", rules: Rules{"web": {Canaries: 2}}, st: w(),
			queue: []Host{pending("a", "web", "k1"), pending("b", "web", "k1"), pending("c", "web", "k1")}, now: at(1),
			want: map[string]phase.WaitKind{"c": phase.WaitCanary}},
		{name: "a canary out holds the rest", rules: canaryRules, st: w(Member{Host: "a", At: at(1), Canary: true}),
			queue: []Host{pending("b", "web", "k1")}, now: at(2),
			want: map[string]phase.WaitKind{"b": phase.WaitCanary}},
		{name: "soaking after the canary came back", rules: canaryRules,
			st:    w(Member{Host: "a", At: at(1), Canary: true, Done: at(10)}),
			queue: []Host{pending("b", "web", "k1")}, now: at(20),
			want: map[string]phase.WaitKind{"b": phase.WaitCanarySoak}, until: at(40)},
		{name: "soaked: the rest go", rules: canaryRules,
			st:    w(Member{Host: "a", At: at(1), Canary: true, Done: at(10)}),
			queue: []Host{pending("b", "web", "k1")}, now: at(40), want: map[string]phase.WaitKind{}},
		{name: "a failed canary holds the wave", rules: canaryRules,
			st:    State{Waves: []Wave{{Group: "web", Fingerprint: "k1", Failed: "a: stuck", FailedAt: at(5)}}},
			queue: []Host{pending("b", "web", "k1")}, now: at(90),
			want: map[string]phase.WaitKind{"b": phase.WaitCanaryFailed}},
		{name: "a new fingerprint is a new wave with its own canary", rules: canaryRules,
			st:    State{Waves: []Wave{{Group: "web", Fingerprint: "k1", Failed: "a: stuck", FailedAt: at(5)}, {Group: "web", Fingerprint: "k2", Seen: at(6)}}},
			queue: []Host{pending("b", "web", "k2"), pending("c", "web", "k2")}, now: at(7),
			want: map[string]phase.WaitKind{"c": phase.WaitCanary}},
		{name: "a host with no fingerprint is in no wave", rules: canaryRules, st: w(Member{Host: "a", At: at(1), Canary: true}),
			queue: []Host{pending("b", "web", "")}, now: at(2), want: map[string]phase.WaitKind{}},
		{name: "a group without canaries is not held", rules: canaryRules, st: State{},
			queue: []Host{pending("a", "db", "k1"), pending("b", "db", "k1")}, now: at(2), want: map[string]phase.WaitKind{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, until := Holds(tt.st, tt.rules, tt.queue, tt.now)
			if len(got) != len(tt.want) {
				t.Fatalf("holds %v, want kinds %v", got, tt.want)
			}
			for h, k := range tt.want {
				if got[h].Kind != k {
					t.Errorf("%s: %v (%s), want kind %v", h, got[h].Kind.Name(), got[h], k.Name())
				}
			}
			if !until.Equal(tt.until) {
				t.Errorf("recheck %v, want %v", until, tt.until)
			}
		})
	}
}

func TestHoldsAfter(t *testing.T) {
	rules := Rules{"prod": {After: []string{"staging"}, AfterSoak: time.Hour}}
	prodSeen := Wave{Group: "prod", Fingerprint: "k1", Seen: at(0)}
	tests := []struct {
		name  string
		st    State
		now   time.Time
		want  phase.WaitKind
		text  string
		until time.Time
	}{
		{name: "staging still rebooting the wave", now: at(5),
			st:   State{Waves: []Wave{prodSeen, {Group: "staging", Fingerprint: "k1", Seen: at(0), Completed: 1}}},
			want: phase.WaitAfterGroup, text: "waiting for it to finish"},
		{name: "staging finished, soaking", now: at(30),
			st:   State{Waves: []Wave{prodSeen, {Group: "staging", Fingerprint: "k1", Seen: at(0), Completed: 2, Finished: at(10)}}},
			want: phase.WaitAfterGroup, text: "soak until", until: at(70)},
		{name: "staging finished and soaked", now: at(70),
			st: State{Waves: []Wave{prodSeen, {Group: "staging", Fingerprint: "k1", Seen: at(0), Completed: 2, Finished: at(10)}}}},
		{name: "staging finished another wave only", now: at(30),
			st:   State{Waves: []Wave{prodSeen, {Group: "staging", Fingerprint: "k0", Finished: at(10)}}},
			want: phase.WaitAfterGroup, text: "no host of it needs", until: at(60)},
		{name: "staging never had the wave: after_soak from when prod first saw it", now: at(60),
			st: State{Waves: []Wave{prodSeen}}},
		{name: "staging's canary failed", now: at(300),
			st:   State{Waves: []Wave{prodSeen, {Group: "staging", Fingerprint: "k1", Failed: "s1: stuck"}}},
			want: phase.WaitAfterGroup, text: "canary failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, until := Holds(tt.st, rules, []Host{pending("p1", "prod", "k1")}, tt.now)
			if got["p1"].Kind != tt.want || !strings.Contains(got["p1"].String(), tt.text) {
				t.Fatalf("hold %q (%s), want kind %s with %q", got["p1"], got["p1"].Kind.Name(), tt.want.Name(), tt.text)
			}
			if !until.Equal(tt.until) {
				t.Errorf("recheck %v, want %v", until, tt.until)
			}
		})
	}
}

func TestObserveVerdicts(t *testing.T) {
	canaryOut := State{Waves: []Wave{{Group: "web", Fingerprint: "k1", Seen: t0, Members: []Member{{Host: "a", At: at(1), Canary: true}}}}}
	tests := []struct {
		name     string
		plan     func(Host) Host
		failed   string // the failure's reason contains it; "": none
		done     time.Time
		canaries int // canaries left in the wave
	}{
		{name: "still out", plan: func(h Host) Host { return withPlan(h, store.PhaseRebooting, at(2), nil) }, canaries: 1},
		{name: "stuck fails", plan: func(h Host) Host {
			return withPlan(h, store.PhaseStuck, at(9), func(p *store.Plan) { p.LastError = "host not back" })
		}, failed: "stuck: host not back", canaries: 1},
		{name: "reboot failed (backoff) fails", plan: func(h Host) Host {
			return withPlan(h, store.PhaseBackoff, at(3), func(p *store.Plan) { p.LastError = "reboot command failed" })
		}, failed: "reboot command failed", canaries: 1},
		{name: "drain aborted (backoff) fails", plan: func(h Host) Host {
			return withPlan(h, store.PhaseBackoff, at(3), func(p *store.Plan) { p.LastError = "drain deadline" })
		}, failed: "drain deadline", canaries: 1},
		{name: "released unhealthy fails", plan: func(h Host) Host {
			return withPlan(h, store.PhaseIdle, at(8), func(p *store.Plan) { p.LastCompleted, p.LastUnhealthy = at(8), "web.api" })
		}, failed: "workloads unhealthy", canaries: 1},
		{name: "back healthy", plan: func(h Host) Host {
			return withPlan(h, store.PhaseIdle, at(8), func(p *store.Plan) { p.LastCompleted = at(8) })
		}, done: at(8), canaries: 1},
		{name: "an older backoff is not this cycle's", plan: func(h Host) Host {
			return withPlan(h, store.PhaseBackoff, at(0), func(p *store.Plan) { p.LastError = "old" })
		}, canaries: 1},
		{name: "canceled: no verdict, no longer the canary", plan: func(h Host) Host {
			return withPlan(h, store.PhaseIdle, at(4), nil)
		}, canaries: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.plan(Host{Name: "a", Group: "web", Fingerprint: "k1", Plan: store.Plan{Host: "a"}})
			st, failures := Observe(canaryOut, canaryRules, []Host{h}, at(10))
			w, _ := st.Wave("web", "k1")
			if tt.failed == "" && (len(failures) > 0 || w.Failed != "") {
				t.Fatalf("failed %v %q, want none", failures, w.Failed)
			}
			if tt.failed != "" && (len(failures) != 1 || !strings.Contains(failures[0].Reason, tt.failed) || !strings.Contains(w.Failed, tt.failed)) {
				t.Fatalf("failed %v %q, want %q", failures, w.Failed, tt.failed)
			}
			if n := len(w.canaries()); n != tt.canaries {
				t.Fatalf("%d canaries, want %d", n, tt.canaries)
			}
			if n := len(w.canaries()); n > 0 && !w.canaries()[0].Done.Equal(tt.done) {
				t.Errorf("done %v, want %v", w.canaries()[0].Done, tt.done)
			}
			if again, f := Observe(st, canaryRules, []Host{h}, at(11)); len(f) > 0 || !again.Equal(st) {
				t.Errorf("observing again changed the state or failed again: %v", f)
			}
		})
	}
}

func TestObserveFinished(t *testing.T) {
	rules := Rules{"prod": {After: []string{"staging"}}}
	member := func(host string) Member { return Member{Host: host, At: at(1)} }
	back := func(name string) Host {
		return withPlan(Host{Name: name, Group: "staging", Plan: store.Plan{Host: name}}, store.PhaseIdle, at(5),
			func(p *store.Plan) { p.LastCompleted = at(5) })
	}
	tests := []struct {
		name     string
		members  []Member
		hosts    []Host
		finished bool
	}{
		{name: "one back, one still pending", members: []Member{member("s1")},
			hosts: []Host{back("s1"), pending("s2", "staging", "k1")}},
		{name: "one back, one out", members: []Member{member("s1"), member("s2")},
			hosts: []Host{back("s1"), withPlan(Host{Name: "s2", Group: "staging", Plan: store.Plan{Host: "s2"}}, store.PhaseRebooting, at(3), nil)}},
		{name: "all back", members: []Member{member("s1"), member("s2")}, hosts: []Host{back("s1"), back("s2")}, finished: true},
		{name: "none back: the only one failed", members: []Member{member("s1")},
			hosts: []Host{withPlan(Host{Name: "s1", Group: "staging", Plan: store.Plan{Host: "s1"}}, store.PhaseBackoff, at(3), nil)}},
		{name: "a pending host of another group does not count", members: []Member{member("s1")},
			hosts: []Host{back("s1"), pending("p1", "prod", "k1")}, finished: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := State{Waves: []Wave{{Group: "staging", Fingerprint: "k1", Seen: t0, Members: tt.members}}}
			st, _ = Observe(st, rules, tt.hosts, at(10))
			w, _ := st.Wave("staging", "k1")
			if got := !w.Finished.IsZero(); got != tt.finished {
				t.Fatalf("finished %v, want %v (%+v)", got, tt.finished, w)
			}
		})
	}
}

func TestGrantRecordsCanariesThenMembers(t *testing.T) {
	rules := Rules{"web": {Canaries: 1}, "db": {}}
	st, _ := Observe(State{}, rules, []Host{pending("a", "web", "k1"), pending("b", "web", "k1"), pending("x", "db", "k1")}, at(0))
	st, changed := Grant(st, rules, []Host{pending("a", "web", "k1"), pending("x", "db", "k1")}, at(1))
	if !changed {
		t.Fatal("grant changed nothing")
	}
	if _, ok := st.Wave("db", "k1"); ok {
		t.Fatal("a group without canaries, not followed, is tracked")
	}
	w, _ := st.Wave("web", "k1")
	if len(w.Members) != 1 || !w.Members[0].Canary || w.Members[0].Host != "a" {
		t.Fatalf("members %+v, want canary a", w.Members)
	}
	st, _ = Grant(st, rules, []Host{pending("b", "web", "k1")}, at(2))
	w, _ = st.Wave("web", "k1")
	if len(w.Members) != 2 || w.Members[1].Canary {
		t.Fatalf("members %+v, want b a member, not a canary", w.Members)
	}
	if _, again := Grant(st, rules, []Host{pending("b", "web", "k1")}, at(3)); again {
		t.Error("granting a member again changed the state")
	}
}

func TestResumeForgetsFailure(t *testing.T) {
	st := State{Waves: []Wave{{Group: "web", Fingerprint: "k1", Failed: "a: stuck", FailedAt: at(1),
		Members: []Member{{Host: "a", At: at(0), Canary: true}}}}}
	if kept := Resume(st, "web", at(1)); kept.Waves[0].Failed == "" {
		t.Fatal("a resume no later than the failure forgot it")
	}
	st = Resume(st, "web", at(2))
	got, _ := Holds(st, canaryRules, []Host{pending("b", "web", "k1")}, at(2))
	if len(got) != 0 {
		t.Fatalf("after resume: %v, want b to go as the new canary", got)
	}
}

func TestItemsRoundTrip(t *testing.T) {
	st := State{Waves: []Wave{
		{Group: "web", Fingerprint: "kernel 6.8.0-49", Seen: t0, Members: []Member{{Host: "a", At: at(1), Canary: true, Done: at(9)}}, Finished: at(20)},
		{Group: "db", Fingerprint: "k2", Seen: t0, Completed: 3, Failed: "x: stuck", FailedAt: at(4)},
	}}
	got, err := FromItems(Items(st))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(prune(st)) {
		t.Fatalf("round trip: %+v, want %+v", got, st)
	}
	bad := Items(st)
	for k := range bad {
		bad[k] = "{"
		break
	}
	if _, err := FromItems(bad); err == nil {
		t.Fatal("an unreadable item was read")
	}
}

// A need first seen in a pass (the host not pending yet) starts its wave in
// that pass, so its grant can follow at once; a host out starts none.
func TestObserveStartsWaveOfNewNeed(t *testing.T) {
	idle := Host{Name: "a", Group: "web", Fingerprint: "k1", Plan: store.Plan{Host: "a", Phase: store.PhaseIdle}}
	out := Host{Name: "b", Group: "web", Fingerprint: "k2", Plan: store.Plan{Host: "b", Phase: store.PhaseRebooting}}
	st, _ := Observe(State{}, canaryRules, []Host{idle, out}, at(0))
	if _, ok := st.Wave("web", "k1"); !ok {
		t.Error("no wave for a need first seen")
	}
	if _, ok := st.Wave("web", "k2"); ok {
		t.Error("a wave for a host out")
	}
}
