package coordinator

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

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
		s.names = sortedKeys(s.hosts)
		for round := range 5 {
			got := busyNames(s)
			if w := want(s); !slices.Equal(got, w) {
				t.Fatalf("seed %d round %d: busy %v, want %v", seed, round, got, w)
			}
			if !slices.Equal(busyNames(s), got) {
				t.Fatalf("seed %d round %d: a second call differs", seed, round)
			}
			cur := newPlanCursor(s)
			// The cursor tells which hosts are under way by their position: in
			// order, and from any position on after a walk that went past it.
			for _, from := range []int{0, rng.IntN(len(s.names))} {
				for i := from; i < len(s.names); i++ {
					name := s.names[i]
					if got, want := cur.underWay(i), hostPhase(s.plans[name]) != store.PhaseIdle; got != want {
						t.Fatalf("seed %d round %d: %s at %d under way %v, want %v", seed, round, name, i, got, want)
					}
				}
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
