[[- /*
  The rollboot agents' system job: deploy/nomad/rollboot.nomad.hcl (raw_exec) or
  deploy/nomad/rollboot-docker.nomad.hcl (docker), whose comments explain every
  choice, with the operator's token source and telemetry. FleetLock is not
  served here: it writes requests and records for other hosts, which the
  agents' token may not (packs/rollboot/README.md says how to serve it from the
  coordinator job).
*/ -]]
[[- $driver := var "driver" . -]]
[[- $token := var "token_source" . -]]
[[- if and (ne $driver "raw_exec") (ne $driver "docker") ]][[ fail (printf "driver %q: want \"raw_exec\" or \"docker\"" $driver) ]][[ end -]]
[[- if and (eq $driver "raw_exec") (eq (var "version" .) "") ]][[ fail "driver raw_exec needs version, e.g. v1.2.3" ]][[ end -]]
[[- if and (eq $driver "raw_exec") (eq (var "release_url" .) "") ]][[ fail "driver raw_exec needs release_url, the base URL where you host scripts/release's output (docs/install.md)" ]][[ end -]]
[[- if and (eq $driver "docker") (eq (var "image" .) "") ]][[ fail "driver docker needs image, pinned by tag or digest" ]][[ end -]]
[[- if and (ne $token "variable") (ne $token "vault") (ne $token "workload_identity") ]][[ fail (printf "token_source %q: want \"variable\", \"vault\" or \"workload_identity\"" $token) ]][[ end -]]
job [[ var "job_name" . | toJson ]] {
  type        = "system"
  datacenters = [[ var "datacenters" . | toJson ]]
  node_pool   = "all"
  priority    = 80

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  update {
    max_parallel     = 1
    stagger          = "15s"
    health_check     = "task_states"
    min_healthy_time = "15s"
    healthy_deadline = [[ if eq $driver "docker" ]]"5m"[[ else ]]"3m"[[ end ]]
  }

  group "agent" {
    restart {
      attempts = 5
      interval = "10m"
      delay    = "15s"
      mode     = "delay"
    }
[[- if var "telemetry_enabled" . ]]

    network {
      port "metrics" {
        static = [[ var "telemetry_port" . ]]
      }
    }

    # Prometheus: nomad_sd_configs finds the agents by this service.
    service {
      name     = [[ printf "%s-metrics" (var "job_name" .) | toJson ]]
      provider = "nomad"
      port     = "metrics"
      tags     = ["metrics", "http"]
    }
[[- end ]]

    task "rollboot" {
      driver = [[ $driver | toJson ]]
[[- if eq $driver "docker" ]]

      # The image's default user is unprivileged; nsenter into PID 1 needs root.
      user = "root"

      config {
        image        = [[ var "image" . | toJson ]]
        args         = ["agent", "--config", "/local/rollboot.hcl", "--log-json"]
        network_mode = "host"
        pid_mode     = "host"
        privileged   = true

        mount {
          type     = "bind"
          source   = "/run"
          target   = "/host/run"
          readonly = true
        }
      }
[[- else ]]

      artifact {
        source      = [[ printf "%s/%s/rollboot_%s_linux_${attr.cpu.arch}.tar.gz" (var "release_url" .) (var "version" .) (var "version" .) | toJson ]]
        destination = "local/bin"
        options {
          checksum = [[ printf "file:%s/%s/SHA256SUMS" (var "release_url" .) (var "version" .) | toJson ]]
        }
      }

      config {
        command = "local/bin/rollboot"
        args    = ["agent", "--config", "${NOMAD_TASK_DIR}/rollboot.hcl", "--log-json"]
      }
[[- end ]]

      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      env {
        NOMAD_ADDR = "http://127.0.0.1:4646"
        # One Go processor from the start (deploy/nomad/rollboot.nomad.hcl).
        GOMAXPROCS = "1"
      }
[[- if eq $token "workload_identity" ]]

      # NOMAD_TOKEN is the task's workload identity; attach the agent policy
      # to the job: nomad acl policy apply -job <job_name> ...
      identity {
        env = true
      }
[[- else if eq $token "vault" ]]

      vault {
[[- if var "vault_role" . ]]
        role        = [[ var "vault_role" . | toJson ]]
[[- end ]]
        change_mode = "restart"
      }

      template {
        destination = "secrets/rollboot.env"
        env         = true
        perms       = "0400"
        change_mode = "restart"
        splay       = "1m"
        data        = <<-EOT
          {{ with secret [[ var "vault_secret_path" . | toJson ]] }}NOMAD_TOKEN={{ .Data.secret_id }}{{ end }}
        EOT
      }
[[- else ]]

      template {
        destination = "secrets/rollboot.env"
        env         = true
        perms       = "0400"
        change_mode = "restart"
        splay       = "1m"
        data        = <<-EOT
          {{ with nomadVar [[ printf "nomad/jobs/%s" (var "job_name" .) | toJson ]] }}NOMAD_TOKEN={{ .token }}{{ end }}
        EOT
      }
[[- end ]]

      template {
        destination = "local/rollboot.hcl"
        change_mode = "restart"
        data        = <<-EOT
          nomad {
            namespace = [[ var "state_namespace" . | toJson ]]
          }

          state {
            prefix = [[ var "state_prefix" . | toJson ]]
          }

          agent {
            host          = "{{ env "node.unique.name" }}"
            boot_id_file  = "/proc/sys/kernel/random/boot_id"
[[- if eq $driver "docker" ]]
            sentinel_file = "/host/run/reboot-required"

            reboot {
              method  = "command"
              command = ["nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--", "systemctl", "reboot"]
            }
[[- else ]]
            sentinel_file = "/var/run/reboot-required"

            reboot {
              method  = "command"
              command = ["systemctl", "reboot"]
            }
[[- end ]]
          }

          coordinator {
            enabled = false
          }
[[- if var "telemetry_enabled" . ]]

          telemetry {
            listen = "{{ env "NOMAD_ADDR_metrics" }}"
          }
[[- end ]]
        EOT
      }

      resources {
        cpu        = 100
        memory     = 128
        memory_max = 512
      }
    }
  }
}
