package phase

import (
	"testing"

	"github.com/rollboot/rollboot/internal/store"
)

// The text of every wait reason, as stored in plans and printed by `rollboot
// status`: scripts and operators read it, so it does not change with the code.
func TestWaitReasonText(t *testing.T) {
	tests := []struct {
		w    WaitReason
		want string
	}{
		{WaitReason{}, ""},
		{WaitFor(WaitRebootLoop, "reboot loop: a reboot is still needed right after reboot 1; holding until 2026-12-02T11:00:00Z"),
			"reboot loop: a reboot is still needed right after reboot 1; holding until 2026-12-02T11:00:00Z"},
		{WaitFor(WaitBackoff, "2026-12-02T11:00:00Z"), "backing off until 2026-12-02T11:00:00Z"},
		{WaitFor(WaitPaused, ""), "paused"},
		{WaitFor(WaitNoRecord, ""), "no agent has published this host"},
		{WaitFor(WaitServerNoGates, "nomad-server"), "the host runs a nomad-server: rollboot does not reboot servers without quorum gates"},
		{WaitFor(WaitNodeNotReady, "down"), "node is down"},
		{WaitFor(WaitForeignDrain, ""), "node is being drained by someone else"},
		{WaitFor(WaitForeignIneligible, "complete"), "node was left ineligible by a drain rollboot did not start (complete): the operator's until it is eligible again (nomad node eligibility -enable)"},
		{WaitFor(WaitSlot, ""), "waiting for a slot in its group or for its window"},
		{WaitFor(WaitAgentNotOnNode, "rollboot"), "rollboot's agent (job rollboot) does not run on the node: a drain would leave no agent to reboot it"},
		{WaitFor(WaitGroupBudget, `group "web" is full: 1 of 1 slots in use`), `group "web" is full: 1 of 1 slots in use`},
		{WaitFor(WaitAgentMissing, "agent missing: its allocation of job rollboot failed"), "agent missing: its allocation of job rollboot failed"},
		{WaitFor(WaitLastCandidate, ""), "it would take the last coordinator candidate in service out"},
		{WaitFor(WaitRolesUnknown, "EOF"), "server roles unknown (the agent keeps retrying): EOF"},
		{WaitFor(WaitRaftIDUnknown, "consul-server"), "the host runs a consul-server whose Raft ID is unknown: its quorum gate stays closed"},
		{WaitFor(WaitNoQuorumGates, ""), "the host runs servers and no quorum gates are configured"},
		{WaitFor(WaitServerOut, "nomad server of global on h2"), "nomad server of global on h2 is already out: one at a time"},
		{WaitFor(WaitVaultSealed, "h2"), "quorum gate: Vault on h2 is sealed: an unseal is needed first"},
		{WaitFor(WaitPreRebootGate, `nomad "global": no leader`), `quorum gate: nomad "global": no leader`},
		{WaitFor(WaitHandOverRefused, "403"), "leadership hand-over refused (policy: hold): 403"},
		{WaitFor(WaitPolicyInvalid, "the stored policy (version 3) is invalid: p.hcl:1:1: x"),
			"no new reboot starts: the stored policy (version 3) is invalid: p.hcl:1:1: x"},
		{WaitFor(WaitSettle, `group "web" starts its next host at 2026-12-02T11:00:00Z, 2m after h1 came back`),
			`settling: group "web" starts its next host at 2026-12-02T11:00:00Z, 2m after h1 came back`},
		{WaitFor(WaitCapacity, "pool batch: needs 6 GiB memory, 2 GiB free"), "capacity: pool batch: needs 6 GiB memory, 2 GiB free"},
		{WaitFor(WaitNodeNotFound, ""), "node not found"},
		{WaitFor(WaitDrainStarting, ""), "starting the drain"},
		{WaitFor(WaitDraining, ""), "draining"},
		{WaitFor(WaitHandingOver, "nomad, vault"), "handing over the leadership of nomad, vault"},
		{WaitFor(WaitAgentReboot, ""), "waiting for the agent to reboot the host"},
		{WaitFor(WaitAgentHolds, "no leader"), "the agent holds the reboot: no leader"},
		{WaitFor(WaitRebooting, ""), "rebooting"},
		{WaitFor(WaitStuck, "x (rollboot release h1 frees the slot)"), "stuck: x (rollboot release h1 frees the slot)"},
		{WaitFor(WaitNodeToBeReady, "initializing"), "waiting for the node to be ready (initializing)"},
		{WaitFor(WaitEligibility, ""), "restoring eligibility"},
		{WaitFor(WaitSystemJob, "default/x"), "waiting for system job default/x to run on the node"},
		{WaitFor(WaitVaultUnseal, "h1"), "Vault on h1 is sealed: an unseal is needed"},
		{WaitFor(WaitPostRebootGate, `nomad "global": no leader`), `nomad "global": no leader`},
		{WaitFor(WaitNewBootID, ""), "waiting for the agent to report the host's new boot ID"},
		{WaitFor(WaitUnknownPhase, "odd"), "unknown phase odd"},
		{WaitFor(WaitPlanUnreadable, "held: its plan was written by a newer rollboot (version 9)"),
			"held: its plan was written by a newer rollboot (version 9)"},
	}
	for _, tc := range tests {
		if got := tc.w.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.w, got, tc.want)
		}
	}
}

// Step takes what admission says: the host's group, and why it was not
// admitted; the plan it returns is the one to store.
func TestStepTakesAdmission(t *testing.T) {
	pending := plan(store.PhasePending, func(p *store.Plan) { p.GrantID, p.Attempt = "", 0 })
	budget := WaitFor(WaitGroupBudget, `group "db" is full: 1 of 1 slots in use`)
	tests := []struct {
		name      string
		in        Input
		wantGroup string
		wait      WaitReason
		write     bool
	}{
		{name: "not admitted without a reason waits for a slot: on its way, nothing to store",
			in:        Input{Plan: pending, Host: host("b1", true), Node: node(nil), Group: "db"},
			wantGroup: "db", wait: WaitFor(WaitSlot, "")},
		{name: "queued for a slot: not written at a hand-off",
			in: Input{Plan: pending, Host: host("b1", true), Node: node(nil), Group: "db",
				NotAdmitted: WaitFor(WaitQueued, `"db"`)},
			wantGroup: "db", wait: WaitFor(WaitQueued, `"db"`)},
		{name: "a hold stored before is forgotten once the host is on its way",
			in: Input{Plan: func() store.Plan { p := pending; p.Waiting = budget.String(); return p }(),
				Host: host("b1", true), Node: node(nil), Group: "db", NotAdmitted: WaitFor(WaitQueued, `"db"`)},
			wantGroup: "db", wait: WaitFor(WaitQueued, `"db"`), write: true},
		{name: "not admitted: admission's reason is shown",
			in:        Input{Plan: pending, Host: host("b1", true), Node: node(nil), Group: "db", NotAdmitted: budget},
			wantGroup: "db", wait: budget, write: true},
		{name: "the reason already shown is not written again",
			in: Input{Plan: func() store.Plan { p := pending; p.Waiting = budget.String(); return p }(),
				Host: host("b1", true), Node: node(nil), Group: "db", NotAdmitted: budget},
			wantGroup: "db", wait: budget},
		{name: "the phase machine's own reasons come first",
			in:        Input{Plan: pending, Host: host("b1", true), Node: node(func(n *NodeView) { n.Status = "down" }), Group: "db", NotAdmitted: budget},
			wantGroup: "db", wait: WaitFor(WaitNodeNotReady, "down"), write: true},
		{name: "granted: the group is recorded",
			in:        Input{Plan: pending, Host: host("b1", true), Node: node(nil), Group: "db", Admitted: true, NewGrantID: "g2"},
			wantGroup: "db", write: true},
		{name: "no group given keeps the plan's",
			in:        Input{Plan: pending, Host: host("b1", true), Node: node(nil)},
			wantGroup: "web", wait: WaitFor(WaitSlot, "")},
		{name: "out of service, the group stays the one granted",
			in: Input{Plan: plan(store.PhaseDraining, nil), Host: host("b1", true), Group: "db",
				Node: node(func(n *NodeView) { n.Draining, n.DrainGrant, n.DrainStatus = true, "g1", "draining" })},
			wantGroup: "web", wait: WaitFor(WaitDraining, "")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now, tc.in.Timing = t0, timing
			d := Step(tc.in)
			if d.Plan.Group != tc.wantGroup {
				t.Errorf("group = %q, want %q", d.Plan.Group, tc.wantGroup)
			}
			if d.Waiting != tc.wait || d.Plan.Waiting != tc.wait.Stored() {
				t.Errorf("waiting %+v, plan shows %q; want %+v", d.Waiting, d.Plan.Waiting, tc.wait)
			}
			if d.Write != tc.write {
				t.Errorf("write = %v, want %v", d.Write, tc.write)
			}
			// The stored reason's kind goes with it (the status page counts
			// the holds by kind); a host on its way stores neither.
			if d.Write && d.Plan.Waiting != "" && d.Plan.WaitingKind != tc.wait.Kind.Name() ||
				d.Plan.Waiting == "" && d.Plan.WaitingKind != "" {
				t.Errorf("plan's waiting kind %q for %q, want %q", d.Plan.WaitingKind, d.Plan.Waiting, tc.wait.Kind.Name())
			}
		})
	}
}
