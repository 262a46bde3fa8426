package admission

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/healthgate"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
)

// The health gates are read before any slot is offered; a closed gate holds
// the hosts of the groups it guards, whose slot goes to a host of another
// group, and admission looks again at the gate's recheck.
func TestHealthGates(t *testing.T) {
	inWeb := func(p Pending) Pending { p.Group = "web"; return p }
	gates := []healthgate.Gate{
		{Name: "ceph", Groups: []string{"web"}, Recheck: 10 * time.Second},
		{Name: "lb", Recheck: 30 * time.Second},
	}
	base := func() Input {
		in := input(2, inWeb(pending("a", 0)), pending("b", time.Minute))
		in.Rules.Groups = append(in.Rules.Groups, policy.Group{Name: "web", Concurrency: 1})
		in.Groups["web"] = GroupCount{Size: 5}
		in.Rules.HealthGates = gates
		return in
	}
	for _, tc := range []struct {
		name     string
		verdicts map[string]healthgate.Verdict
		needs    bool
		admitted []string
		held     map[string]string
		recheck  time.Time
	}{
		{name: "not read: read first", needs: true},
		{name: "all open: both go", verdicts: map[string]healthgate.Verdict{"ceph": {Open: true}, "lb": {Open: true}},
			admitted: []string{"a", "b"}},
		{name: "a group's gate closed: its host waits, the other goes",
			verdicts: map[string]healthgate.Verdict{"ceph": {Reason: `health gate "ceph": down`}, "lb": {Open: true}},
			admitted: []string{"b"}, held: map[string]string{"a": `health gate "ceph": down`}, recheck: now.Add(10 * time.Second)},
		{name: "a gate of every group closed: all wait",
			verdicts: map[string]healthgate.Verdict{"ceph": {Open: true}, "lb": {Reason: `health gate "lb": 503`}},
			held:     map[string]string{"a": `health gate "lb": 503`, "b": `health gate "lb": 503`}, recheck: now.Add(30 * time.Second)},
		{name: "a gate missing from what was read: closed",
			verdicts: map[string]healthgate.Verdict{"lb": {Open: true}},
			admitted: []string{"b"}, held: map[string]string{"a": `health gate "ceph": not read`}, recheck: now.Add(10 * time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			in.HealthGates = tc.verdicts
			res, needs := Admit(in)
			if needs.HealthGates != tc.needs {
				t.Fatalf("needs %+v", needs)
			}
			if tc.needs {
				return
			}
			for _, h := range tc.admitted {
				if !res.Admitted[h] {
					t.Errorf("%s not admitted: %v", h, res.Wait[h])
				}
			}
			if len(res.Admitted) != len(tc.admitted) {
				t.Errorf("admitted %v, want %v", res.Admitted, tc.admitted)
			}
			for h, why := range tc.held {
				if w := res.Wait[h]; w.Kind != phase.WaitHealthGate || w.String() != why {
					t.Errorf("%s waits %v (%q), want %q", h, w.Kind.Name(), w.String(), why)
				}
			}
			if !res.RecheckAt.Equal(tc.recheck) {
				t.Errorf("recheck at %v, want %v", res.RecheckAt, tc.recheck)
			}
		})
	}
	// No gate, no read.
	in := input(1, pending("a", 0))
	if _, needs := Admit(in); needs.HealthGates {
		t.Error("health gates read without any")
	}
}
