package coordinator

import (
	"context"
	"fmt"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/store"
)

// Closing a cycle in the pass that restores its node's eligibility. A rejoining
// host whose node is ready again first has its eligibility restored (Nomad keeps
// a drained node ineligible across a reboot); what the rejoin waits for after
// that (the system jobs, the workloads' health) is read only once the node is
// eligible, since Nomad places allocations only on eligible nodes. That used to
// take a pass of its own: the node stream showed the coordinator's eligibility
// write, and the next pass read the health and closed the cycle: that pass's
// reads stood between every node back and its slot handed on.
//
// So once the write that restores eligibility succeeded, the same pass decides
// again for that host (rejoinNow), with the node as the write left it (eligible,
// not draining) and its workloads' health read after the write, as the next
// pass would have read them. Everything else is the pass's snapshot. A decision
// that closes the cycle is carried out then, and the hand-out gives its slot
// away in the same pass (regrant.go); any other is left to the next pass.
//
// What keeps it as safe as the pass it saves:
//   - The health is read after the eligibility write, as before: the healthy
//     checks see what Nomad runs on the eligible node.
//   - The system jobs are those of the pass's node read, from before the write:
//     a job that ran on the ineligible node still runs (eligibility stops
//     nothing), and one that did not is waited for, as before.
//   - Hosts that run servers are left to the next pass: their clusters' health
//     is read again first, as for the hand-out.
//   - A host that the pass saw before its rejoin (rebooting, drained) has the
//     gate of a rejoining host in its input: its roles unknown or its Vault
//     sealed hold it. Its system jobs were not read as a rejoining host's: a
//     job it had is waited for.
//   - Only a decision that just closes the cycle is carried out (freesSlot and
//     givesBackOnly): nothing shared is written side by side with the pass's
//     other writes. A manual request to clear waits for the next pass.

// rejoinNow decides again for a host whose eligibility d restored, with the
// node as the write left it and its health read after the write, and carries
// the decision out if it closes the cycle. s is the pass's snapshot, only read:
// the pass's writes run side by side.
func (c *Coordinator) rejoinNow(ctx context.Context, s *snapshot, in phase.Input, d phase.Decision) error {
	name := in.Plan.Host
	c.mu.Lock()
	p, ok := c.plans[name] // as d stored it, or as it was
	c.mu.Unlock()
	if !ok || p.Phase != store.PhaseRejoining {
		return nil
	}
	node := *in.Node // phase.EligibleAgain: the decision wrote to it
	node.Eligible, node.Draining = true, false
	in.Node, in.Plan, in.Now = &node, p, c.now()
	rctx, cancel := c.stepContext(ctx)
	in.Health = c.healthNow(rctx, s, p, planGroup(p, in.Group), node.ID) // a read that failed holds the host
	cancel()
	d2 := phase.Step(in)
	c.noteRecheck(d2)
	if !freesSlot(in, d2) || !givesBackOnly(in, d2) {
		return nil
	}
	return c.carryOutBounded(ctx, in, d2)
}

// healthNow reads the host's workloads, and its Consul checks when its group
// waits for them, straight from Nomad and Consul: neither the watch's
// allocations nor the pass's were read after the eligibility write.
func (c *Coordinator) healthNow(ctx context.Context, s *snapshot, p store.Plan, group, nodeID string) *rejoin.Observed {
	if !phase.WaitsForHealth(p) {
		return nil
	}
	o := &rejoin.Observed{}
	allocs, _, err := c.opt.Nodes.Allocations(nodeID, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		o.AllocsErr = fmt.Errorf("cannot read the allocations of node %s: %w", nodeID, err)
	} else {
		o.Allocs = rejoin.NomadAllocs(allocs)
	}
	c.readChecks(ctx, s, o, group, nodeID)
	return o
}
