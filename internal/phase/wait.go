package phase

import "strings"

// WaitKind says why a host is not moving. Code compares kinds, never the text
// shown to operators, so that rewording a reason cannot change a decision.
type WaitKind int

// The reasons a host waits. Detail holds the variable part of the text, as the
// comment of each kind says.
const (
	NotWaiting WaitKind = iota

	// A pending host (decide.go, admit.go).
	WaitRebootLoop // Detail: the plan's last error, which says until when
	WaitBackoff    // Detail: "<time>" or "<time>: <last error>"
	WaitPaused
	WaitNoRecord
	WaitServerNoGates // Detail: the server role
	WaitNodeNotReady  // Detail: the node's status
	WaitForeignDrain
	WaitForeignIneligible // Detail: the last drain's status (complete, canceled)
	WaitSlot              // not admitted, with no reason given by admission
	WaitAgentNotOnNode    // Detail: the agent's job
	WaitGroupBudget       // Detail: package policy's reason (a window, a hold, an unknown group)
	// WaitQueued: only a slot of the group is missing (the group is full, its
	// max_unavailable reached, or a host ahead waits for that). Detail: the
	// group, quoted. What changes at every hand-off (the host ahead, the slots in
	// use) is left out: `rollboot status` computes it (package status).
	WaitQueued
	WaitAgentMissing // Detail: MissingAgents' reason
	WaitLastCandidate
	WaitRolesUnknown  // Detail: the agent's discovery error
	WaitRaftIDUnknown // Detail: the server role
	WaitNoQuorumGates
	WaitServerOut       // Detail: "<product> server of <cluster> on <host>"
	WaitVaultSealed     // Detail: the host whose Vault is sealed
	WaitPreRebootGate   // Detail: health.PreRebootGate's reason
	WaitHandOverRefused // Detail: the refusal
	WaitPolicyInvalid   // Detail: why the stored policy cannot be used
	WaitSettle          // Detail: the group, until when and after which host
	WaitAlerts          // Detail: the alerts' names (alertgate.Verdict.Names)
	WaitAlertsUnknown   // Detail: which source could not be read, and why
	WaitBlockingJob     // Detail: "job <job>" or "jobs <job>, <job>" (workloads.job_filter)
	WaitDeployment      // Detail: workload.PoolHold's reason
	WaitBlockedEvals    // Detail: workload.PoolHold's reason
	WaitWorkloadUnknown // Detail: the read that failed
	WaitCapacity        // Detail: package capacity's reason, or why it cannot tell
	WaitSingleton       // Detail: workload.SingletonHold's reason, naming the job groups
	WaitDrainStopsAgent // Detail: the agent's job
	WaitHealthGate      // Detail: healthgate.Verdict's reason (the gate, what it found)
	// WaitAwaitingApproval: its turn came in a group with approval = "manual"
	// or "webhook" (package admission, approval.go). Detail: what approves it.
	WaitAwaitingApproval
	WaitHostPaused // Detail: store.Pause.Describe of the host's pause
	WaitNodeOptOut // Detail: the node meta rollboot_pause's value
	// Waves (package wave): the canaries of the host's wave and the groups its
	// group follows.
	WaitCanary        // Detail: the canaries waited for, and the wave
	WaitCanarySoak    // Detail: until when, and the wave
	WaitCanaryFailed  // Detail: which canary failed and how, and the wave
	WaitAfterGroup    // Detail: the group followed, and what it waits for
	WaitWaveUnknown   // Detail: why the waves cannot be read or stored
	WaitHalted        // Detail: policy.Halt.Text (the scope, its failures, the resume to run)
	WaitHaltUnknown   // Detail: why the halt state cannot be read
	WaitRolloutBudget // Detail: policy.RolloutRoom.Why (max_out or max_drains_per_hour)

	// A host out of service.
	WaitNodeNotFound
	WaitDrainStarting
	WaitDraining
	WaitHandingOver // Detail: the products, comma-separated
	WaitAgentReboot
	WaitAgentHolds // Detail: the agent's hold reason
	WaitRebooting
	WaitStuck         // Detail: "<last error> (rollboot release <host> frees the slot)"
	WaitNodeToBeReady // Detail: the node's status
	WaitEligibility
	WaitSystemJob      // Detail: the job
	WaitVaultUnseal    // Detail: the host
	WaitPostRebootGate // Detail: health.PostRebootGate's reason
	WaitNewBootID
	WaitUnknownPhase    // Detail: the phase
	WaitAllocsUnhealthy // Detail: package rejoin's detail, the allocations and why
	WaitConsulChecks    // Detail: package rejoin's detail, the failing checks
	WaitAllocsStarting  // Detail: package rejoin's detail, the allocations still starting
	WaitNodeGone        // Detail: NodeGone's reason and when the slot is released

	// A host whose plan a newer rollboot wrote (store.PhaseUnreadable).
	WaitPlanUnreadable // Detail: the store's reason, the whole text
)

// waitKinds gives each kind its name, the value of the reason label of
// rollboot_hosts_waiting (a fixed set), and its text as stored in plans and shown
// by `rollboot status`, where %s stands for the reason's Detail.
var waitKinds = [...]struct{ name, text string }{
	NotWaiting:            {"", ""},
	WaitRebootLoop:        {"reboot_loop", "%s"},
	WaitBackoff:           {"backoff", "backing off until %s"},
	WaitPaused:            {"paused", "paused"},
	WaitNoRecord:          {"no_record", "no agent has published this host"},
	WaitServerNoGates:     {"server_no_gates", "the host runs a %s: rollboot does not reboot servers without quorum gates"},
	WaitNodeNotReady:      {"node_not_ready", "node is %s"},
	WaitForeignDrain:      {"foreign_drain", "node is being drained by someone else"},
	WaitForeignIneligible: {"foreign_ineligible", "node was left ineligible by a drain rollboot did not start (%s): the operator's until it is eligible again (nomad node eligibility -enable)"},
	WaitSlot:              {"slot", "waiting for a slot in its group or for its window"},
	WaitAgentNotOnNode:    {"agent_not_on_node", "rollboot's agent (job %s) does not run on the node: a drain would leave no agent to reboot it"},
	WaitGroupBudget:       {"group_budget", "%s"},
	WaitQueued:            {"queued", "waiting for a slot in group %s"},
	WaitAgentMissing:      {"agent_missing", "%s"},
	WaitLastCandidate:     {"last_candidate", "it would take the last coordinator candidate in service out"},
	WaitRolesUnknown:      {"roles_unknown", "server roles unknown (the agent keeps retrying): %s"},
	WaitRaftIDUnknown:     {"raft_id_unknown", "the host runs a %s whose Raft ID is unknown: its quorum gate stays closed"},
	WaitNoQuorumGates:     {"no_quorum_gates", "the host runs servers and no quorum gates are configured"},
	WaitServerOut:         {"server_out", "%s is already out: one at a time"},
	WaitVaultSealed:       {"vault_sealed", "quorum gate: Vault on %s is sealed: an unseal is needed first"},
	WaitPreRebootGate:     {"pre_reboot_gate", "quorum gate: %s"},
	WaitHandOverRefused:   {"hand_over_refused", "leadership hand-over refused (policy: hold): %s"},
	WaitPolicyInvalid:     {"policy_invalid", "no new reboot starts: %s"},
	WaitSettle:            {"settle", "settling: %s"},
	WaitAlerts:            {"alerts", "no new drain starts while alerts fire: %s"},
	WaitAlertsUnknown:     {"alerts_unknown", "no new drain starts: cannot tell whether alerts fire: %s"},
	WaitBlockingJob:       {"blocking_job", "runs allocations of %s (workloads.job_filter)"},
	WaitDeployment:        {"deployment", "%s"},
	WaitBlockedEvals:      {"blocked_evals", "%s"},
	WaitWorkloadUnknown:   {"workload_unknown", "cannot check the workload blockers: %s"},
	WaitCapacity:          {"capacity", "capacity: %s"},
	WaitSingleton:         {"singleton", "%s"},
	WaitDrainStopsAgent:   {"drain_stops_agent", "drain.ignore_system_jobs = false would stop rollboot's agent (system job %s) on the node: nobody would reboot it"},
	WaitHealthGate:        {"health_gate", "%s"},
	WaitAwaitingApproval:  {"awaiting_approval", "awaiting approval: %s"},
	WaitHostPaused:        {"host_paused", "%s"},
	WaitNodeOptOut:        {"node_opt_out", "its node opted out (node meta rollboot_pause): %s"},
	WaitCanary:            {"canary", "waiting for canary %s"},
	WaitCanarySoak:        {"canary_soak", "canary soak until %s"},
	WaitCanaryFailed:      {"canary_failed", "canary failed: %s"},
	WaitAfterGroup:        {"after_group", "after %s"},
	WaitWaveUnknown:       {"wave_unknown", "cannot tell the order of its wave: %s"},
	WaitHalted:            {"halted", "halted: %s"},
	WaitHaltUnknown:       {"halt_unknown", "no new drain starts: the failure budgets' halt state cannot be read: %s"},
	WaitRolloutBudget:     {"rollout_budget", "%s"},
	WaitNodeNotFound:      {"node_not_found", "node not found"},
	WaitDrainStarting:     {"drain_starting", "starting the drain"},
	WaitDraining:          {"draining", "draining"},
	WaitHandingOver:       {"handing_over", "handing over the leadership of %s"},
	WaitAgentReboot:       {"agent_reboot", "waiting for the agent to reboot the host"},
	WaitAgentHolds:        {"agent_holds", "the agent holds the reboot: %s"},
	WaitRebooting:         {"rebooting", "rebooting"},
	WaitStuck:             {"stuck", "stuck: %s"},
	WaitNodeToBeReady:     {"node_to_be_ready", "waiting for the node to be ready (%s)"},
	WaitEligibility:       {"eligibility", "restoring eligibility"},
	WaitSystemJob:         {"system_job", "waiting for system job %s to run on the node"},
	WaitVaultUnseal:       {"vault_unseal", "Vault on %s is sealed: an unseal is needed"},
	WaitPostRebootGate:    {"post_reboot_gate", "%s"},
	WaitNewBootID:         {"new_boot_id", "waiting for the agent to report the host's new boot ID"},
	WaitUnknownPhase:      {"unknown_phase", "unknown phase %s"},
	WaitAllocsUnhealthy:   {"allocs_unhealthy", "waiting for allocations to be healthy: %s"},
	WaitConsulChecks:      {"consul_checks", "waiting for Consul checks to pass: %s"},
	WaitAllocsStarting:    {"allocs_starting", "waiting for allocations to start and be healthy: %s"},
	WaitNodeGone:          {"node_gone", "the node is gone: %s"},
	WaitPlanUnreadable:    {"plan_unreadable", "%s"},
}

// Name is the kind's name in metrics ("" for NotWaiting and an unknown kind).
func (k WaitKind) Name() string {
	if k < 0 || int(k) >= len(waitKinds) {
		return ""
	}
	return waitKinds[k].name
}

// progress reports whether a host waiting for k is simply on its way: its turn
// in its group's line, or the next step of its cycle, which its phase says. Such
// a reason is not stored in the plan (Plan.Waiting is empty; `rollboot status`
// tells it from the phase and the other plans): it changes at every hand-off
// and at every step, and storing it would cost a Nomad variable write each time,
// to this host's plan or, at a hand-off, to every waiting host's. The others,
// holds an operator may have to act on, are stored whenever their text changes.
func (k WaitKind) progress() bool {
	switch k {
	case WaitSlot, WaitQueued, WaitDrainStarting, WaitDraining, WaitHandingOver, WaitAgentReboot,
		WaitRebooting, WaitNodeToBeReady, WaitEligibility, WaitNewBootID, WaitAllocsStarting:
		return true
	}
	return false
}

// Stored is the reason as stored in the plan: its text, or "" for a host on
// its way (progress).
func (w WaitReason) Stored() string {
	if w.Kind.progress() {
		return ""
	}
	return w.String()
}

// WaitReason is why a host waits: a kind, and the detail its text needs.
type WaitReason struct {
	Kind   WaitKind
	Detail string
}

// WaitFor returns a reason of kind k with detail.
func WaitFor(k WaitKind, detail string) WaitReason { return WaitReason{Kind: k, Detail: detail} }

// IsZero reports whether the host does not wait.
func (w WaitReason) IsZero() bool { return w.Kind == NotWaiting }

// String is the reason as stored in the plan and shown by `rollboot status`: its
// kind's text with the detail in place (the detail alone for an unknown kind).
func (w WaitReason) String() string {
	if w.Kind < 0 || int(w.Kind) >= len(waitKinds) {
		return w.Detail
	}
	before, after, found := strings.Cut(waitKinds[w.Kind].text, "%s")
	if !found {
		return before
	}
	return before + w.Detail + after
}
