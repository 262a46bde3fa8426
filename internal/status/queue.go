package status

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rollboot/rollboot/internal/store"
)

// A host simply on its way (its turn in its group's line, or the next step of
// its cycle) has no reason stored in its plan: the coordinator stores only holds,
// since the host ahead and the slots in use change at every hand-off, and the
// step at every step, and each change would cost a write to the plan of every
// host concerned. The view tells these from the plans.

// onItsWay is what a host out of service without a stored reason waits for.
var onItsWay = map[string]string{
	store.PhaseDraining:  "draining",
	store.PhaseDrained:   "waiting for the agent to reboot the host",
	store.PhaseRebooting: "rebooting",
	store.PhaseRejoining: "waiting for the host to be back: its node ready and eligible, its new boot ID reported",
}

// explainProgress gives every host on its way its reason: for a pending host its
// place in its group's line (first come, first served, then host name, as the
// coordinator admits), the host just ahead of it, and the group's hosts out of
// service; for a host out of service, its phase's step.
func explainProgress(v *View, plans map[string]store.Plan) {
	queues := map[string][]store.Plan{}
	out := map[string][]string{}
	for _, p := range plans {
		switch {
		case p.Phase == store.PhasePending && (p.Waiting == "" || p.WaitingKind == stateAwaitingApproval):
			queues[p.Group] = append(queues[p.Group], p) // a host awaiting approval is in line (approval.go)
		case p.Active():
			out[p.Group] = append(out[p.Group], p.Host)
		}
	}
	why := map[string]string{}
	awaiting := awaitingAhead(plans) // approval.go
	for group, q := range queues {
		sort.Slice(q, func(i, j int) bool {
			if c := q[i].RequestedAt.Compare(q[j].RequestedAt); c != 0 {
				return c < 0
			}
			return q[i].Host < q[j].Host
		})
		sort.Strings(out[group])
		for i, p := range q {
			place := "first in line"
			if i > 0 {
				place = fmt.Sprintf("number %d in line, after %s", i+1, q[i-1].Host)
			}
			if p.Waiting == "" {
				why[p.Host] = fmt.Sprintf("waiting for a slot in group %q (%s%s%s)", group, place, outOfService(out[group]), awaitingText(awaiting[group]))
			}
		}
	}
	for i := range v.Hosts {
		h := &v.Hosts[i]
		if h.Waiting != "" {
			continue
		}
		if w, ok := why[h.Host]; ok {
			h.Waiting = w
		} else if _, planned := plans[h.Host]; planned {
			h.Waiting = onItsWay[h.Phase]
		}
	}
}

// outOfService names the hosts of a group out of service, at most three.
func outOfService(hosts []string) string {
	switch n := len(hosts); {
	case n == 0:
		return ""
	case n > 3:
		return fmt.Sprintf("; out of service: %s and %d more", strings.Join(hosts[:3], ", "), n-3)
	}
	return "; out of service: " + strings.Join(hosts, ", ")
}
