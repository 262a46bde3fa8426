# rollboot-operator: a person or script running the rollboot CLI:
# `rollboot status`, `plan`, `request`, `cancel`, `pause`, `resume`, `release`, and
# `rollboot policy apply`, the only writer of the stored rollout policy.
#
#   nomad acl policy apply -description "rollboot CLI" rollboot-operator rollboot-operator.policy.hcl
#
# Written for the default state prefix "rollboot" in namespace "default". For
# another state.prefix, replace "rollboot/" in both paths; for another
# nomad.namespace, rename the namespace block.
#
# The CLI never changes nodes: every change it makes is a check-and-set write of
# rollboot/control, rollboot/requests/<host> or rollboot/policy, which the
# coordinator carries out with its own token.

# `rollboot status`: GET /v1/nodes, to check that each host record names its own
# node, and that the node's agent runs. `rollboot policy apply`: GET /v1/nodes,
# also with ?filter=<group filter>, to show the hosts whose group changes.
node {
  policy = "read"
}

# `rollboot plan`: GET /v1/operator/autopilot/health, the Nomad servers' quorum
# gate of a server host waiting for its reboot (as the coordinator reads it).
operator {
  policy = "read"
}

# `rollboot plan`: the workload blockers (policy block workloads) as the
# coordinator reads them, with ?namespace=*: GET /v1/jobs?filter= (list-jobs),
# GET /v1/deployments, GET /v1/evaluations?filter= and the allocations of a
# waiting host's node (read-job).
namespace "*" {
  capabilities = ["list-jobs", "read-job"]
}

# An exact namespace rule replaces the "*" rule for that namespace, so the
# capabilities above are repeated here.
namespace "default" {
  # `rollboot status`: GET /v1/job/<coordinator.agent_job>/allocations (which
  # hosts lost their agent). In the namespace the agent job runs in.
  capabilities = ["list-jobs", "read-job"]

  variables {
    # `rollboot status`: GET /v1/vars?prefix=rollboot/hosts/ and
    # ?prefix=rollboot/plan/ (read implies list), GET of each record.
    # `rollboot history`: ?prefix=rollboot/history/, GET of each record.
    # Read-only on the rest of rollboot's state.
    path "rollboot/*" {
      capabilities = ["read"]
    }

    # request, cancel, pause, resume, release: GET rollboot/control, then
    # PUT rollboot/control?cas=N (cas=0 when it does not exist yet). The most
    # specific path rule wins, so read is repeated here.
    path "rollboot/control" {
      capabilities = ["read", "write"]
    }

    # request, cancel, release: PUT rollboot/requests/<host>?cas=N (one variable
    # per host), DELETE rollboot/requests/<host>?cas=N once it is empty;
    # `rollboot control reset` moves old entries there from rollboot/control.
    path "rollboot/requests/*" {
      capabilities = ["read", "list", "write", "destroy"]
    }

    # forget: DELETE rollboot/hosts/<host>?cas=N, the record of a host gone for
    # good (a decommissioned host, or one forged under a name that is no host);
    # destroy deletes, it cannot write a record. Read and list repeated.
    path "rollboot/hosts/*" {
      capabilities = ["read", "list", "destroy"]
    }

    # resume: GET rollboot/halts, then PUT rollboot/halts?cas=N to lift a
    # halt of the failure budgets (the coordinator writes the rest of it).
    path "rollboot/halts" {
      capabilities = ["read", "write"]
    }

    # policy show, history: GET rollboot/policy; policy apply: GET, then
    # PUT rollboot/policy?cas=N (cas=0 for the first version).
    path "rollboot/policy" {
      capabilities = ["read", "write"]
    }
  }
}
