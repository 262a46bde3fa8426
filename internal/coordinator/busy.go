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

func listBusy(s *snapshot) []string {
	var busy []string
	for name, p := range s.plans {
		if p.Phase == "" || p.Phase == store.PhaseIdle {
			continue
		}
		if _, ok := s.hosts[name]; ok {
			busy = append(busy, name)
		}
	}
	slices.Sort(busy)
	return busy
}

// planCursor gives the plans of the hosts of s.names taken in order, looking up
// only the hosts under way (busyNames, in the same order): the others are idle,
// and a walk over every host needs only their phase. The walks over all hosts
// that want each one's plan (the metrics, admission's tallies) skip a map
// lookup for most hosts that way.
type planCursor struct {
	s    *snapshot
	busy []string
	i    int
	last string
}

func newPlanCursor(s *snapshot) planCursor { return planCursor{s: s, busy: busyNames(s)} }

// plan returns name's plan if it is under way, else a plan without a phase
// (idle). Names come in the order of s.names (sorted); one out of order
// starts the walk of busy over.
func (c *planCursor) plan(name string) store.Plan {
	if name < c.last {
		c.i = 0
	}
	c.last = name
	for c.i < len(c.busy) && c.busy[c.i] < name {
		c.i++
	}
	if c.i < len(c.busy) && c.busy[c.i] == name {
		return c.s.plans[name]
	}
	return store.Plan{}
}
