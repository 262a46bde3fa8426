package coordinator

import "context"

// CountCandidates counts the hosts whose agent stands for election (their
// record has the coordinator-candidate role), from the host records as the
// passes read them: the census that quiet candidates divide their tries by
// (standby.go). Counting every host record instead would over-count where only
// some agents are candidates, and the quiet ones would try too seldom.
func (c *Coordinator) CountCandidates(ctx context.Context) (int, error) {
	recs, _, err := c.hostRecords(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range recs {
		if isCandidate(&recs[i]) {
			n++
		}
	}
	return n, nil
}
