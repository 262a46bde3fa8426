# The rollout policy, stored in the cluster: every coordinator decides with it.
# Check it, see what it changes, and store it (docs/configuration.md):
#
#   rollboot policy validate deploy/policy.hcl
#   rollboot policy apply deploy/policy.hcl
#
# With no stored policy the coordinator enforces the safe default: one group
# "default", one host at a time, no maintenance window. This file writes that
# default out, with the settings most often changed.

coordinator {
  rejoin_timeout         = "30m"
  leader_transfer_denied = "continue"
}

drain {
  deadline   = "1h"
  on_timeout = "abort"
}

# Drain a node only when the other nodes of its allocations' pools have room for
# them; keep a share of each node free with headroom.
capacity {
  enabled  = true
  headroom = "0%"
}

# Every node, one host at a time, waiting two minutes after a host came back
# before the next one starts.
group "all" {
  concurrency = 1
  settle      = "2m"
}

# Add windows, and groups with filters before "all" (the first match wins):
#
# group "batch" {
#   filter          = "NodePool == \"batch\""
#   concurrency     = 3
#   max_unavailable = "25%"
#   windows         = ["weeknights"]
# }
#
# window "weeknights" {
#   days      = ["mon", "tue", "wed", "thu", "fri"]
#   start     = "22:00"
#   end       = "05:00"
#   time_zone = "Europe/Berlin"
# }
#
# Halt the rollout after failed cycles, until `rollboot resume` (a group may
# have a failure_budget block of its own), and cap all groups together:
#
# failure_budget {
#   max_failures = 2
#   window       = "24h"
# }
#
# rollout {
#   max_out             = 4
#   max_drains_per_hour = 10
# }
