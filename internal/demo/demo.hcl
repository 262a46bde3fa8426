# The policy `rollboot demo` runs with. Per-host settings (the Nomad address of the
# host's local agent, the host name, the boot ID and sentinel files) are set for each
# simulated host; everything else is what a real deployment would write.

state {
  prefix = "rollboot"
}

agent {
  reboot {
    delay = "0s"
  }
}

coordinator {
  lock_ttl        = "10s"
  resync_interval = "250ms"
  rejoin_timeout  = "20s"
  reboot_loop_backoff = "30s"
  reboot_loop_max_backoff = "5m"
  server_stable_for = "200ms"
}

drain {
  deadline      = "20s"
  on_timeout    = "abort"
  retry_backoff = "1s"
  retry_max_backoff = "10s"
}

group "web" {
  filter      = "NodePool == \"web\""
  concurrency = 2
}

group "batch" {
  filter      = "NodePool == \"batch\""
  concurrency = 2
}
