package coordinator

import (
	"slices"

	"github.com/rollboot/rollboot/internal/store"
)

// busyNames returns the hosts whose plan is under way (any phase but idle), in
// the order of s.names, listed once per snapshot and plans map. The reads and
// the admission steps that only look at such hosts (the node events of
// rebooting hosts, the clusters of the hosts that meet server gates, the hosts
// on their way out for the capacity gate, the admission queue, the system jobs
// of the hosts admitted) walk them instead of every host: a pass made half a
// dozen walks over all 5,000 hosts, each a map lookup or two per host, for the
// few hundred under way. The caller must not change the slice.
func busyNames(s *snapshot) []string {
	m, id := &s.memo, mapID(s.plans)
	if !m.busyDone || m.busyPlans != id {
		m.busy, m.busyPlans, m.busyDone = listBusy(s), id, true
	}
	return m.busy[:len(m.busy):len(m.busy)]
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

func listBusy(s *snapshot) []string {
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

// busyAt returns the positions in s.names of the hosts of busyNames, listed
// once per snapshot, plans map and names (the caller must not change it).
func busyAt(s *snapshot) []int {
	busy, m := busyNames(s), &s.memo
	if m.busyAtDone && m.busyAtPlans == m.busyPlans && sameSlice(m.busyAtNames, s.names) {
		return m.busyAt
	}
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
	m.busyAt, m.busyAtPlans, m.busyAtNames, m.busyAtDone = at, m.busyPlans, s.names, true
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

// sameSlice reports whether a and b are the same slice (not equal ones).
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) && (a == nil) == (b == nil)
}
