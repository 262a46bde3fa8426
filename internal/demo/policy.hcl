# The rollout policy `rollboot demo` applies before it starts, as
# `rollboot policy apply` does.

coordinator {
  rejoin_timeout          = "20s"
  reboot_loop_backoff     = "30s"
  reboot_loop_max_backoff = "5m"
  server_stable_for       = "200ms"
}

drain {
  deadline          = "20s"
  on_timeout        = "abort"
  retry_backoff     = "1s"
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
