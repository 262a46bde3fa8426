# rollboot-agent-server: the agents on hosts that run a Nomad, Consul or Vault
# server, usually the systemd service deploy/systemd/rollboot-agent.service.
# Everything rollboot-agent.policy.hcl grants (see that file for each right and
# what else it allows: no agent rule, no job or allocation), and the two rights
# only a server host's agent uses: the Nomad servers' autopilot health, and its
# clusters' server reboot locks.
# Keep this token off hosts that run no server: with it, a host can hold a
# cluster's reboot lock and so delay that cluster's server reboots.
#
#   nomad acl policy apply -description "rollboot agent on server hosts" \
#     rollboot-agent-server rollboot-agent-server.policy.hcl
#
# Written for the default state prefix "rollboot" in namespace "default". For
# another state.prefix, replace "rollboot/" in the paths; for another
# nomad.namespace, rename the namespace block.

# No agent rule, as in rollboot-agent: GET /v1/agent/health (no ACL check in
# Nomad) tells whether the local agent runs a client and a server.

# Read only, as in rollboot-agent: the host's node (GET /v1/nodes?filter=Name ==
# "<host>") and, at the go/no-go of a server host that is also a Nomad client,
# GET /v1/node/<id>. And GET /v1/agent/members: the local Nomad server answers it
# from its own Serf, naming itself (ServerName, ServerRegion); its member
# "<name>.<region>" carries its Raft ID and region in its tags "id" and
# "region" (command/agent/agent_endpoint.go AgentMembersRequest →
# nomad/status_endpoint.go Status.Members: AllowNodeRead; nomad/server.go
# setupSerf). It lists the Nomad servers, nothing more.
node {
  policy = "read"
}

# GET /v1/operator/autopilot/health: right before rebooting, a Nomad server's
# host checks its cluster's pre-reboot quorum gate once more
# (nomad/operator_endpoint.go ServerHealth: AllowOperatorRead). operator:read
# also reads the autopilot and scheduler configuration; it changes nothing.
operator {
  policy = "read"
}

namespace "default" {
  variables {
    # As rollboot-agent: read and write rollboot/hosts/<host>, read (blocking)
    # rollboot/plan/<host>.
    path "rollboot/hosts/*" {
      capabilities = ["read", "write"]
    }

    path "rollboot/plan/*" {
      capabilities = ["read"]
    }

    # The server reboot lock of each cluster the host serves, one variable lock
    # per cluster (rollboot/serverlock/<product>-<cluster>): PUT
    # ...?lock-acquire at the final go/no-go, ?lock-renew, and ?lock-release
    # once the host's server is back and its cluster passes the post-reboot
    # gate (every lock operation needs write: nomad/variables_endpoint.go
    # hasOperationPermissions); GET to name the holder of a lock it waits for.
    # A held lock cannot be changed, released or deleted without its lock ID,
    # which Nomad shows only to its holder.
    path "rollboot/serverlock/*" {
      capabilities = ["read", "write"]
    }
  }
}
