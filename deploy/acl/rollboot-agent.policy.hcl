# rollboot-agent: a per-host agent that is NOT a coordinator candidate
# (coordinator.enabled = false), e.g. `rollboot agent` on server-only hosts.
#
#   nomad acl policy apply -description "rollboot agent" rollboot-agent rollboot-agent.policy.hcl
#
# Written for the default state prefix "rollboot" in namespace "default". For
# another state.prefix, replace "rollboot/" in the paths; for another
# nomad.namespace, rename the namespace block (it must be the namespace named in
# the rollboot configuration, not the one the job runs in).
#
# Nomad cannot scope a static policy to "this host's own record", so an agent
# token can write every record under rollboot/hosts/. It cannot touch plans,
# control, history or the leader lock, and cannot drain or change eligibility.

# GET /v1/agent/self: the agent asks its local Nomad agent for its client node ID
# (stats.client.node_id) and whether it is a server (stats.nomad.server).
agent {
  policy = "read"
}

# Read only: right before rebooting, the agent checks its node as Nomad reports
# it (GET /v1/node/<id>: ineligible, its last drain complete and rollboot's) and
# that nothing but system jobs runs on it (GET /v1/node/<id>/allocations).
node {
  policy = "read"
}

# GET /v1/node/<id>/allocations only returns allocations of namespaces with
# read-job; an allocation left on the node may be in any namespace.
namespace "*" {
  capabilities = ["read-job"]
}

# GET /v1/operator/autopilot/health: a server host checks its Nomad cluster's
# pre-reboot quorum gate once more right before rebooting.
operator {
  policy = "read"
}

namespace "default" {
  # Repeated: the exact namespace rule replaces the "*" rule here.
  capabilities = ["read-job"]

  variables {
    # read:  GET /v1/var/rollboot/hosts/<host> (own record at start, and again
    #        after a CAS conflict).
    # write: PUT /v1/var/rollboot/hosts/<host>?cas=N (publish the host record).
    path "rollboot/hosts/*" {
      capabilities = ["read", "write"]
    }

    # read: GET /v1/var/rollboot/plan/<host>?index=N (blocking watch of the
    #       coordinator's plan for this host: the go-ahead to reboot).
    path "rollboot/plan/*" {
      capabilities = ["read"]
    }
  }
}
