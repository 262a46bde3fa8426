package phase

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/store"
)

// DrainOptions are a group's drain options.
type DrainOptions struct {
	// Deadline replaces Timing.DrainDeadline for the group's hosts (0: keep it).
	Deadline time.Duration
	// DrainSystemJobs: the drain stops system jobs too (ignore_system_jobs =
	// false). The zero value leaves them running, the safe default.
	DrainSystemJobs bool
	// StopJobs are "job" (any namespace) or "namespace/job": their allocations
	// on the node are stopped once the drain has started.
	StopJobs []string
}

// WaitsForHealth reports whether the host may meet the healthy checks: it is
// rejoining (or stuck after it came back) and has a node. Its workloads are
// read once its node is ready, and eligible again when it was before (Nomad
// places allocations only on eligible nodes).
func WaitsForHealth(p store.Plan) bool {
	rejoins := p.Phase == store.PhaseRejoining || (p.Phase == store.PhaseStuck && !p.Timeline[store.PhaseRejoining].IsZero())
	return rejoins && p.NodeID != ""
}

// healthHold is the healthy check of a rejoining host whose node is back (and
// eligible again when it was before): held reports that it holds the host, with
// the decision to return. Past the deadline with on_deadline = "release" it
// holds nothing and records in d.Unhealthy what was still unhealthy, for the
// alert when the slot is freed.
func healthHold(in Input, pd *Decision, since time.Time) (r Decision, held bool) {
	d := *pd
	if in.Health == nil {
		return d, false
	}
	v := rejoin.Decide(*in.Health, in.Healthy, in.Now.Sub(since))
	switch {
	case v.Hold == rejoin.None:
		return d, false
	case v.Release:
		pd.Unhealthy = v.Detail
		return d, false
	case v.Past:
		return toStuck(in, d, d.Plan, fmt.Sprintf("workloads not healthy within %s of the reboot: %s", in.Healthy.Deadline, v.Detail)), true
	case v.Hold == rejoin.Checks:
		d.Waiting = WaitFor(WaitConsulChecks, v.Detail)
	case v.Hold == rejoin.Starting:
		d.Waiting = WaitFor(WaitAllocsStarting, v.Detail)
	default:
		d.Waiting = WaitFor(WaitAllocsUnhealthy, v.Detail)
	}
	return d, true
}

// systemDrainHold holds a host whose group drains system jobs
// (ignore_system_jobs = false) while rollboot's agent runs on its node as a
// system job: the drain would stop the agent, and nobody would reboot the host.
func systemDrainHold(in Input) WaitReason {
	if !in.Drain.DrainSystemJobs || in.Node == nil || in.Host == nil || in.Host.AgentJob == "" ||
		!slices.Contains(in.SystemJobs, in.Host.AgentJob) {
		return WaitReason{}
	}
	return WaitFor(WaitDrainStopsAgent, in.Host.AgentJob)
}

// DrainSpec is the drain of a grant: the group's deadline (given to Nomad only
// with on_timeout = "force": with "abort" the coordinator cancels instead, so
// Nomad never kills what has not migrated) and its system jobs option.
func DrainSpec(in Input) *api.DrainSpec {
	spec := &api.DrainSpec{IgnoreSystemJobs: !in.Drain.DrainSystemJobs}
	if in.Timing.ForceOnTimeout {
		spec.Deadline = in.Timing.DrainDeadline
	}
	return spec
}

// cancelDone reports whether a host's cancel suppresses nothing any more, so it
// can be removed from the control state: the host is idle, its record shows no
// need first seen at or before the cancel, and no manual request made at or
// before it is left. A later need is a new request and was never suppressed.
func cancelDone(in Input, next store.Plan) bool {
	if in.CancelAt.IsZero() || in.Host == nil || next.Phase != store.PhaseIdle {
		return false
	}
	if in.Host.RebootRequired && !in.Host.RequestedAt.After(in.CancelAt) {
		return false
	}
	return in.Request == nil || in.Request.At.After(in.CancelAt)
}

// EligibleAgain reports whether carrying d out restores the node's eligibility
// of a rejoining host that then waits for nothing but its node to show it: the
// pass decides again for it once the write succeeded (rejoinNow). The host may
// have been rejoining already, or enter the rejoin in d (restoreEligibility).
func EligibleAgain(in Input, d Decision) bool {
	switch in.Plan.Phase {
	case store.PhaseRejoining, store.PhaseRebooting, store.PhaseDrained:
	default:
		return false
	}
	return d.Plan.Phase == store.PhaseRejoining &&
		d.Waiting.Kind == WaitEligibility && (d.SetEligible || d.CancelDrain && d.MarkEligible) &&
		(in.Host == nil || len(in.Host.Servers) == 0)
}

// StopsJob reports whether the job is one of jobs: "job" in any namespace, or
// "namespace/job".
func StopsJob(jobs []string, namespace, job string) bool {
	for _, j := range jobs {
		if ns, id, ok := strings.Cut(j, "/"); ok {
			if ns == namespace && id == job {
				return true
			}
		} else if j == job {
			return true
		}
	}
	return false
}
