package phase

import (
	"strconv"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/store"
)

// A drain rollboot starts carries its grant in its meta (as nomad-autoscaler's
// drained_by does): the node then tells an operator, a restarted coordinator
// and the host's agent which grant drained it, and whether the node was
// eligible before (what a drain left behind needs given back: staleDrain).
const (
	DrainMetaGrant          = "rollboot_grant"
	drainMetaEligibleBefore = "rollboot_eligible_before"
)

// NomadDrain is the drain request of the grant in p, decided on in.
func NomadDrain(in Input, p store.Plan) *api.DrainOptions {
	return &api.DrainOptions{DrainSpec: DrainSpec(in), MarkEligible: false, Meta: map[string]string{
		DrainMetaGrant:          p.GrantID,
		"drained_by":            "rollboot",
		drainMetaEligibleBefore: strconv.FormatBool(p.EligibleBefore),
		"message":               "rollboot: reboot of " + p.Host + " (" + p.Reason + ")",
	}}
}

// ViewOfNode is what the phase machine sees of a node in Nomad's node list.
func ViewOfNode(n *api.NodeListStub) *NodeView {
	v := NodeView{ID: n.ID, Status: n.Status, Eligible: n.SchedulingEligibility == "eligible", Draining: n.Drain,
		ModifyIndex: n.ModifyIndex}
	for _, d := range n.Drivers {
		if d != nil && d.UpdateTime.After(v.ClientStartedAt) {
			v.ClientStartedAt = d.UpdateTime
		}
	}
	if n.LastDrain != nil {
		v.DrainStatus = string(n.LastDrain.Status)
		v.DrainGrant = n.LastDrain.Meta[DrainMetaGrant]
		v.DrainRestores = n.LastDrain.Meta[drainMetaEligibleBefore] == "true"
		v.DrainStartedAt = n.LastDrain.StartedAt
		v.DrainBySelf = n.LastDrain.AccessorID == "client:"+n.ID // selfdrain.go
	}
	return &v
}
