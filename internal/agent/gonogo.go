package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

// NodeAPI is how the agent sees its own node as Nomad reports it (GET
// /v1/node/<id>, node:read); *api.Nodes implements it.
type NodeAPI interface {
	Info(nodeID string, q *api.QueryOptions) (*api.Node, *api.QueryMeta, error)
}

// ClusterReader reads a Nomad, Consul or Vault server cluster's health, for the
// pre-reboot quorum gate of a server host.
type ClusterReader interface {
	Read(ctx context.Context, product, cluster string) health.ClusterHealth
}

// errWithdrawn: the stored plan no longer grants the reboot being prepared.
type errWithdrawn struct{ msg string }

func (e errWithdrawn) Error() string { return e.msg }

// stepPlanCheck is the failed step of an attempt refused because its plan is
// not about this host (RebootFailure.Step).
const stepPlanCheck = "plan check"

// notAboutSelf says why plan p is not about this host ("" when it is): it must
// name this host and the node the host's own Nomad agent reports (nodeID; a
// host without a Nomad client must see a plan without a node). A plan names no
// server of its own (the coordinator hands leadership over before the drain
// completes), so there is none to compare.
func notAboutSelf(p store.Plan, host, nodeID string) string {
	switch {
	case p.Host != host:
		return fmt.Sprintf("the plan is about host %q, not this host %q", p.Host, host)
	case p.NodeID != nodeID && nodeID == "":
		return fmt.Sprintf("the plan names node %s, but this host runs no Nomad client", p.NodeID)
	case p.NodeID != nodeID && p.NodeID == "":
		return fmt.Sprintf("the plan names no node, but this host's node is %s", nodeID)
	case p.NodeID != nodeID:
		return fmt.Sprintf("the plan names node %s, but this host's node is %s", p.NodeID, nodeID)
	}
	return ""
}

// notItsNeed says why a grant answers no need of this host ("" when it does):
// it is not a request (rollboot request, FleetLock: the plan says so), and
// the agent's own detectors find no reboot needed and had no error. Any host
// holding the agent token can write this host's record with a need; the grant
// such a record brought is refused here, so a host can ask for its own reboot
// only.
//
// An uptime need (max_uptime) is this host's when the boot time it was
// reckoned from is the one this agent read for its own boot: a record forged
// with an old boot time brings a grant this host refuses.
func notItsNeed(p store.Plan, rec store.HostRecord) string {
	if p.ManualRequest || rec.RebootRequired || rec.DetectError != "" {
		return ""
	}
	if !p.UptimeBootedAt.IsZero() && p.UptimeBootedAt.Equal(rec.BootedAt) {
		return ""
	}
	return fmt.Sprintf("the grant answers a need this host does not see (%q, not a request): its detectors find no reboot needed", p.Reason)
}

// refusal is the failed attempt of a plan not about this host: nothing ran, and
// the coordinator, seeing the failure, undoes the drain and backs off.
func refusal(grant, why string, now time.Time) *rebootFailed {
	return &rebootFailed{store.RebootFailure{Grant: grant, Step: stepPlanCheck, ExitStatus: -1, At: now.UTC(),
		Message: "refused: " + why}}
}

// goNoGo is the go/no-go of a granted reboot, made before the pre-reboot hooks
// and again as the last step before the reboot, after the hooks and the delay:
// minutes may have passed since the coordinator admitted the host, and the world
// may have changed. It returns a withdrawn error when the stored plan no longer
// grants this boot's reboot (then the attempt ends), a refusal when the stored
// plan is not about this host, or a hold reason when the reboot must wait (""
// when it may go now):
//   - the node, as Nomad reports it, is ineligible, its last drain completed and
//     names this grant, and (unless the drain was forced at its deadline,
//     drain.on_timeout = "force") it stayed ineligible since that drain
//     completed, as its events show (stayedIneligible): an operator may have
//     made the node eligible again and Nomad placed work on it;
//   - on a server host, every cluster's pre-reboot gate passes: a cluster that
//     just lost its leader or a server must not lose this one too.
func (a *Agent) goNoGo(ctx context.Context, p store.Plan, bootID string) (string, error) {
	return a.goNoGoOn(ctx, p, bootID, nil)
}

// goNoGoOn is goNoGo on the stored plan as read just before (read), or read
// now when read is nil.
func (a *Agent) goNoGoOn(ctx context.Context, p store.Plan, bootID string, read *store.Plan) (string, error) {
	if read == nil {
		cur, err := a.opt.Store.Plan(ctx, a.opt.Host)
		if err != nil {
			return "cannot read the plan: " + err.Error(), nil
		}
		read = &cur
	}
	cur := *read
	if cur.GrantID != p.GrantID || !a.mayReboot(cur, bootID) {
		return "", errWithdrawn{fmt.Sprintf("the grant %s is no longer current (plan %s, grant %q)", p.GrantID, cur.Phase, cur.GrantID)}
	}
	if why := notAboutSelf(cur, a.opt.Host, a.rec.NodeID); why != "" {
		a.log.Error("plan refused: it is not about this host", "grant", cur.GrantID, "why", why)
		return "", refusal(cur.GrantID, why, a.now())
	}
	if a.rec.NodeID != "" && a.opt.Nodes != nil {
		if why := a.nodeGate(ctx, cur); why != "" {
			return why, nil
		}
	}
	return a.quorumGate(ctx), nil
}

// quorumGate says why a server host may not reboot now ("" when it may, and on a
// host that runs no server): a cluster of its fails its pre-reboot gate, or the
// gate cannot be checked.
func (a *Agent) quorumGate(ctx context.Context) string {
	if len(a.rec.Servers) == 0 || a.opt.Clusters == nil {
		if r := serverRoleOf(a.rec.Roles); r != "" {
			return "the host runs a " + r + " and its quorum gate cannot be checked"
		}
		return ""
	}
	for _, srv := range a.rec.Servers {
		if ok, why := health.PreRebootGate(a.opt.Clusters.Read(ctx, srv.Product, srv.Cluster), srv.ID); !ok {
			return "quorum gate: " + why
		}
	}
	return ""
}

// nodeGate says why the node, as Nomad reports it, is not ready for the reboot
// granted by plan p ("" when it is). Nomad guarantees the rest: the schedulers
// place nothing on an ineligible node (nomad/structs/structs.go Node.Ready,
// scheduler/util.go readyNodesInDCsAndPool), and a drain that completed
// without being forced moved every allocation but the system jobs' off it
// (nomad/drainer; rollboot's drains ignore system jobs). Work can land on the
// node after the drain only if it was eligible in between, which its events
// show. After a drain the coordinator forced at its deadline (p.Forced: the
// stored policy says so) the node is not checked further, as its allocations
// were not before.
func (a *Agent) nodeGate(ctx context.Context, p store.Plan) string {
	n, _, err := a.opt.Nodes.Info(a.rec.NodeID, (&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return "cannot read the node: " + err.Error()
	}
	if why := nodeDrainedFor(n, p.GrantID); why != "" {
		return why
	}
	if p.Forced {
		return ""
	}
	return stayedIneligible(n.Events)
}

// nodeDrainedFor says why n is not a node drained for grant ("" when it is).
func nodeDrainedFor(n *api.Node, grant string) string {
	switch {
	case n.SchedulingEligibility != api.NodeSchedulingIneligible:
		return "the node is " + n.SchedulingEligibility + " again: Nomad may place work on it"
	case n.DrainStrategy != nil:
		return "the node is being drained"
	case n.LastDrain == nil:
		return "the node has no completed drain"
	case n.LastDrain.Meta[phase.DrainMetaGrant] != grant:
		return fmt.Sprintf("the node's last drain is not rollboot's for grant %s (it names %q)", grant, n.LastDrain.Meta[phase.DrainMetaGrant])
	case n.LastDrain.Status != api.DrainStatusComplete:
		return "the node's last drain is " + string(n.LastDrain.Status) + ", not complete"
	}
	return ""
}

// Node event messages, as Nomad writes them.
const (
	// eventDrainComplete ends every drain the drainer completes, forced or not
	// (nomad/drainer/drainer.go NodeDrainEventComplete).
	eventDrainComplete = "Node drain complete"
	// eventEligible and eventIneligible begin the messages of every change of
	// eligibility: nomad/node_endpoint.go NodeEligibilityEventEligible and
	// NodeEligibilityEventIneligible (UpdateEligibility), and
	// nomad/state/state_store.go NodeEligibilityEventPlanRejectThreshold (a
	// node marked ineligible after plan rejections).
	eventEligible   = "Node marked as eligible for scheduling"
	eventIneligible = "Node marked as ineligible for scheduling"
	// maxNodeEvents is how many events Nomad keeps per node, the newest
	// (nomad/structs/structs.go MaxRetainedNodeEvents).
	maxNodeEvents = 10
)

// stayedIneligible says why the node's events do not show that it stayed
// ineligible since its last drain completed ("" when they do). events are the
// node's, oldest first (nomad/state/state_store.go appendNodeEvents): the last
// "Node drain complete" is the completion of its last drain, which
// nodeDrainedFor checked is this grant's and complete. A node made eligible
// after it leaves a trace there: UpdateEligibility writes an event either way,
// and a node made eligible by a drain update without one (PUT .../drain with
// no drain and MarkEligible) can only become ineligible again with an event, or
// through a new drain, which replaces the last drain. When the completion is no
// longer among the events Nomad keeps, the agent cannot tell, and holds.
func stayedIneligible(events []*api.NodeEvent) string {
	done := -1
	for i, e := range events {
		if e != nil && e.Message == eventDrainComplete {
			done = i
		}
	}
	if done < 0 {
		return fmt.Sprintf("cannot tell whether the node stayed ineligible since its drain completed: "+
			"%q is no longer among the %d newest node events Nomad keeps", eventDrainComplete, maxNodeEvents)
	}
	for _, e := range events[done+1:] {
		if e != nil && (strings.HasPrefix(e.Message, eventEligible) || strings.HasPrefix(e.Message, eventIneligible)) {
			return fmt.Sprintf("the node's eligibility changed after its drain completed (%q at %s): "+
				"Nomad may have placed work on it", e.Message, e.Timestamp.UTC().Format(time.RFC3339))
		}
	}
	return ""
}

func serverRoleOf(roles []string) string {
	for _, r := range roles {
		switch r {
		case store.RoleNomadServer, store.RoleConsulServer, store.RoleVaultServer:
			return r
		}
	}
	return ""
}
