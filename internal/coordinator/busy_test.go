package coordinator

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/rejoinwatch"
	"github.com/rollboot/rollboot/internal/store"
)

// TestBusyNamesFollowPlans: the hosts under way are, for every snapshot, the
// hosts of s.names whose plan is not idle, in that order; and a snapshot whose
// plans map is replaced (as Preview does) gets them listed again.
func TestBusyNamesFollowPlans(t *testing.T) {
	all := []string{"", store.PhaseIdle, store.PhasePending, store.PhaseDraining, store.PhaseDrained,
		store.PhaseRebooting, store.PhaseRejoining, store.PhaseBackoff, store.PhaseStuck, store.PhaseUnreadable}
	want := func(s *snapshot) []string {
		var out []string
		for _, name := range s.names {
			if hostPhase(s.plans[name]) != store.PhaseIdle {
				out = append(out, name)
			}
		}
		return out
	}
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 15))
		s := &snapshot{plans: map[string]store.Plan{}, hosts: map[string]*hostView{}}
		for i := range 60 {
			name := fmt.Sprintf("h%02d", rng.IntN(200))
			s.hosts[name] = &hostView{}
			if i%4 != 0 {
				s.plans[name] = store.Plan{Host: name, Phase: all[rng.IntN(len(all))]}
			}
		}
		s.names = slices.Sorted(maps.Keys(s.hosts))
		for round := range 5 {
			s.listBusy()
			got := busyNames(s)
			if w := want(s); !slices.Equal(got, w) {
				t.Fatalf("seed %d round %d: busy %v, want %v", seed, round, got, w)
			}
			if !slices.Equal(busyNames(s), got) {
				t.Fatalf("seed %d round %d: a second call differs", seed, round)
			}
			plans := maps.Clone(s.plans)
			for name := range s.hosts {
				if rng.IntN(3) == 0 {
					plans[name] = store.Plan{Host: name, Phase: all[rng.IntN(len(all))]}
				}
			}
			s.plans = plans
		}
	}
}

// TestPlansUnderWayAnswerAsAll: what the loop looks at between passes
// (the nodes whose allocations it watches) answers the
// same from the plans under way as from every plan, idle ones with timers,
// timelines and nodes of their own included; and the copy holds exactly the
// plans that are not idle. A phase the loop starts to look at among idle plans
// fails it.
func TestPlansUnderWayAnswerAsAll(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	phases := []string{"", store.PhaseIdle, store.PhasePending, store.PhaseDraining, store.PhaseDrained,
		store.PhaseRebooting, store.PhaseRejoining, store.PhaseBackoff, store.PhaseStuck, store.PhaseUnreadable}
	r := rand.New(rand.NewPCG(7, 11))
	at := func() time.Time { return now.Add(time.Duration(r.IntN(120)-60) * time.Minute) }
	for round := range 300 {
		plans := map[string]store.Plan{}
		for i := range 1 + r.IntN(12) {
			p := store.Plan{Host: fmt.Sprintf("h%d", i), Phase: phases[r.IntN(len(phases))], PhaseSince: at(), NextTry: at(),
				NodeID: fmt.Sprintf("n%d", i), Group: []string{"", "g1"}[r.IntN(2)],
				Timeline: map[string]time.Time{store.PhaseRejoining: at()}}
			if r.IntN(2) == 0 {
				p.SystemJobs = []string{"logs"}
			}
			plans[p.Host] = p
		}
		under := plansUnderWay(plans)
		for name, p := range plans {
			_, in := under[name]
			if idle := p.Phase == "" || p.Phase == store.PhaseIdle; in == idle {
				t.Fatalf("round %d: plan of %s (%q) copied %v", round, name, p.Phase, in)
			}
		}
		if got, want := rejoinwatch.AllocNodes(under, nil), rejoinwatch.AllocNodes(plans, nil); !maps.Equal(got, want) {
			t.Errorf("round %d: allocations watched %v from the plans under way, %v from all", round, got, want)
		}
	}
}

// hostPhase is the phase of a host's plan, idle without one.
func hostPhase(p store.Plan) string {
	if p.Phase == "" {
		return store.PhaseIdle
	}
	return p.Phase
}
