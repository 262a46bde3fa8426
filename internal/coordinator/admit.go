package coordinator

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// Admission: which pending hosts may be taken out of service now, and why each
// other one waits. A pure function of the pass's snapshot: the group budgets and
// windows (package policy), then rollboot's own rules, in this order, for each
// host the budgets offer a slot to (first come, first served; a host a rule
// holds takes no slot, which is offered to the next host in line):
//   - a coordinator candidate is kept in service;
//   - a host whose agent cannot tell which servers run on it is held;
//   - at most one server of each cluster is out at once;
//   - no Vault server goes while another Vault server is sealed;
//   - every cluster of the host's servers passes its pre-reboot gate.
//
// Hosts not queued at all wait for what the phase machine says (a backoff, a
// node not ready, no record), or for their missing agent.

// admitRules is the configuration admission depends on.
type admitRules struct {
	groups        []policy.Group // the default group first, then the configured ones
	drainDeadline time.Duration  // a window must leave room for a drain to finish
	gates         bool           // quorum gates are configured (Options.Clusters)
	// hold, when set, admits nobody and is every pending host's reason: the
	// stored policy cannot be used (policy.go).
	hold phase.WaitReason
	// groupDeadlines: the groups with a drain deadline of their own
	// (rejoinhealth.go).
	groupDeadlines map[string]time.Duration
}

// admission is the result of admit.
type admission struct {
	admitted map[string]bool
	wait     map[string]phase.WaitReason // why a pending host was not admitted
	// settled: when the earliest settle time of a group with a host waiting
	// for it ends (zero: none). A pass is due then (wake.go).
	settled time.Time
}

// admitRules returns the coordinator's admission configuration.
func (c *Coordinator) admitRules() admitRules {
	r := admitRules{groups: []policy.Group{c.opt.DefaultGroup}, drainDeadline: c.opt.Timing.DrainDeadline,
		gates: c.opt.Clusters != nil, hold: c.policyHold(), groupDeadlines: c.groupDrainDeadlines()}
	for _, g := range c.opt.Groups {
		r.groups = append(r.groups, g.Group)
	}
	return r
}

// admit decides which pending hosts get a slot now.
func admit(r admitRules, s *snapshot) admission {
	out := admission{admitted: map[string]bool{}}
	if !r.hold.IsZero() {
		out.wait = map[string]phase.WaitReason{}
		for _, req := range admissionQueue(s) {
			out.wait[req.Host] = r.hold
		}
		return out
	}
	// The queue, the holds and the rest of what admission starts from are the
	// same in each admission of a pass (admitmemo.go).
	b := s.admitBase(r)
	out.wait = maps.Clone(b.held)
	out.settled = b.settled
	spare, outServers, sealed := b.spare, maps.Clone(b.serversOut), b.sealed
	accept := func(req policy.Request) bool {
		rec := s.hosts[req.Host].rec
		if why, ok := s.agentLost[req.Host]; ok {
			out.wait[req.Host] = why
			return false
		}
		candidate := isCandidate(rec)
		if candidate && spare <= 1 {
			// After its reboot a drained node stays ineligible until the
			// coordinator restores it, and an agent deployed as a system job gets
			// no allocation there until then: with every candidate's host out at
			// once, nobody would be left to do it.
			out.wait[req.Host] = phase.WaitFor(phase.WaitLastCandidate, "")
			return false
		}
		if why := serverGate(r.gates, s.clusters, rec, outServers, sealed); !why.IsZero() {
			out.wait[req.Host] = why
			return false
		}
		// The hosts accepted before this one leave too: their allocations
		// need room, and they offer none.
		if why := capacityGate(s, req.Host, out.admitted); !why.IsZero() {
			out.wait[req.Host] = why
			out.settled = sooner(out.settled, s.now.Add(capacityRecheck)) // capacity.go
			return false
		}
		if candidate {
			spare--
		}
		for _, srv := range rec.Servers {
			outServers[phase.ClusterKey(srv)] = req.Host
		}
		out.admitted[req.Host] = true
		return true
	}
	// A host held by its own rule gives its slot to the next host in line.
	adm := policy.AdmitWith(b.statuses, b.queue, accept)
	for _, w := range adm.Waiting {
		if w.ForSlot {
			out.wait[w.Host] = b.queuedFor(w.Group)
			continue
		}
		out.wait[w.Host] = phase.WaitFor(phase.WaitGroupBudget, w.Reason)
	}
	for name, why := range s.missing {
		out.wait[name] = phase.WaitFor(phase.WaitAgentMissing, why)
	}
	return out
}

// settle takes out of the queue the hosts of the groups that settle after one of
// their hosts came back (group.settle), with why they wait, and when the first
// of those groups is done settling.
func settle(r admitRules, s *snapshot, queue []policy.Request) ([]policy.Request, map[string]phase.WaitReason, time.Time) {
	type back struct {
		host string
		at   time.Time
	}
	last := map[string]back{} // the last host of each group to come back
	for name, p := range s.plans {
		hv := s.hosts[name]
		if hv == nil {
			continue
		}
		g := hv.group
		if p.LastCompleted.After(last[g].at) {
			last[g] = back{name, p.LastCompleted}
		}
	}
	why, until := map[string]phase.WaitReason{}, map[string]time.Time{}
	for _, g := range r.groups {
		b := last[g.Name]
		if t, ok := policy.SettleUntil(g, b.at, s.now); ok {
			why[g.Name] = phase.WaitFor(phase.WaitSettle, fmt.Sprintf("group %q starts its next host at %s, %s after %s came back",
				g.Name, t.UTC().Format(time.RFC3339), g.Settle, b.host))
			until[g.Name] = t
		}
	}
	if len(why) == 0 {
		return queue, nil, time.Time{}
	}
	var (
		rest  []policy.Request
		first time.Time
	)
	wait := map[string]phase.WaitReason{}
	for _, req := range queue {
		w, ok := why[req.Group]
		if !ok {
			rest = append(rest, req)
			continue
		}
		wait[req.Host] = w
		if t := until[req.Group]; first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return rest, wait, first
}

// buildAdmissionQueue returns the pending hosts that may compete for a slot:
// past their backoff, published by an agent, with a ready node not drained by
// someone else, and an agent that runs.
func buildAdmissionQueue(s *snapshot) []policy.Request {
	var queue []policy.Request
	for _, name := range busyNames(s) {
		p, hv := s.plans[name], s.hosts[name]
		if p.Phase != store.PhasePending || s.now.Before(p.NextTry) || hv.rec == nil {
			continue
		}
		if n := hv.node; n != nil && (n.Status != "ready" || (n.Draining && n.DrainGrant == "")) {
			continue
		}
		if s.missing[name] != "" {
			continue // nobody would reboot it after its drain: held, and why is shown
		}
		queue = append(queue, policy.Request{Host: name, Group: hv.group, RequestedAt: p.RequestedAt})
	}
	return queue
}

// buildGroupStatuses computes each group's size, active hosts and
// otherwise-unavailable nodes, and holds a group whose window does not allow a
// drain to start now.
func buildGroupStatuses(r admitRules, s *snapshot) []policy.GroupStatus {
	byName := map[string]*policy.GroupStatus{}
	var out []*policy.GroupStatus
	for _, g := range r.groups {
		gs := &policy.GroupStatus{Group: g}
		if s.control.Paused {
			gs.Hold = "paused"
			if s.control.PauseReason != "" {
				gs.Hold += ": " + s.control.PauseReason
			}
		} else if ok, why := g.Schedule.CanStartDrain(s.now, r.drainDeadlineOf(g.Name)); !ok {
			gs.Hold = why
		}
		byName[g.Name] = gs
		out = append(out, gs)
	}
	activeNode := map[string]bool{}
	for name, p := range s.plans {
		if !p.Active() {
			continue
		}
		if gs := byName[s.hosts[name].group]; gs != nil {
			gs.Active++
		}
		if p.NodeID != "" {
			activeNode[p.NodeID] = true
		}
	}
	sum := s.nodeSum
	if sum == nil {
		sum = summarizeNodes(s.nodes, s.groupOf)
	}
	for g, size := range sum.size {
		if g == noGroup {
			g = r.groups[0].Name
		}
		gs := byName[g]
		if gs == nil {
			continue
		}
		gs.Size += size
	}
	for g, ids := range sum.down {
		if g == noGroup {
			g = r.groups[0].Name
		}
		gs := byName[g]
		if gs == nil {
			continue
		}
		for _, id := range ids {
			if !activeNode[id] {
				gs.Unavailable++
			}
		}
	}
	res := make([]policy.GroupStatus, 0, len(out))
	for _, gs := range out {
		res = append(res, *gs)
	}
	return res
}

// nodeSummary is what the group statuses need of the nodes: how many each
// group has, and which are not ready or not eligible (by the name of the
// group whose filter matches them; noGroup: none does).
type nodeSummary struct {
	size map[string]int
	down map[string][]string
}

// noGroup stands for the nodes no group's filter matches: the default group's.
const noGroup = "\x00"

// summarizeNodes sums up nodes for the group statuses: a walk over every node,
// made once per pass (observe).
func summarizeNodes(nodes map[string]*api.NodeListStub, groupOf map[string]string) *nodeSummary {
	sum := &nodeSummary{size: map[string]int{}, down: map[string][]string{}}
	for id, n := range nodes {
		g, ok := groupOf[id]
		if !ok {
			g = noGroup
		}
		sum.size[g]++
		if n.Status != "ready" || n.SchedulingEligibility != "eligible" {
			sum.down[g] = append(sum.down[g], id)
		}
	}
	return sum
}

func isCandidate(rec *store.HostRecord) bool {
	return rec != nil && slices.Contains(rec.Roles, store.RoleCandidate)
}

// hostTallies walks the hosts once for what admission counts over all of them:
//   - spare: the coordinator candidates in service (not out for rollboot, with
//     a ready node, or none);
//   - out: each server cluster (product/cluster) with a server out of service
//     for rollboot, mapped to that server's host;
//   - sealed: the hosts whose Vault server is sealed.
func hostTallies(s *snapshot) (spare int, out map[string]string, sealed []string) {
	out = map[string]string{}
	plans := newPlanCursor(s) // idle hosts' plans are not looked up
	for i, name := range s.names {
		hv := s.hostAt(i) // no host is looked up either
		active := plans.underWay(i) && s.plans[name].Active()
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

// serverGate says why a host that runs servers may not be taken out now (zero
// if it may): at most one server of each cluster out at once (its quorum group
// has a concurrency of 1), and each cluster healthy and able to lose this server.
func serverGate(gates bool, clusters map[string]health.ClusterHealth, rec *store.HostRecord, out map[string]string, sealed []string) phase.WaitReason {
	if why := discoveryHold(rec); !why.IsZero() {
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

// discoveryHold says why a host whose agent cannot tell which servers run on it
// is held (zero when it can): its record may lack a server, and taking it out
// then would skip that server's quorum gate.
func discoveryHold(rec *store.HostRecord) phase.WaitReason {
	if rec == nil || rec.DiscoverError == "" {
		return phase.WaitReason{}
	}
	return phase.WaitFor(phase.WaitRolesUnknown, rec.DiscoverError)
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
func postGate(clusters map[string]health.ClusterHealth, rec *store.HostRecord, now time.Time, stableFor time.Duration) phase.WaitReason {
	if why := discoveryHold(rec); !why.IsZero() {
		return why
	}
	if rec.VaultSealed {
		return phase.WaitFor(phase.WaitVaultUnseal, rec.Host)
	}
	for _, srv := range rec.Servers {
		if ok, why := health.PostRebootGate(clusters[phase.ClusterKey(srv)], srv.ID, now, stableFor); !ok {
			return phase.WaitFor(phase.WaitPostRebootGate, why)
		}
	}
	return phase.WaitReason{}
}
