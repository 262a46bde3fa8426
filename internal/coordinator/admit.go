package coordinator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/nodestream"
	"github.com/rollboot/rollboot/internal/parallel"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// Admission (package admission) decides from an input built once per pass;
// what it still needs read before it can decide (the alerts, the workload
// blockers' reads, the capacity gate's, the system jobs of a host admitted) it
// says, and the pass reads that and asks again (admit), until it needs nothing.

// maxAdmitRounds bounds the rounds of reads of one admission; each round reads
// something new (the capacity gate's candidates double each round), so a pass
// needs far fewer.
const maxAdmitRounds = 64

// admitRules returns the coordinator's admission configuration.
func (c *Coordinator) admitRules() admission.Rules {
	return c.opt.Rules.Admission(c.opt.Clusters != nil, c.opt.WorkloadsAPI != nil, c.policyHold())
}

// admit runs admission over s, reading what it asks for between rounds, and
// keeps the group statuses it decided on in s (for the metrics and the
// hand-out).
func (c *Coordinator) admit(ctx context.Context, s *snapshot) admission.Result {
	in := admissionInput(c.admitRules(), s)
	in.CapacityHolds = c.capacityHolds
	s.statuses = admission.Statuses(in)
	for round := 0; ; round++ {
		if round == maxAdmitRounds && s.capacity != nil {
			s.capacity.Gate.Err = fmt.Errorf("the nodes to read did not settle in %d rounds", maxAdmitRounds)
		}
		res, needs := admission.Admit(c.withReads(in, s))
		if needs.None() || ctx.Err() != nil || round > maxAdmitRounds {
			if s.alerts == nil {
				c.alerts.NotRead() // not asked for: nothing waits to start, or the gate is off
			}
			c.metrics.NotCordoned.Set(float64(len(res.NoCordon)))
			c.capacityHolds = res.CapacityHolds
			return res
		}
		if needs.Alerts {
			c.readAlerts(ctx, s)
		}
		if needs.HealthGates {
			c.readHealthGates(ctx, s)
		}
		if len(needs.Workloads) > 0 {
			c.readWorkloads(ctx, s, needs.Workloads)
		}
		if !needs.Capacity.None() {
			c.readCapacity(ctx, s, needs.Capacity)
		}
		c.readGrantJobs(ctx, s, needs.Jobs)
		if len(needs.Webhook) > 0 {
			c.askWebhook(ctx, s, needs.Webhook)
		}
	}
}

// withReads is in with what the pass has read for admission so far.
func (c *Coordinator) withReads(in admission.Input, s *snapshot) admission.Input {
	in.Approvals = admission.ValidApprovals(s.control.Approvals, s.now)
	in.Webhook = c.approvals.StandingFor(s.plans)
	for h, a := range s.previewAnswers {
		in.Webhook[h] = a
	}
	in.Alerts = s.alerts
	in.HealthGates = s.healthGates
	if s.workloads != nil {
		in.WorkloadHolds = s.workloads.holds
	}
	if s.capacity != nil {
		in.Capacity = &s.capacity.Gate
	}
	in.Jobs = map[string][]string{}
	queue := in.Queue[:0:0]
	for _, p := range in.Queue {
		hv := s.hosts[p.Host]
		if hv.err != nil {
			continue // a read its decision needs failed: skipped this pass
		}
		queue = append(queue, p)
		if hv.jobsRead {
			in.Jobs[p.Host] = hv.jobs
		}
	}
	in.Queue = queue
	return in
}

// readGrantJobs reads the system jobs on the node of each host admission
// admitted whose jobs this pass has not read yet: the agent's job must be
// among them (admission holds the host otherwise), and the plan records them
// at grant. They are read from Nomad in this pass, never taken from a watch
// that may lag: a drain of someone else's may have stopped the agent's
// allocation a moment ago, and a grant then would leave nobody to reboot the
// host.
func (c *Coordinator) readGrantJobs(ctx context.Context, s *snapshot, hosts []string) {
	parallel.Each(len(hosts), NodeReadParallelism, nil, func(i int) { // side by side: a round trip each
		hv := s.hosts[hosts[i]]
		if hv.node == nil || hv.jobsRead {
			return
		}
		allocs, err := c.allocs.ReadInPass(ctx, hv.node.ID)
		hv.jobs, hv.err, hv.jobsRead = systemJobsOf(allocs), err, true
		if err == nil && c.seen.nodeWatch.Mode == nodestream.Blocking {
			// Without the event stream, a pending host's node is in the list
			// as the last whole list showed it, up to a resync ago: what the
			// grant decides on (phase.NodeHold: someone else's drain) is read
			// now.
			hv.err = c.freshNode(ctx, hv.node)
		}
	})
}

// freshNode reads v's node from Nomad and puts what its list stub says in v.
func (c *Coordinator) freshNode(ctx context.Context, v *phase.NodeView) error {
	n, _, err := c.opt.Nodes.Info(v.ID, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("read node %s: %w", v.ID, err)
	}
	*v = *phase.ViewOfNode(nodestream.Stub(n))
	return nil
}

// admissionInput is what admission decides on in s, built once per pass.
func admissionInput(r admission.Rules, s *snapshot) admission.Input {
	in := admission.Input{Now: s.now, Rules: r, Paused: s.control.Paused, PauseReason: s.control.PauseReason,
		Queue: admissionQueue(s), Groups: groupCounts(r, s), Missing: s.missing, Clusters: s.clusters}
	in.Spare, in.ServersOut, in.Sealed = hostTallies(s)
	in.PauseUntil, in.GroupPauses, in.HostPauses = s.control.PausedUntil, s.control.GroupPauses, s.control.HostPauses
	in.OptOut, in.Urgent = s.optOut, urgentRequests(s.control)
	in.WaveHolds, in.WaveRecheck = waveHolds(s, in.Queue) // holds.go
	in.Halts, in.HaltsUnknown = s.halts.Halts, s.haltsErr
	if r.Rollout.MaxDrainsPerHour > 0 {
		in.DrainStarts = drainStarts(s)
	}
	return in
}

// drainStarts are the drains started in the last hour, by every plan's
// record of its grants (phase: Plan.DrainStarts).
func drainStarts(s *snapshot) []time.Time {
	var out []time.Time
	for _, p := range s.plans {
		for _, at := range p.DrainStarts {
			if s.now.Sub(at) < policy.DrainRateWindow {
				out = append(out, at)
			}
		}
	}
	return out
}

// admissionQueue returns the pending hosts that may compete for a slot: past
// their backoff, published by an agent, with a ready node not drained by
// someone else, and an agent that runs.
func admissionQueue(s *snapshot) []admission.Pending {
	var queue []admission.Pending
	for _, name := range busyNames(s) {
		p, hv := s.plans[name], s.hosts[name]
		if p.Phase != store.PhasePending || s.now.Before(p.NextTry) || hv.rec == nil || hv.err != nil {
			continue
		}
		if !phase.NodeHoldOf(hv.node, p).IsZero() {
			continue // held by its node: phase.Step says why
		}
		if s.missing[name] != "" {
			continue // nobody would reboot it after its drain: held, and why is shown
		}
		queue = append(queue, admission.Pending{Request: policy.Request{Host: name, Group: hv.group, RequestedAt: p.RequestedAt},
			Rec: hv.rec, Node: hv.node, Pool: hostPool(s, hv), AwaitingSince: p.AwaitingSince})
	}
	return queue
}

// groupCounts counts each group's nodes, the nodes out of service that no
// cycle or cordon holds, the hosts out for rollboot and the host that came back last.
func groupCounts(r admission.Rules, s *snapshot) map[string]admission.GroupCount {
	counts := map[string]admission.GroupCount{}
	activeNode := map[string]bool{}
	for name, p := range s.plans {
		hv := s.hosts[name]
		if hv == nil {
			continue
		}
		c := counts[hv.group]
		if p.Active() {
			c.Active++
			if p.NodeID != "" {
				activeNode[p.NodeID] = true
			}
		}
		if p.CordonNode != "" {
			activeNode[p.CordonNode] = true // its host's cordon: in service, its work runs on
		}
		if p.LastCompleted.After(c.LastBackAt) {
			c.LastBack, c.LastBackAt = name, p.LastCompleted
		}
		counts[hv.group] = c
	}
	for id, n := range s.nodes {
		g, ok := s.groupOf[id]
		if !ok {
			g = r.Groups[0].Name
		}
		c := counts[g]
		c.Size++
		if (n.Status != "ready" || n.SchedulingEligibility != "eligible") && !activeNode[id] {
			c.Unavailable++
		}
		counts[g] = c
	}
	return counts
}

// hostTallies walks the hosts once for what admission counts over all of them:
//   - spare: the coordinator candidates in service (not out for rollboot, with
//     a ready node, or none);
//   - out: each server cluster (product/cluster) with a server out of service
//     for rollboot, mapped to that server's host;
//   - sealed: the hosts whose Vault server is sealed.
func hostTallies(s *snapshot) (spare int, out map[string]string, sealed []string) {
	out = map[string]string{}
	for _, name := range s.names {
		hv := s.hosts[name]
		active := s.plans[name].Active()
		if isCandidate(hv.rec) && !active && (hv.node == nil || hv.node.Status == "ready") {
			spare++
		}
		if hv.rec == nil {
			continue
		}
		if active {
			for _, srv := range hv.rec.Servers {
				out[phase.ClusterKey(srv)] = name
			}
		}
		if hv.rec.VaultSealed {
			sealed = append(sealed, name)
		}
	}
	return spare, out, sealed
}

func isCandidate(rec *store.HostRecord) bool {
	return rec != nil && slices.Contains(rec.Roles, store.RoleCandidate)
}

// leads returns the products whose leader runs on the host, and why their
// hand-over is blocked (refused, with the "hold" policy).
func leads(clusters map[string]health.ClusterHealth, rec *store.HostRecord, noHandOver map[string]string, hold bool) ([]string, phase.WaitReason) {
	var out []string
	var blocked phase.WaitReason
	for _, srv := range rec.Servers {
		if !health.NeedsHandOver(clusters[phase.ClusterKey(srv)], srv.ID) {
			continue
		}
		refused, denied := noHandOver[rec.Host+"/"+srv.Product]
		switch {
		case denied && hold:
			blocked = phase.WaitFor(phase.WaitHandOverRefused, refused)
			out = append(out, srv.Product)
		case denied:
			// policy continue: the host reboots as leader
		default:
			out = append(out, srv.Product)
		}
	}
	return out, blocked
}

// postGate says why the host's servers are not back in their clusters (zero
// when they are): a Raft member again, healthy, stable, and Vault unsealed.
func postGate(clusters map[string]health.ClusterHealth, rec *store.HostRecord, now time.Time, stableFor time.Duration) (phase.WaitReason, time.Time) {
	if why := admission.DiscoveryHold(rec); !why.IsZero() {
		return why, time.Time{} // the agent's record changes: its watch wakes a pass
	}
	again := now.Add(admission.ServerGateRecheck)
	if rec.VaultSealed {
		return phase.WaitFor(phase.WaitVaultUnseal, rec.Host), again
	}
	for _, srv := range rec.Servers {
		h := clusters[phase.ClusterKey(srv)]
		if ok, why := health.PostRebootGate(h, srv.ID, now, stableFor); !ok {
			if at := health.StableAt(h, srv.ID, stableFor); at.After(now) {
				again = phase.Earliest(again, at) // its stability wait ends
			}
			return phase.WaitFor(phase.WaitPostRebootGate, why), again
		}
	}
	return phase.WaitReason{}, time.Time{}
}

// urgentRequests are the hosts whose manual request is urgent.
func urgentRequests(c store.Control) map[string]bool {
	var out map[string]bool
	for h, r := range c.Requests {
		if r.Urgent {
			if out == nil {
				out = map[string]bool{}
			}
			out[h] = true
		}
	}
	return out
}
