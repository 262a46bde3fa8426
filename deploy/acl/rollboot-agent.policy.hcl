# rollboot-agent: the agents on Nomad clients, the system job
# deploy/nomad/rollboot.nomad.hcl (or its docker variant), which are not
# coordinator candidates (coordinator.enabled = false, the default). The agents
# on hosts that run a Nomad, Consul or Vault server hold
# rollboot-agent-server.policy.hcl instead; the coordinator job coordinates.
#
#   nomad acl policy apply -description "rollboot agent" rollboot-agent rollboot-agent.policy.hcl
#
# Written for the default state prefix "rollboot" in namespace "default". For
# another state.prefix, replace "rollboot/" in the paths; for another
# nomad.namespace, rename the namespace block (it must be the namespace named in
# the rollboot configuration, not the one the job runs in).
#
# Every right below names the call that needs it, and what else it lets the
# token do on a real Nomad: docs/deploy.md ("Security model") lists, call by
# call, what each token can and cannot do, and internal/deploytest checks that
# list against these files. Nomad cannot scope a rule to "this host": variable
# paths are fixed globs, a workload identity's implicit access covers only
# nomad/jobs/<job>[/<group>[/<task>]] of its own namespace, read and list only
# (acl/acl.go matchingVariablesCapabilitySet), and a policy attached to the job
# (`nomad acl policy apply -job`) gives every allocation the same rules,
# whatever its node. So this token can write every record under rollboot/hosts/
# and read every node; it cannot touch plans, control, history, the leader lock
# or the server reboot locks, drain or change the eligibility of any node, or
# read the Nomad servers' autopilot health.

# GET /v1/agent/self: the agent asks its local Nomad agent for its client node ID
# (stats.client.node_id) and whether it also runs a Nomad server
# (stats.nomad.server, member.Tags.id). Nomad checks agent:read there
# (command/agent/agent_endpoint.go AgentSelfRequest: AllowAgentRead), and no
# narrower right answers it. agent:read is not scoped to the local agent: it
# also reads /v1/agent/host?node_id=<any node> (that host's environment, network
# interfaces, /etc/hosts, resolv.conf and disks: nomad/client_agent_endpoint.go
# Agent.Host, AllowAgentDebug), /v1/agent/monitor?node_id=|server_id= (the live
# log of any agent) and /v1/agent/servers. It writes nothing (agent:write does).
agent {
  policy = "read"
}

# Read only. Right before rebooting, the agent checks its node as Nomad reports
# it (GET /v1/node/<id>: ineligible, its last drain complete and rollboot's) and
# that nothing but system jobs runs on it (GET /v1/node/<id>/allocations).
# Nomad has no per-node read (nomad/node_endpoint.go GetNode, GetAllocs:
# AllowNodeRead), so the token reads every node, with its attributes and meta.
node {
  policy = "read"
}

# GET /v1/node/<id>/allocations returns only the allocations of namespaces where
# the token has read-job (nomad/node_endpoint.go GetAllocs drops the others
# silently), and an allocation left on the node may be in any namespace: without
# it the check above would see nothing and pass. read-job also reads every job's
# specification and submission (its HCL and -var values) and every allocation,
# in every namespace. No job submission, no logs, no exec.
namespace "*" {
  capabilities = ["read-job"]
}

namespace "default" {
  # Repeated: the exact namespace rule replaces the "*" rule here.
  capabilities = ["read-job"]

  variables {
    # read:  GET /v1/var/rollboot/hosts/<host> (own record at start, after a
    #        CAS conflict, and the blocking watch that restores it when someone
    #        else changed it).
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
