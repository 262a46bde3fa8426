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
# or the server reboot locks, drain or change the eligibility of any node, read
# any job, allocation or agent's host data or log, or read the Nomad servers'
# autopilot health.

# No agent rule. The agent learns who its host is without agent:read, which
# Nomad cannot scope to the local agent (with it a token reads the host data of
# any node, /v1/agent/host?node_id=, and streams any agent's log,
# /v1/agent/monitor): whether the local agent runs a client or a server from
# GET /v1/agent/health, which Nomad answers without an ACL check
# (command/agent/agent_endpoint.go HealthRequest), and its node from the node
# list below.

# Read only:
# - GET /v1/nodes?filter=Name == "<host>" (stale), at start: the host's node is
#   the node of its name (of several, the one not down, then the newest), never
#   a node ID the host reports.
# - GET /v1/node/<id>, right before rebooting: its node as Nomad reports it
#   (ineligible, its last drain complete and rollboot's for this grant, and,
#   from the node's events, ineligible ever since that drain completed).
# Nomad has no per-node read (nomad/node_endpoint.go List, GetNode:
# AllowNodeRead), so the token reads every node, with its attributes, meta and
# events. It reads no job and no allocation: no namespace capability at all.
node {
  policy = "read"
}

namespace "default" {
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
