package bench

import (
	"slices"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// handOffs measures the slot hand-offs from what Nomad saw, in the emulator's
// event log: per group, the k-th drain to start (k >= concurrency) took the
// slot the (k-concurrency)-th cycle to close freed, and the hand-off is the
// time between the two writes. A slot is free once the close's plan write is
// stored (the last write of a cycle, after the node is given back and its
// history record written: before it, a restarted coordinator still counts
// the host out); the drain starts with the node's drain update. The times
// are the emulator's own, taken as each write is applied, so a drain decided
// in the same pass as the close still measures the writes between them.
//
// A cycle's close is found by its history record (its path ends in the
// cycle's grant ID, store.AppendHistory): the host's first plan write after
// that record is the close's.
func handOffs(events []nomadsim.Event, hist []store.HistoryRecord, prefix string, groupOf map[string]string, concurrency int) []time.Duration {
	hostOfGrant := map[string]string{}
	for _, h := range hist {
		if h.Outcome == "rebooted" && h.GrantID != "" {
			hostOfGrant[h.GrantID] = h.Host
		}
	}
	histPrefix, planPrefix := prefix+"/history/", prefix+"/plan/"
	closing := map[string]bool{} // hosts whose history record is written, their close's plan write not yet seen
	freed := map[string][]time.Time{}
	started := map[string][]time.Time{}
	drained := map[string]bool{}
	for _, e := range events {
		switch e.Type {
		case nomadsim.EventVarWrite:
			path := e.Details["path"]
			if id, ok := strings.CutPrefix(path, histPrefix); ok {
				grant := id[strings.LastIndexByte(id, '-')+1:]
				if host, ok := hostOfGrant[grant]; ok {
					closing[host] = true
				}
				continue
			}
			if host, ok := strings.CutPrefix(path, planPrefix); ok && closing[host] {
				delete(closing, host)
				freed[groupOf[host]] = append(freed[groupOf[host]], e.Time)
			}
		case nomadsim.EventDrainStart:
			if e.Host != "" && !drained[e.Host] {
				drained[e.Host] = true
				started[groupOf[e.Host]] = append(started[groupOf[e.Host]], e.Time)
			}
		}
	}
	var out []time.Duration
	for g, starts := range started {
		ends := freed[g]
		slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
		slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
		for k := concurrency; k < len(starts) && k-concurrency < len(ends); k++ {
			out = append(out, max(0, starts[k].Sub(ends[k-concurrency])))
		}
	}
	return out
}
