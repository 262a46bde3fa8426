package status

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rollboot/rollboot/internal/store"
)

// stateAwaitingApproval is what the Phase column shows for a pending host
// awaiting approval (a group's approval = "manual" or "webhook"): the hold
// an operator acts on, with the command in its Why.
const stateAwaitingApproval = "awaiting_approval"

// State is the host's phase as `rollboot status` shows it: its plan's phase,
// or awaiting_approval for a pending host that awaits its approval.
func (h Host) State() string {
	if h.Phase == store.PhasePending && h.HoldKind == stateAwaitingApproval {
		return stateAwaitingApproval
	}
	return h.Phase
}

// awaitingAhead names, by group, the hosts awaiting approval: they are in
// their group's line (first come, first served), and the hosts behind them
// wait for them too.
func awaitingAhead(plans map[string]store.Plan) map[string][]string {
	out := map[string][]string{}
	for _, p := range plans {
		if p.Phase == store.PhasePending && p.WaitingKind == stateAwaitingApproval {
			out[p.Group] = append(out[p.Group], p.Host)
		}
	}
	for _, hs := range out {
		sort.Strings(hs)
	}
	return out
}

// awaitingText is what a host in line says of the hosts of its group
// awaiting approval ("" when none).
func awaitingText(hosts []string) string {
	if len(hosts) == 0 {
		return ""
	}
	return fmt.Sprintf("; awaiting approval: %s", strings.Join(hosts, ", "))
}
