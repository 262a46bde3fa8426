package admission

import (
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
)

// NextInLine returns the nodes of the hosts likely to get the slots about to
// be freed, slots[g] in each group g, by group: of queue, in the order it is served,
// each group's first hosts that an admission (its Wait) queued for a slot and
// nothing else, as many as the slots freed there (a host without a node takes
// its place, with no node to name). A guess
// made before the slots are free, for reads to start early: the admission
// that hands the slots out decides.
func NextInLine(queue []Pending, wait map[string]phase.WaitReason, slots map[string]int) map[string][]string {
	var queued []policy.Request
	nodes := map[string]string{}
	for _, q := range queue {
		if slots[q.Group] > 0 && wait[q.Host].Kind == phase.WaitQueued {
			queued = append(queued, q.Request)
			if q.Node != nil {
				nodes[q.Host] = q.Node.ID
			}
		}
	}
	left := map[string]int{}
	out := map[string][]string{}
	for _, q := range policy.InQueueOrder(queued) {
		if left[q.Group] < slots[q.Group] {
			left[q.Group]++
			if id, ok := nodes[q.Host]; ok {
				out[q.Group] = append(out[q.Group], id)
			}
		}
	}
	return out
}
