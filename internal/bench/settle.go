package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The coordinator's metrics the bench waits on: its reconcile passes ended
// (coordinator/wake.go) and the node metadata it wrote (nodemeta).
const (
	passesMetric    = "rollboot_coordinator_pass_duration_seconds"
	metaWriteMetric = "rollboot_node_meta_writes_total"
)

// coordinatorWork is how much the coordinator registered on reg has done so
// far: reconcile passes ended and node metadata writes.
type coordinatorWork struct{ passes, metaWrites uint64 }

func readWork(reg *prometheus.Registry) (coordinatorWork, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return coordinatorWork{}, err
	}
	var w coordinatorWork
	for _, mf := range mfs {
		ms := mf.GetMetric()
		if len(ms) == 0 {
			continue
		}
		switch mf.GetName() {
		case passesMetric:
			w.passes = ms[0].GetHistogram().GetSampleCount()
		case metaWriteMetric:
			w.metaWrites = uint64(ms[0].GetCounter().GetValue())
		}
	}
	return w, nil
}

// waitSettled waits until the coordinator has taken in the cluster as it is
// now, so that a rollout is measured from a settled start, not from the tail
// of a new leader's first pass or of its first publication of every node's
// metadata (which a real cluster's nodes already hold from earlier terms):
// two passes ended since the call (so the second started after it), or one
// ended and no other followed within quiet; and no node metadata was written
// within quiet.
func waitSettled(ctx context.Context, reg *prometheus.Registry, quiet, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	base, err := readWork(reg)
	if err != nil {
		return err
	}
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	last, passAt, metaAt := base, time.Now(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the coordinator did not settle within %s before the rollout: %d passes ended, %d node metadata writes",
				timeout, last.passes-base.passes, last.metaWrites-base.metaWrites)
		case <-t.C:
		}
		w, err := readWork(reg)
		if err != nil {
			return err
		}
		if w.passes != last.passes {
			passAt = time.Now()
		}
		if w.metaWrites != last.metaWrites {
			metaAt = time.Now()
		}
		last = w
		passes := w.passes - base.passes
		passed := passes >= 2 || (passes == 1 && time.Since(passAt) >= quiet)
		if passed && time.Since(metaAt) >= quiet {
			return nil
		}
	}
}
