package workloadread

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/watch"
	"github.com/rollboot/rollboot/internal/workload"
)

// The deployment blocker decides on the list of every deployment, which a
// pass about to grant read afresh: in production, where a grant comes minutes
// after the one before, one request per grant. Nomad answers a blocking query
// of the list only when a deployment changes (nomad/deployment_endpoint.go
// List watches the deployment table), which a patch day leaves alone unless
// someone deploys, so the leading coordinator follows it instead
// (Deployments), and a pass takes the watch's newest answer; it reads the list
// itself only while the watch has none (its term's first query not answered
// yet, or its last one failed). A change wakes the loop, so a host held by a
// deployment is looked at again as soon as the deployment ends. The blocked
// evaluations are still read afresh: their list's index is the evaluation
// table's, which every drain's evaluations move.

// Deployments is the newest list of deployments a blocking query of them
// answered, for one term of the leading coordinator.
type Deployments struct {
	mu   sync.Mutex
	list []workload.Deployment
	ok   bool // the last query answered
}

// Follow follows the deployments through api until ctx ends, calling changed
// when a deployment appears, ends or changes status: what the blocker
// decides on (a deployment's progress moves the list's index too, and wakes
// no pass).
func (d *Deployments) Follow(ctx context.Context, api API, changed func()) {
	watch.Loop{
		Query: func(ctx context.Context, idx uint64) (uint64, error) {
			q := allNamespaces(ctx, "")
			q.WaitIndex, q.WaitTime = idx, watch.MaxWait
			list, meta, err := api.ListDeployments(q)
			if err != nil {
				d.set(nil, false)
				return 0, err
			}
			if d.set(deploymentsOf(list), true) {
				changed()
			}
			return meta.LastIndex, nil
		},
		Retry: func(_ error, fails int) time.Duration { return policy.Backoff(time.Second, 30*time.Second, fails) },
	}.Run(ctx)
	d.set(nil, false)
}

// set keeps list, and reports whether a deployment appeared, ended or
// changed status since the last answer kept.
func (d *Deployments) set(list []workload.Deployment, ok bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	changed := ok && (!d.ok || !slices.EqualFunc(list, d.list, func(a, b workload.Deployment) bool {
		return a.ID == b.ID && a.Status == b.Status
	}))
	d.list, d.ok = list, ok
	return changed
}

// Latest returns the newest list, and whether there is one (nil d: none).
func (d *Deployments) Latest() ([]workload.Deployment, bool) {
	if d == nil {
		return nil, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.list, d.ok
}
