package phase

import (
	"fmt"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// ListedNode is what Nomad's node list says of one node, as NodeGone needs it.
type ListedNode struct {
	ID, Name, Status string
	CreateIndex      uint64
}

// NodeGone says why the node a cycle took out of service (planNodeID) is no
// longer its host's, from Nomad's node list alone ("" while it is, or when the
// cycle took no node): planNode is that node as listed (nil: not listed), and
// named the nodes listed under the host's name.
//   - Not listed: it was purged (`nomad node purge`, Node.Deregister in
//     nomad/node_endpoint.go), or garbage-collected after being down for
//     node_gc_threshold. A live client registers again under the same ID, so a
//     node back in the list within the grace keeps its cycle going.
//   - Listed under another name: the client was restarted with another name.
//   - Listed but down, while a node registered after it (a higher CreateIndex)
//     carries the host's name and is not down: the host was replaced (an
//     autoscaled or reinstalled machine starts a client with a new node ID).
//
// A reboot keeps the node's ID and name (the client keeps its ID in its data
// directory), so none of these happens in a cycle that goes as planned.
func NodeGone(host, planNodeID string, planNode *ListedNode, named []ListedNode) string {
	switch {
	case planNodeID == "":
		return ""
	case planNode == nil:
		return fmt.Sprintf("node %s is no longer in Nomad's node list (purged)", planNodeID)
	case planNode.Name != host:
		return fmt.Sprintf("node %s is now named %q", planNodeID, planNode.Name)
	case planNode.Status != "down":
		return ""
	}
	for _, n := range named {
		if n.ID != planNodeID && n.Name == host && n.CreateIndex > planNode.CreateIndex && n.Status != "down" {
			return fmt.Sprintf("node %s is down and the host's name now belongs to node %s", planNodeID, n.ID)
		}
	}
	return ""
}

// watchNodeGone follows a cycle whose node is gone (Input.NodeGone) after the
// phase's own decision r: the first pass that sees it gone records when
// (Plan.NodeGoneSince) and says so in the host's wait reason; once it has been
// gone for Timing.NodeGoneGrace, the slot is released (nodeGoneRelease). A
// decision that ends the cycle meanwhile (the host came back on its new node,
// say) stands. A host that runs servers keeps its slot: their clusters, not its
// node, say when it is back, and the slot guards their quorum. A node listed
// again clears the mark. Meanwhile no drain is issued: the host's name may
// belong to a new node, which its grant never recorded.
func watchNodeGone(in Input, d, r Decision) Decision {
	p := d.Plan
	if !r.Plan.Active() || r.Plan.Phase == store.PhaseUnreadable {
		if !r.Plan.NodeGoneSince.IsZero() {
			r.Plan.NodeGoneSince, r.Write = time.Time{}, true
		}
		return r
	}
	if in.NodeGone == "" || runsServers(in, p) {
		if !p.NodeGoneSince.IsZero() {
			r.Plan.NodeGoneSince, r.Write = time.Time{}, true
		}
		return r
	}
	since := p.NodeGoneSince
	if since.IsZero() {
		since = in.Now
		r.Plan.NodeGoneSince, r.Write = since, true
	}
	until := since.Add(in.Timing.NodeGoneGrace)
	if in.Now.Before(until) {
		// A drain re-issued now would go to the node the host's name
		// belongs to now, one this grant never recorded.
		r.StartDrain = false
		r.Waiting = WaitFor(WaitNodeGone, fmt.Sprintf("%s; the slot is released at %s", in.NodeGone, until.UTC().Format(time.RFC3339)))
		return r
	}
	return nodeGoneRelease(in, d, in.NodeGone)
}

// runsServers: the host runs a server of some cluster, as its clusters say
// (the corroborated record), or as they said at its grant.
func runsServers(in Input, p store.Plan) bool {
	return (in.Host != nil && len(in.Host.Servers) > 0) || !p.ServersStableSince.IsZero()
}

// nodeGoneRelease ends the cycle of a host whose node is gone: a history record
// "node_gone" says why, nothing is done to any node (the one drained is gone,
// or down and replaced; a new node of the host was never drained), and the host
// backs off as after an abandoned cycle, with the node_gone notification. A
// host that still needs its reboot on a new node is queued again after that.
func nodeGoneRelease(in Input, d Decision, why string) Decision {
	p := d.Plan
	h := history(p, in, store.OutcomeNodeGone)
	h.Error = fmt.Sprintf("%s for %s: the slot is released", why, in.Timing.NodeGoneGrace)
	d.History = h
	d.Plan = enter(p, store.PhaseBackoff, in.Now)
	d.Plan.NextTry = in.Now.Add(policy.Backoff(in.Timing.RetryBackoff, in.Timing.RetryMaxBackoff, p.Attempt))
	d.Plan.LastError = store.NodeGonePrefix + h.Error
	d.Plan.Held = false
	d.Plan.NodeGoneSince = time.Time{}
	d.Write, d.Event = true, "slot released: the node is gone" // why: in LastError
	return d
}
