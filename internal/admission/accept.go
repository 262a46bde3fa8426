package admission

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// admitter offers the slots the budgets give, host by host, to rollboot's own
// rules.
type admitter struct {
	in  Input
	out *Result
	// spare: candidates still in service; serversOut: clusters with a server
	// out, the hosts admitted so far included.
	spare      int
	serversOut map[string]string
	// admitted: the nodes of the hosts admitted so far, in order; lacking: by
	// group, the hosts held for what the capacity gate lacks.
	admitted []string
	lacking  map[string]int
	// free: by group, how many of its hosts could start when this admission
	// began (policy.GroupStatus.Free).
	free  map[string]int
	needs Needs
	// index: the position of each queued host in the input's queue.
	index map[string]int
	// out: the hosts out for rollboot, every group's; starts: the drains of
	// the last hour; each with the hosts admitted so far (the rollout budget).
	rolloutOut int
	starts     []time.Time
	// layouts: the capacity gate's layout digests computed in this
	// admission, by the pools they cover (layoutOf).
	layouts map[string]uint64
}

// accept reports whether the host the budgets offer a slot to takes it.
func (a *admitter) accept(req policy.Request) bool {
	p := a.pending(req.Host)
	rec := p.Rec
	candidate := isCandidate(rec)
	why := phase.WaitReason{}
	switch {
	case a.rolloutHold() != "":
		// The rollout's max_out or max_drains_per_hour, on top of the group's
		// own budget.
		why = phase.WaitFor(phase.WaitRolloutBudget, a.rolloutHold())
	case candidate && a.spare <= 1:
		// After its reboot a drained node stays ineligible until the
		// coordinator restores it, and an agent deployed as a system job gets
		// no allocation there until then: with every candidate's host out at
		// once, nobody would be left to do it.
		why = phase.WaitFor(phase.WaitLastCandidate, "")
	default:
		why = ServerGate(a.in.Rules.Gates, a.in.Clusters, rec, a.serversOut, a.in.Sealed)
		if !why.IsZero() {
			// The clusters' health is read by the passes; nothing watches it.
			a.out.RecheckAt = phase.Earliest(a.out.RecheckAt, a.in.Now.Add(ServerGateRecheck))
		}
	}
	if why.IsZero() {
		why = a.capacity(p)
	}
	if why.IsZero() {
		why = a.agentLost(p)
	}
	if !why.IsZero() {
		a.out.Wait[req.Host] = why
		return false
	}
	if _, jobsRead := a.in.Jobs[req.Host]; p.Node == nil || jobsRead {
		// The approval is the last check: asked only of a host every other
		// check lets go (the node's system jobs read).
		if takes, admitted := a.approval(p); !admitted {
			return takes
		}
	}
	if candidate {
		a.spare--
	}
	a.rolloutOut++
	a.starts = append(a.starts, a.in.Now)
	for _, srv := range rec.Servers {
		a.serversOut[phase.ClusterKey(srv)] = req.Host
	}
	if p.Node != nil {
		a.admitted = append(a.admitted, p.Node.ID)
	}
	a.out.Admitted[req.Host] = true
	return true
}

// rolloutHold is why the rollout budget holds the next host ("": it does
// not); a drain rate used up looks again when it lets one more start.
func (a *admitter) rolloutHold() string {
	why, until := a.in.Rules.Rollout.Hold(a.rolloutOut, a.starts, a.in.Now)
	if !until.IsZero() {
		a.out.RecheckAt = phase.Earliest(a.out.RecheckAt, until)
	}
	return why
}

// pending is the queued host named host.
func (a *admitter) pending(host string) Pending {
	return a.in.Queue[a.index[host]]
}

// capacity is the capacity gate's word on p, given the hosts admitted before
// it; what the gate lacks is noted in the needs. A hold kept from an earlier
// pass (Input.CapacityHolds) stands without a read while the layout of the
// nodes it depends on is the same and its recheck is not due; the pass's
// layout is asked for first (no read).
func (a *admitter) capacity(p Pending) phase.WaitReason {
	if !a.in.Rules.Capacity || p.Node == nil {
		return phase.WaitReason{}
	}
	v := a.in.Capacity
	kept, isKept := a.in.CapacityHolds[p.Host]
	isKept = isKept && a.in.Now.Before(kept.Until)
	if isKept && v == nil {
		a.needs.Capacity.add(CapacityNeeds{Layout: true})
		return phase.WaitFor(phase.WaitCapacity, "the nodes are not listed yet")
	}
	if v == nil {
		v = &Capacity{}
	}
	if isKept && v.Err == nil && a.layoutOf(v, kept.Pools) == kept.Layout {
		a.keepCapacityHold(p.Host, kept)
		return kept.Why
	}
	if a.lacking == nil {
		a.lacking = map[string]int{}
	}
	why, lacks, settled := v.gate(p.Node.ID, a.admitted, a.lacking, a.free[p.Group])
	a.needs.Capacity.add(lacks)
	if settled != nil {
		a.keepCapacityHold(p.Host, CapacityHold{Why: why, Pools: settled, Layout: a.layoutOf(v, settled), Until: a.in.Now.Add(CapacityRecheck)})
	} else if !why.IsZero() {
		a.out.RecheckAt = phase.Earliest(a.out.RecheckAt, a.in.Now.Add(CapacityRecheck))
	}
	return why
}

// layoutOf is v.layout(pools), computed once per admission for each set of
// pools: every kept hold of a pool asks for the same digest, over every
// candidate of it.
func (a *admitter) layoutOf(v *Capacity, pools []string) uint64 {
	key := strings.Join(pools, "\x00")
	if d, ok := a.layouts[key]; ok {
		return d
	}
	if a.layouts == nil {
		a.layouts = map[string]uint64{}
	}
	a.layouts[key] = v.layout(pools)
	return a.layouts[key]
}

// keepCapacityHold notes h as p's capacity hold for the next pass, and looks
// again when it is due.
func (a *admitter) keepCapacityHold(host string, h CapacityHold) {
	if a.out.CapacityHolds == nil {
		a.out.CapacityHolds = map[string]CapacityHold{}
	}
	a.out.CapacityHolds[host] = h
	a.out.RecheckAt = phase.Earliest(a.out.RecheckAt, h.Until)
}

// agentLost holds a host whose agent runs as a Nomad system job that does not
// run on its node now: after the drain nobody would reboot it. The node's
// system jobs are asked for once the host would be admitted.
func (a *admitter) agentLost(p Pending) phase.WaitReason {
	if p.Node == nil {
		return phase.WaitReason{}
	}
	jobs, ok := a.in.Jobs[p.Host]
	if !ok {
		a.needs.Jobs = append(a.needs.Jobs, p.Host)
		return phase.WaitReason{}
	}
	return phase.AgentWouldBeLost(phase.Input{Node: p.Node, Host: p.Rec, SystemJobs: jobs})
}

func isCandidate(rec *store.HostRecord) bool {
	return rec != nil && slices.Contains(rec.Roles, store.RoleCandidate)
}

// ServerGate says why a host that runs servers may not be taken out now (zero
// if it may): at most one server of each cluster out at once (its quorum group
// has a concurrency of 1), and each cluster healthy and able to lose this
// server.
func ServerGate(gates bool, clusters map[string]health.ClusterHealth, rec *store.HostRecord, out map[string]string, sealed []string) phase.WaitReason {
	if why := DiscoveryHold(rec); !why.IsZero() {
		return why
	}
	if rec == nil || len(rec.Servers) == 0 {
		if rec != nil && phase.ServerRole(rec.Roles) != "" {
			return phase.WaitFor(phase.WaitRaftIDUnknown, phase.ServerRole(rec.Roles))
		}
		return phase.WaitReason{}
	}
	if !gates {
		return phase.WaitFor(phase.WaitNoQuorumGates, "")
	}
	for _, srv := range rec.Servers {
		if other, ok := out[phase.ClusterKey(srv)]; ok && other != rec.Host {
			return phase.WaitFor(phase.WaitServerOut, fmt.Sprintf("%s server of %s on %s", srv.Product, srv.Cluster, other))
		}
		if srv.Product == "vault" {
			for _, h := range sealed {
				if h != rec.Host {
					return phase.WaitFor(phase.WaitVaultSealed, h)
				}
			}
		}
	}
	for _, srv := range rec.Servers {
		if ok, why := health.PreRebootGate(clusters[phase.ClusterKey(srv)], srv.ID); !ok {
			return phase.WaitFor(phase.WaitPreRebootGate, why)
		}
	}
	return phase.WaitReason{}
}

// DiscoveryHold says why a host whose agent cannot tell which servers run on
// it is held (zero when it can): its record may lack a server, and taking it
// out then would skip that server's quorum gate.
func DiscoveryHold(rec *store.HostRecord) phase.WaitReason {
	if rec == nil || rec.DiscoverError == "" {
		return phase.WaitReason{}
	}
	return phase.WaitFor(phase.WaitRolesUnknown, rec.DiscoverError)
}
