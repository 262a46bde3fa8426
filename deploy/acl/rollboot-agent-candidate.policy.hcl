# rollboot-agent-candidate: `rollboot agent` with coordinator.enabled = true, a
# per-host agent that also stands for election as the coordinator. An option for
# small clusters only: every host holding this token can drain, reboot or pause
# any host of the fleet (docs/deploy.md). The default deployment gives agents
# rollboot-agent.policy.hcl (rollboot-agent-server.policy.hcl on server hosts)
# and runs rollboot-coordinator.nomad.hcl.
# It is the union of rollboot-agent-server.policy.hcl (itself rollboot-agent's
# rights and a server host's) and rollboot-coordinator.policy.hcl, since with
# this option every host, servers included, runs a candidate with this one
# token; see those files for the call behind each right.
#
# Use this policy rather than attaching several of those to one token: Nomad
# merges variable rules by path and the most specific path wins, so the agent
# policy's "rollboot/plan/*" (read only) would hide the coordinator's
# "rollboot/*" and the coordinator could not write plans.
#
#   nomad acl policy apply -description "rollboot agent and coordinator candidate" \
#     rollboot-agent-candidate rollboot-agent-candidate.policy.hcl
#
# Written for the default state prefix "rollboot" in namespace "default". For
# another state.prefix, replace "rollboot/" in the path; for another
# nomad.namespace, rename the `namespace "default"` block (keep its list-jobs and read-job).

# No agent rule: neither the agent nor the coordinator needs one (the agent's
# GET /v1/agent/health has no ACL check in Nomad).

# Agent: GET /v1/nodes?filter=Name == "<host>" (the host's node), GET
# /v1/agent/members (a Nomad server's own Raft ID) and GET /v1/node/<id> (the
# go/no-go) need node:read.
# Coordinator: GET /v1/nodes (list, ?filter=, blocking watch),
# GET /v1/event/stream?topic=Node:* (the nodes written since the list) and
# GET /v1/node/<id>/allocations and GET /v1/client/metadata need node:read;
# POST /v1/node/<id>/drain, POST /v1/node/<id>/eligibility and POST
# /v1/client/metadata (rollboot's dynamic node metadata) need node:write.
node {
  policy = "write"
}

# Coordinator: GET /v1/node/<id>/allocations only returns allocations of
# namespaces with read-job; system jobs, and the allocations the capacity gate
# counts, may be in any namespace. The workload blockers list jobs (list-jobs),
# deployments and evaluations (read-job) with ?namespace=*.
namespace "*" {
  capabilities = ["list-jobs", "read-job"]
}

namespace "default" {
  # Repeated: the exact namespace rule replaces the "*" rule here.
  capabilities = ["list-jobs", "read-job"]

  variables {
    # Agent:       read + write rollboot/hosts/<host>, read (blocking)
    #              rollboot/plan/<host>; on a server host, read + write (the
    #              lock operations) rollboot/serverlock/<product>-<cluster>.
    # Coordinator: list + read hosts/, plan/, history/, control, notify/<part>,
    #              leader; write plan/<host>, control, history/<id>, coordinator,
    #              notify/<part>, election (the census), and the lock operations
    #              on rollboot/leader and rollboot/standby/<i>; destroy
    #              history/<id> (pruning) and notify (the ledger of version 1,
    #              once moved to its parts).
    # Status page: reads the same, and lists rollboot/ (one blocking watch).
    path "rollboot/*" {
      capabilities = ["read", "list", "write", "destroy"]
    }

    # Coordinator: read (blocking watch) rollboot/policy, the stored policy;
    # only the operator writes it.
    path "rollboot/policy" {
      capabilities = ["read"]
    }
  }
}

# GET /v1/operator/autopilot/health: the server quorum gates, the coordinator's
# and a server host's final go/no-go. (The Nomad
# leadership hand-over needs a management token: see
# coordinator.leader_transfer_denied.)
operator {
  policy = "read"
}
