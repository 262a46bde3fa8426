# The local configuration of every agent of `rollboot demo`. Per-host settings (the
# Nomad address of the host's local agent, the host name, the boot ID and sentinel
# files) are set for each simulated host. The rollout rules are in policy.hcl,
# stored in the cluster as `rollboot policy apply` stores it.

state {
  prefix = "rollboot"
}

agent {
  reboot {
    delay = "0s"
  }
}

# Every agent is a coordinator candidate (docs/deploy.md, "Every agent a
# candidate"): the demo runs no coordinator job. Agents are not by default.
coordinator {
  enabled         = true
  lock_ttl        = "10s"
  resync_interval = "250ms"
}
