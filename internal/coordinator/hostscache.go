package coordinator

import (
	"context"

	"github.com/rollboot/rollboot/internal/store"
)

// The host records, from the host watch's list. The watch is a blocking query
// on the records' prefix, which lists them all (paths and ModifyIndex) at
// every change: a pass takes the watch's last list instead of listing them
// again (5,000 at 5,000 hosts), and reads only the records it shows changed
// since the store last read them (the store's path cache, store/cache.go): a
// pass over a cluster whose records did not change reads none. The reads stay
// in the pass, bounded like its other steps. The coordinator never writes host
// records itself, so it cannot miss a write of its own. Without a live watch
// (it has not answered yet, or it failed; or outside Run) every pass lists
// them itself.
//
// The watch lists again only once a pass took its last list (the mailbox's
// hostsTaken): when every host's sentinel appears together, a thousand agents
// write their records within a second, and a watch listing at each of them
// listed a thousand paths every few milliseconds, a tenth of the machine,
// though a pass only ever uses the last list. A change during a pass still
// wakes the next one at once: the watch asks again, from the index it last
// answered at, as soon as the pass takes the list.

// hostRecords returns the host records and those that cannot be used, from
// the host watch's list as the pass took it when the watch is live, else
// listed now. A list older than one a pass read itself is not used: the
// watch's first answer, racing with a pass that listed the records meanwhile,
// may lack records that pass saw (a host with a plan and no record is one whose
// need went away), so the pass lists them itself until the watch catches up.
func (c *Coordinator) hostRecords(ctx context.Context) ([]store.HostRecord, []store.BadRecord, error) {
	if w := c.seen.hosts; w.live && w.index >= c.hostsAtLeast {
		return c.opt.Store.HostsIn(ctx, w.val)
	}
	recs, bad, index, err := c.opt.Store.HostsChecked(ctx, 0, 0)
	if err != nil {
		return nil, nil, err
	}
	c.hostsAtLeast = max(c.hostsAtLeast, index)
	return recs, bad, nil
}
