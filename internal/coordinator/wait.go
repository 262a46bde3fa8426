package coordinator

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
	WaitSlot           // not admitted, with no reason given by admission
	WaitAgentNotOnNode // Detail: the agent's job
	WaitGroupBudget    // Detail: package policy's reason (window, budget, FIFO order)
	WaitAgentMissing   // Detail: MissingAgents' reason
	WaitLastCandidate
	WaitRolesUnknown  // Detail: the agent's discovery error
	WaitRaftIDUnknown // Detail: the server role
	WaitNoQuorumGates
	WaitServerOut       // Detail: "<product> server of <cluster> on <host>"
	WaitVaultSealed     // Detail: the host whose Vault is sealed
	WaitPreRebootGate   // Detail: health.PreRebootGate's reason
	WaitHandOverRefused // Detail: the refusal

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
	WaitUnknownPhase // Detail: the phase

	// A host whose plan a newer rollboot wrote (store.PhaseUnreadable).
	WaitPlanUnreadable // Detail: the store's reason, the whole text
)

// waitKindNames are the kinds' names, the values of the reason label of
// rollboot_hosts_waiting: a fixed set.
var waitKindNames = [...]string{
	NotWaiting: "", WaitRebootLoop: "reboot_loop", WaitBackoff: "backoff", WaitPaused: "paused",
	WaitNoRecord: "no_record", WaitServerNoGates: "server_no_gates", WaitNodeNotReady: "node_not_ready",
	WaitForeignDrain: "foreign_drain", WaitSlot: "slot", WaitAgentNotOnNode: "agent_not_on_node",
	WaitGroupBudget: "group_budget", WaitAgentMissing: "agent_missing", WaitLastCandidate: "last_candidate",
	WaitRolesUnknown: "roles_unknown", WaitRaftIDUnknown: "raft_id_unknown", WaitNoQuorumGates: "no_quorum_gates",
	WaitServerOut: "server_out", WaitVaultSealed: "vault_sealed", WaitPreRebootGate: "pre_reboot_gate",
	WaitHandOverRefused: "hand_over_refused", WaitNodeNotFound: "node_not_found", WaitDrainStarting: "drain_starting",
	WaitDraining: "draining", WaitHandingOver: "handing_over", WaitAgentReboot: "agent_reboot",
	WaitAgentHolds: "agent_holds", WaitRebooting: "rebooting", WaitStuck: "stuck", WaitNodeToBeReady: "node_to_be_ready",
	WaitEligibility: "eligibility", WaitSystemJob: "system_job", WaitVaultUnseal: "vault_unseal",
	WaitPostRebootGate: "post_reboot_gate", WaitNewBootID: "new_boot_id", WaitUnknownPhase: "unknown_phase",
	WaitPlanUnreadable: "plan_unreadable",
}

// Name is the kind's name in metrics ("" for NotWaiting and an unknown kind).
func (k WaitKind) Name() string {
	if k < 0 || int(k) >= len(waitKindNames) {
		return ""
	}
	return waitKindNames[k]
}

// WaitReason is why a host waits: a kind, and the detail its text needs.
type WaitReason struct {
	Kind   WaitKind
	Detail string
}

// waitFor returns a reason of kind k with detail.
func waitFor(k WaitKind, detail string) WaitReason { return WaitReason{Kind: k, Detail: detail} }

// IsZero reports whether the host does not wait.
func (w WaitReason) IsZero() bool { return w.Kind == NotWaiting }

// String is the reason as stored in the plan and shown by `rollboot status`.
func (w WaitReason) String() string {
	switch w.Kind {
	case NotWaiting:
		return ""
	case WaitBackoff:
		return "backing off until " + w.Detail
	case WaitPaused:
		return "paused"
	case WaitNoRecord:
		return "no agent has published this host"
	case WaitServerNoGates:
		return "the host runs a " + w.Detail + ": rollboot does not reboot servers without quorum gates"
	case WaitNodeNotReady:
		return "node is " + w.Detail
	case WaitForeignDrain:
		return "node is being drained by someone else"
	case WaitSlot:
		return "waiting for a slot in its group or for its window"
	case WaitAgentNotOnNode:
		return "rollboot's agent (job " + w.Detail + ") does not run on the node: a drain would leave no agent to reboot it"
	case WaitLastCandidate:
		return "it would take the last coordinator candidate in service out"
	case WaitRolesUnknown:
		return "server roles unknown (the agent keeps retrying): " + w.Detail
	case WaitRaftIDUnknown:
		return "the host runs a " + w.Detail + " whose Raft ID is unknown: its quorum gate stays closed"
	case WaitNoQuorumGates:
		return "the host runs servers and no quorum gates are configured"
	case WaitServerOut:
		return w.Detail + " is already out: one at a time"
	case WaitVaultSealed:
		return "quorum gate: Vault on " + w.Detail + " is sealed: an unseal is needed first"
	case WaitPreRebootGate:
		return "quorum gate: " + w.Detail
	case WaitHandOverRefused:
		return "leadership hand-over refused (policy: hold): " + w.Detail
	case WaitNodeNotFound:
		return "node not found"
	case WaitDrainStarting:
		return "starting the drain"
	case WaitDraining:
		return "draining"
	case WaitHandingOver:
		return "handing over the leadership of " + w.Detail
	case WaitAgentReboot:
		return "waiting for the agent to reboot the host"
	case WaitAgentHolds:
		return "the agent holds the reboot: " + w.Detail
	case WaitRebooting:
		return "rebooting"
	case WaitStuck:
		return "stuck: " + w.Detail
	case WaitNodeToBeReady:
		return "waiting for the node to be ready (" + w.Detail + ")"
	case WaitEligibility:
		return "restoring eligibility"
	case WaitSystemJob:
		return "waiting for system job " + w.Detail + " to run on the node"
	case WaitVaultUnseal:
		return "Vault on " + w.Detail + " is sealed: an unseal is needed"
	case WaitNewBootID:
		return "waiting for the agent to report the host's new boot ID"
	case WaitUnknownPhase:
		return "unknown phase " + w.Detail
	}
	// WaitRebootLoop, WaitGroupBudget, WaitAgentMissing, WaitPostRebootGate,
	// WaitPlanUnreadable: the detail is the whole text.
	return w.Detail
}
