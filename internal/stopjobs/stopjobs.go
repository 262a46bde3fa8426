// Package stopjobs carries out a group's drain.stop_jobs: just before a node's
// drain starts, it makes the node ineligible and stops the allocations of
// those jobs on it, rather than have the drain migrate them.
//
// The node is first made ineligible (the plan stored at grant says it was
// eligible, and the rejoin restores it), so that Nomad places their
// replacements on other nodes, and the drainer, which would otherwise mark
// them for migration first, finds them already stopping. Nomad's alloc stop
// (nomad/alloc_endpoint.go Alloc.Stop) marks the allocation for migration with
// an evaluation of its own: the scheduler stops it at once, without the
// migrate block the drainer follows. An allocation left running (the stop
// failed, or the coordinator stopped in between) is migrated by the drain as
// any other.
package stopjobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/election"
	"github.com/rollboot/rollboot/internal/phase"
)

// Nodes reads the allocations on a node and changes its eligibility;
// *api.Nodes implements it.
type Nodes interface {
	Allocations(nodeID string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error)
	ToggleEligibility(nodeID string, eligible bool, q *api.WriteOptions) (*api.NodeEligibilityUpdateResponse, error)
}

// Allocs stops an allocation; *api.Allocations implements it.
type Allocs interface {
	Stop(alloc *api.Allocation, q *api.QueryOptions) (*api.AllocStopResponse, error)
}

// Stop stops the allocations of jobs (each "job" in any namespace, or
// "namespace/job") on node nodeID, after making the node ineligible; it does
// nothing when none runs there. Each write is made only while the leader's
// lease holds (election.CheckLease). Without allocs (nil) jobs cannot be
// stopped: an error as soon as jobs are given.
func Stop(ctx context.Context, nodes Nodes, allocs Allocs, nodeID string, jobs []string, log *slog.Logger) error {
	if len(jobs) == 0 {
		return nil
	}
	if allocs == nil {
		return errors.New("drain.stop_jobs: no allocations API configured")
	}
	on, _, err := nodes.Allocations(nodeID, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("drain.stop_jobs: allocations of node %s: %w", nodeID, err)
	}
	stop := ToStop(on, jobs)
	if len(stop) == 0 {
		return nil
	}
	if err := election.CheckLease(ctx); err != nil {
		return fmt.Errorf("drain.stop_jobs: mark node %s ineligible: %w", nodeID, err)
	}
	if _, err := nodes.ToggleEligibility(nodeID, false, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
		return fmt.Errorf("drain.stop_jobs: mark node %s ineligible: %w", nodeID, err)
	}
	for _, a := range stop {
		if err := election.CheckLease(ctx); err != nil {
			return fmt.Errorf("stop allocation %s: %w", a.ID, err)
		}
		if _, err := allocs.Stop(a, (&api.QueryOptions{Namespace: a.Namespace}).WithContext(ctx)); err != nil {
			return fmt.Errorf("drain.stop_jobs: stop allocation %s (%s) on node %s: %w", a.ID, a.Name, nodeID, err)
		}
		log.Info("allocation stopped (drain.stop_jobs)", "node_id", nodeID, "alloc_id", a.ID, "alloc", a.Name)
	}
	return nil
}

// ToStop returns the allocations of allocs to stop for jobs: those of the
// jobs that are to run and run still (not complete, failed or lost), and that
// no drain marked for migration yet.
func ToStop(allocs []*api.Allocation, jobs []string) []*api.Allocation {
	var stop []*api.Allocation
	for _, a := range allocs {
		if a.DesiredStatus == api.AllocDesiredStatusRun && phase.StopsJob(jobs, a.Namespace, a.JobID) &&
			a.ClientStatus != api.AllocClientStatusComplete && a.ClientStatus != api.AllocClientStatusFailed &&
			a.ClientStatus != api.AllocClientStatusLost && (a.DesiredTransition.Migrate == nil || !*a.DesiredTransition.Migrate) {
			stop = append(stop, a)
		}
	}
	return stop
}
