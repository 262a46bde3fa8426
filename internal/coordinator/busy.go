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
