# rollboot coordinator: two `rollboot coordinator` instances, one of which leads
# (the other waits on the election lock). Run it with the agents' system job
# (rollboot.nomad.hcl or rollboot-docker.nomad.hcl, whose agents are no
# candidates: coordinator.enabled = false, the default). This is the default
# deployment: see docs/deploy.md. `rollboot coordinator` stands for election
# whatever coordinator.enabled says.
#
#   rollboot setup -version v1.2.3 -release-url https://releases.example.com/rollboot
#
# registers it with the rest (docs/install.md); by hand, after the namespace
# and the policy:
#
#   nomad namespace apply -description "rollboot coordinator" rollboot
#   nomad job run -var 'version=v1.2.3' \
#     -var 'release_url=https://releases.example.com/rollboot' \
#     deploy/nomad/rollboot-coordinator.nomad.hcl
#
# Why these choices:
#
# - Roles split: the coordinator is the only holder of the rights that change
#   other hosts: draining and making nodes eligible (node:write), writing plans,
#   control and history, the election lock, and the Consul operator:write and
#   Vault step-down tokens used to hand leadership over. The agents' token can
#   only publish host records and read plans, so a compromised client host cannot
#   drain, reboot or pause another host.
# - Its token is the task's workload identity (identity { env = true }, Nomad
#   1.7 or newer), with the rights of the rollboot-coordinator policy attached to
#   this job (`rollboot setup` attaches it, as `nomad acl policy apply -namespace
#   rollboot -job rollboot-coordinator rollboot-coordinator ...` does): no secret
#   is stored or pasted, and an identity is worthless once its allocation stops.
# - Its own namespace ("rollboot"): what only this job may read (the Consul and
#   Vault tokens below, in nomad/jobs/rollboot-coordinator) stays apart from the
#   namespace of your ordinary jobs. rollboot's STATE stays in nomad.namespace
#   below ("default"), where the agents write.
# - Placement: whoever is root on the host running the coordinator can read its
#   identity from the task's environment while the allocation runs. Constrain the job to nodes you
#   trust as much as the token (a node pool of your own, or the constraint below
#   on a node metadata key), never to every client.
# - Two instances on distinct hosts, one at a time migrated: when rollboot drains
#   the node of the leading instance, Nomad migrates it and the other instance,
#   already waiting on the lock, takes over at once (a coordinator that gets
#   SIGTERM releases the lock). Give the job at least three eligible nodes so a
#   replacement can always be placed; with one node left nobody would make it
#   eligible again after its reboot.
# - exec driver: the coordinator needs no host access (no boot ID, no sentinel,
#   no reboot), only the network, so it runs isolated, not as root on the host.
# - NOMAD_ADDR: the local Nomad agent (the exec driver shares the host's
#   network). CONSUL_HTTP_ADDR and VAULT_ADDR, if you use the server quorum gates,
#   must reach the clusters' servers.
# - Consul and Vault tokens for leadership hand-over (Consul operator:write, Vault
#   sys/step-down with update and sudo) and the quorum gates (Consul
#   operator:read, Vault read on sys/storage/raft/autopilot/state): put them in
#   the Nomad Variable nomad/jobs/rollboot-coordinator of namespace rollboot
#   (items consul_token and vault_token), which this job's identity reads
#   without any policy, and add this template to the task:
#       template {
#         destination = "secrets/servers.env"
#         env         = true
#         perms       = "0400"
#         data        = <<-EOT
#           {{ with nomadVar "nomad/jobs/rollboot-coordinator" }}CONSUL_HTTP_TOKEN={{ .consul_token }}
#           VAULT_TOKEN={{ .vault_token }}{{ end }}
#         EOT
#       }
#   They belong here only, never in the agents' job.
# - FleetLock (docs/fleetlock.md): to serve it from here, add a fleetlock block
#   (with TLS) to the configuration below and a port to the group, e.g.
#       port "fleetlock" { static = 7777 }   (in the group's network block)
#   and let only the CoreOS machines reach it.
# - The Nomad leadership hand-over needs a management token (Nomad's
#   Operator.TransferLeadershipToPeer accepts nothing less). Do not give the
#   coordinator one: without it the transfer is refused and
#   the policy's coordinator.leader_transfer_denied = "continue" reboots the leader, and the
#   Nomad servers elect another (a few seconds without a leader).

variable "version" {
  type        = string
  description = "rollboot release to run, e.g. v1.2.3 (a tag of the release)"
}

# No default: nobody publishes rollboot's releases for you. Host the output of
# scripts/release yourself (any static HTTP server or object store the clients
# reach; docs/install.md) and name it here.
variable "release_url" {
  type        = string
  description = "Required. Base URL where you host scripts/release's output: <release_url>/<version>/rollboot_<version>_linux_<arch>.tar.gz and <release_url>/<version>/SHA256SUMS (docs/install.md)"
}

variable "datacenters" {
  type        = list(string)
  description = "Datacenters where the coordinator may run"
  default     = ["*"]
}

job "rollboot-coordinator" {
  type        = "service"
  namespace   = "rollboot"
  datacenters = var.datacenters

  # Above ordinary workloads, so a coordinator can always be placed.
  priority = 80

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  # Only on nodes trusted with the coordinator token: set this meta key on them
  # (client { meta { rollboot_coordinator = "true" } }), or use a node pool.
  constraint {
    attribute = "${meta.rollboot_coordinator}"
    value     = "true"
  }

  constraint {
    operator = "distinct_hosts"
    value    = "true"
  }

  group "coordinator" {
    count = 2

    # A drain of a coordinator's node migrates one instance at a time, so the
    # other is always there to take over.
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

    # The telemetry listener: /metrics and the status page, on a port Nomad
    # picks. Every instance serves both, standby or leader: the page is read
    # from the stored state (the same on every instance, saying which one
    # leads), and the state metrics come from the leader only, so a scrape of
    # every instance counts each host once (docs/metrics.md).
    network {
      port "http" {}
    }

    # Prometheus finds every instance with nomad_sd_configs
    # (deploy/prometheus/prometheus.yml). Nomad's own check asks for the page.
    service {
      name     = "rollboot-coordinator"
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

    task "rollboot" {
      driver = "exec"

      # The release archive for this client's architecture, checked against the
      # release's SHA256SUMS (go-getter picks the line of this file name).
      artifact {
        source      = "${var.release_url}/${var.version}/rollboot_${var.version}_linux_${attr.cpu.arch}.tar.gz"
        destination = "local/bin"
        options {
          checksum = "file:${var.release_url}/${var.version}/SHA256SUMS"
        }
      }

      config {
        command = "local/bin/rollboot"
        args    = ["coordinator", "--config", "${NOMAD_TASK_DIR}/rollboot.hcl", "--log-json"]
      }

      # SIGTERM: a leading coordinator releases the election lock.
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      env {
        NOMAD_ADDR = "http://127.0.0.1:4646"
      }

      # NOMAD_TOKEN: the task's workload identity, with the rights of the
      # policies attached to this job (rollboot-coordinator; see the header).
      identity {
        env = true
      }

      # The local configuration of the coordinator. The rollout policy (groups,
      # windows, drain, rollout rules) is not here: it is stored in the cluster,
      # one for every coordinator: `rollboot policy apply deploy/policy.hcl`.
      template {
        destination = "local/rollboot.hcl"
        change_mode = "restart"
        data        = <<-EOT
          nomad {
            # rollboot's STATE namespace (where the agents publish), not this
            # job's namespace: set it, or NOMAD_NAMESPACE ("rollboot") would
            # choose it.
            namespace = "default"
          }

          state {
            prefix = "rollboot"
          }

          # /metrics and the status page (docs/status-page.md) on the group's
          # port. Plain HTTP, and the page names hosts: let only Prometheus
          # and your operators reach the port.
          telemetry {
            listen = "{{ env "NOMAD_ADDR_http" }}"
          }
        EOT
      }

      resources {
        cpu    = 100
        memory = 128
      }
    }
  }
}
