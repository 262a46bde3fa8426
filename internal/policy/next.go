package policy

// NextInLine returns the hosts within the first n of their group's line, in
// the order Admit serves it (first come, first served, then host name): the
// hosts drained next once slots free, which rollboot marks on their nodes so
// that jobs can keep migrated work off them (node_meta.next_in_line). A host
// queued twice counts once, at its first place. n <= 0 marks none.
func NextInLine(queue []Request, n int) map[string]bool {
	out := map[string]bool{}
	if n <= 0 {
		return out
	}
	taken := map[string]int{}
	for _, r := range InQueueOrder(queue) {
		if out[r.Host] || taken[r.Group] >= n {
			continue
		}
		out[r.Host] = true
		taken[r.Group]++
	}
	return out
}
