[[- /*
  The rollboot coordinator's service job: deploy/nomad/rollboot-coordinator.nomad.hcl,
  whose comments explain every choice, with the operator's driver, token source
  and telemetry. It serves /metrics and the status page on a Nomad service
  (provider "nomad") by default; it serves no FleetLock (packs/rollboot/README.md
  says how to add it). coordinator_enabled = false renders nothing.
*/ -]]
[[- if var "coordinator_enabled" . -]]
[[- $driver := var "driver" . -]]
[[- $token := var "token_source" . -]]
[[- $job := var "coordinator_job_name" . -]]
[[- if and (ne $driver "raw_exec") (ne $driver "docker") ]][[ fail (printf "driver %q: want \"raw_exec\" or \"docker\"" $driver) ]][[ end -]]
[[- if and (eq $driver "raw_exec") (eq (var "version" .) "") ]][[ fail "driver raw_exec needs version, e.g. v1.2.3" ]][[ end -]]
[[- if and (eq $driver "raw_exec") (eq (var "release_url" .) "") ]][[ fail "driver raw_exec needs release_url, the base URL where you host scripts/release's output (docs/install.md)" ]][[ end -]]
[[- if and (eq $driver "docker") (eq (var "image" .) "") ]][[ fail "driver docker needs image, pinned by tag or digest" ]][[ end -]]
[[- if and (ne $token "variable") (ne $token "vault") (ne $token "workload_identity") ]][[ fail (printf "token_source %q: want \"variable\", \"vault\" or \"workload_identity\"" $token) ]][[ end -]]
[[- if eq (var "coordinator_namespace" .) (var "state_namespace" .) ]][[ fail (printf "coordinator_namespace %q is the state namespace: give the coordinator its own, so its token variable is apart from the agents'" (var "coordinator_namespace" .)) ]][[ end -]]
job [[ $job | toJson ]] {
  type        = "service"
  namespace   = [[ var "coordinator_namespace" . | toJson ]]
  datacenters = [[ var "datacenters" . | toJson ]]

  priority = 80

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  constraint {
    attribute = "${meta.rollboot_coordinator}"
    value     = "true"
  }

  constraint {
    operator = "distinct_hosts"
    value    = "true"
  }

  group "coordinator" {
    count = [[ var "coordinator_count" . ]]

    migrate {
      max_parallel     = 1
      health_check     = "task_states"
      min_healthy_time = "10s"
      healthy_deadline = "5m"
    }

    update {
      max_parallel     = 1
      health_check     = "task_states"
      min_healthy_time = "10s"
      healthy_deadline = "3m"
    }

    restart {
      attempts = 5
      interval = "10m"
      delay    = "15s"
      mode     = "delay"
    }
[[- if var "coordinator_telemetry" . ]]

    network {
      port "http" {}
    }

    service {
      name     = [[ $job | toJson ]]
      provider = "nomad"
      port     = "http"
      tags     = ["metrics", "status-page"]

      check {
        type     = "http"
        path     = "/"
        interval = "30s"
        timeout  = "5s"
      }
    }
[[- end ]]

    task "rollboot" {
[[- if eq $driver "docker" ]]
      driver = "docker"

      # The coordinator needs no host access: unprivileged, the image's
      # default user, the host's network for the local Nomad agent.
      config {
        image        = [[ var "image" . | toJson ]]
        args         = ["coordinator", "--config", "/local/rollboot.hcl", "--log-json"]
        network_mode = "host"
      }
[[- else ]]
      driver = "exec"

      artifact {
        source      = [[ printf "%s/%s/rollboot_%s_linux_${attr.cpu.arch}.tar.gz" (var "release_url" .) (var "version" .) (var "version" .) | toJson ]]
        destination = "local/bin"
        options {
          checksum = [[ printf "file:%s/%s/SHA256SUMS" (var "release_url" .) (var "version" .) | toJson ]]
        }
      }

      config {
        command = "local/bin/rollboot"
        args    = ["coordinator", "--config", "${NOMAD_TASK_DIR}/rollboot.hcl", "--log-json"]
      }
[[- end ]]

      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      env {
        NOMAD_ADDR = "http://127.0.0.1:4646"
      }
[[- if eq $token "workload_identity" ]]

      # NOMAD_TOKEN is the task's workload identity; attach the coordinator
      # policy to the job: nomad acl policy apply -namespace <coordinator_namespace> -job <coordinator_job_name> ...
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
          {{ with secret [[ var "coordinator_vault_secret_path" . | toJson ]] }}NOMAD_TOKEN={{ .Data.secret_id }}{{ end }}
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
          {{ with nomadVar [[ printf "nomad/jobs/%s" $job | toJson ]] }}NOMAD_TOKEN={{ .token }}{{ end }}
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
[[- if var "coordinator_telemetry" . ]]

          telemetry {
            listen = "{{ env "NOMAD_ADDR_http" }}"
          }
[[- end ]]
        EOT
      }

      resources {
        cpu    = 100
        memory = 128
      }
    }
  }
}
[[- end ]]
