# /etc/rollboot/config.hcl for a host where rollboot runs as a systemd service
# (deploy/systemd/rollboot-agent.service): a host that runs a Nomad, Consul or
# Vault server, usually without a Nomad client (one with a client too: set
# agent.host to its node's name, docs/deploy.md). Reference: docs/configuration.md.
#
# NOMAD_TOKEN comes from /etc/rollboot/env, never from this file: a token with
# the rollboot-agent-server policy (deploy/acl/), which adds to the agents'
# rights the Nomad autopilot health and the server reboot locks.

nomad {
  # The Nomad agent (here a server) on this host: the agent learns from its
  # /v1/agent/health that the host runs a Nomad server, and its Raft ID from its
  # /v1/agent/members. With TLS use https:// and set ca_cert (and client_cert,
  # client_key when mutual TLS is on).
  address   = "http://127.0.0.1:4646"
  namespace = "default"
}

state {
  prefix = "rollboot"
}

agent {
  # Empty: the OS host name.
  host          = ""
  boot_id_file  = "/proc/sys/kernel/random/boot_id"
  sentinel_file = "/var/run/reboot-required"

  reboot {
    method  = "command"
    command = ["systemctl", "reboot"]
  }
}

# Not a coordinator candidate (the default, written out): the coordinator job
# (rollboot-coordinator.nomad.hcl) is, so this host's token needs only the
# rollboot-agent-server policy (no node:write on the servers), and the rollout
# policy (drain, groups, windows) is stored once in the cluster. The Consul and
# Vault tokens of this agent need no operator or step-down rights either:
# hand-over is the coordinator's.
coordinator {
  enabled = false
}
