# rollboot-coordinator: a standalone `rollboot coordinator`, the job
# deploy/nomad/rollboot-coordinator.nomad.hcl of the default deployment. Its token
# is the only one that can drain nodes and write plans: keep it in that job. It
# never calls /v1/agent/self, so it has no agent rule.
#
#   nomad acl policy apply -description "rollboot coordinator" rollboot-coordinator rollboot-coordinator.policy.hcl
#
# Written for the default state prefix "rollboot" in namespace "default". For
# another state.prefix, replace "rollboot/" in the path; for another
# nomad.namespace, rename the `namespace "default"` block (keep its list-jobs and read-job).

# node:write (includes node:read):
#   GET  /v1/nodes, also with ?filter=<group filter> and as a blocking watch   (read)
#   GET  /v1/event/stream?topic=Node:*: the nodes written since the list       (read)
#   GET  /v1/node/<id>/allocations: system jobs back after the reboot, and the
#        capacity gate's count of what a drain moves and what runs elsewhere (read)
#   GET  /v1/node/<id>: node events, and the capacity gate's node resources   (read)
#   POST /v1/node/<id>/drain: start a drain, cancel it                         (write)
#   POST /v1/node/<id>/eligibility: restore eligibility after the reboot       (write)
#   GET  /v1/client/metadata?node_id=<id>: the node's dynamic metadata         (read)
#   POST /v1/client/metadata: publish rollboot_phase, rollboot_reboot_required
#        and rollboot_last_reboot on the node                                  (write)
node {
  policy = "write"
}

# read-job in every namespace: GET /v1/node/<id>/allocations silently drops the
# allocations of namespaces where the token lacks read-job, and system jobs
# (which must be running again before a node is made eligible) may live in any
# namespace, as may the allocations the capacity gate counts (without read-job it
# would see room that is taken). The workload blockers (policy block workloads)
# read, with ?namespace=*: GET /v1/jobs?filter= (list-jobs), GET /v1/deployments
# and GET /v1/evaluations?filter= (read-job); a nomad_job health gate (policy
# block gate) reads GET /v1/job/<job>/allocations (read-job). Nothing else: no
# job submission, no logs.
namespace "*" {
  capabilities = ["list-jobs", "read-job"]
}

# An exact namespace rule replaces the "*" rule for that namespace (Nomad takes
# the exact match, not the union), so list-jobs and read-job are repeated here.
namespace "default" {
  capabilities = ["list-jobs", "read-job"]

  variables {
    # read/list: GET /v1/vars?prefix=rollboot/hosts/ (blocking watch) and
    #            rollboot/plan/, rollboot/history/; GET of each record, of
    #            rollboot/control, rollboot/notify/<part> and of rollboot/leader
    #            (watch of the election).
    # write:     PUT rollboot/plan/<host>?cas=N, rollboot/control?cas=N (clears
    #            requests and releases it carried out), rollboot/history/<id>?cas=0,
    #            rollboot/coordinator?cas=N (the leader and the policy version it
    #            enforces, for `rollboot status`),
    #            rollboot/notify/<part>?cas=N (the notifications sent, with
    #            notify {}: a shard of hosts, or the pause),
    #            rollboot/silences?cas=N (the Alertmanager silences kept, with
    #            the policy's silence {}),
    #            and PUT rollboot/leader?lock-acquire|lock-renew|lock-release
    #            (the election lock; every lock operation needs write), the
    #            same on rollboot/standby/<i> (the election's standby slots),
    #            GET and PUT rollboot/election?cas=N (the candidate census).
    # destroy:   DELETE rollboot/history/<id>?cas=N (pruning to history_size),
    #            DELETE rollboot/notify?cas=N (the notifications sent, as one
    #            variable before version 2 of the ledger: deleted once moved).
    # The status page (docs/status-page.md) reads the same records, and lists
    # rollboot/ as one blocking watch of the whole state.
    path "rollboot/*" {
      capabilities = ["read", "list", "write", "destroy"]
    }

    # read: GET rollboot/policy?index=N (blocking watch of the stored policy,
    #       the only rules the coordinator decides with). Only the operator
    #       writes it; the most specific path rule wins over "rollboot/*".
    path "rollboot/policy" {
      capabilities = ["read"]
    }
  }
}

# GET /v1/operator/autopilot/health: the server quorum gates read the Nomad
# servers' health and failure tolerance.
operator {
  policy = "read"
}

# Handing the Nomad leadership over before its server's reboot
# (PUT /v1/operator/raft/transfer-leadership) needs a management token: Nomad's
# Operator.TransferLeadershipToPeer (nomad/operator_endpoint.go) checks
# IsManagement(), and operator:write is not enough. No policy grants it, and
# rollboot does not need it: without it the transfer is refused and
# coordinator.leader_transfer_denied decides: "continue" (the default) reboots the
# leader and Nomad elects another; "hold" keeps the host waiting.
