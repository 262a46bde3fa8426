package coordinator

import (
	"slices"

	"github.com/rollboot/rollboot/internal/store"
)

// busyNames returns the hosts of s whose plan is under way (any phase but
// idle), sorted: the reads and the steps that only look at such hosts (the
// node events of rebooting hosts, the clusters of the hosts that meet server
// gates, the hosts on their way out for the capacity gate, the admission
// queue) walk them.
func busyNames(s *snapshot) []string {
	var busy []string
	for name, p := range s.plans {
		if !planUnderWay(p) {
			continue
		}
		if _, ok := s.hosts[name]; ok {
			busy = append(busy, name)
		}
	}
	slices.Sort(busy)
	return busy
}

// plansUnderWay copies the plans under way (any phase but idle) of plans: all
// that the loop looks at between passes (the allocation watches), which answer
// the same from them as from every plan.
func plansUnderWay(plans map[string]store.Plan) map[string]store.Plan {
	out := map[string]store.Plan{}
	for name, p := range plans {
		if planUnderWay(p) {
			out[name] = p
		}
	}
	return out
}

// planUnderWay reports whether p is under way: in any phase but idle.
func planUnderWay(p store.Plan) bool { return p.Phase != "" && p.Phase != store.PhaseIdle }

// planCursor tells, for the hosts of s.names taken in order, which have a plan
// under way (busyNames), by their position: the others are idle, and a walk
// over every host needs only their phase. The walks over all hosts (the quiet
// check, the metrics, admission's tallies) look up only the plans under way
// that way, and compare positions, not names.
type planCursor struct {
	s *snapshot
	// at: the positions of the hosts under way in s.names; j: where the walk
	// is in it, at the position lastAt.
	at        []int
	j, lastAt int
}

func newPlanCursor(s *snapshot) planCursor { return planCursor{s: s} }

// busyAt returns the positions in s.names of the hosts of busyNames.
func busyAt(s *snapshot) []int {
	busy := busyNames(s)
	at := make([]int, 0, len(busy))
	from := 0
	for _, name := range busy { // in the order of s.names: each after the last
		i, ok := slices.BinarySearch(s.names[from:], name)
		if !ok {
			continue // not a host of this walk
		}
		at = append(at, from+i)
		from += i + 1
	}
	return at
}

// underWay reports whether the plan of s.names[i] is under way (busyNames),
// comparing positions instead of names, and copying no plan (at 5,000 hosts,
// comparing the names and copying an idle plan for each was most of a walk).
// Positions come in increasing order; one before the last starts the walk
// over.
func (c *planCursor) underWay(i int) bool {
	if c.at == nil {
		c.at = busyAt(c.s)
	}
	if i < c.lastAt {
		c.j = 0
	}
	c.lastAt = i
	for c.j < len(c.at) && c.at[c.j] < i {
		c.j++
	}
	return c.j < len(c.at) && c.at[c.j] == i
}
