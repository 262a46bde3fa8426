# rollboot as a Nomad system job: one `rollboot agent` on every Linux client, run
# with the raw_exec driver. The agents are not coordinator candidates
# (coordinator.enabled = false, the default): the coordinator runs as its own
# job, rollboot-coordinator.nomad.hcl, with its own token. See docs/deploy.md.
#
#   rollboot setup -version v1.2.3 -release-url https://releases.example.com/rollboot
#
# registers it with the rest (docs/install.md); by hand, after the policy:
#
#   nomad job run -var 'version=v1.2.3' \
#     -var 'release_url=https://releases.example.com/rollboot' \
#     deploy/nomad/rollboot.nomad.hcl
#
# Why these choices:
#
# - raw_exec: the agent must see the host as it is: the kernel's boot ID
#   (/proc/sys/kernel/random/boot_id), the sentinel file /var/run/reboot-required,
#   and it must run `systemctl reboot` as root. raw_exec runs the task as the Nomad
#   client's user (root) without isolation. The driver is off by default: enable it
#   on the clients (docs/deploy.md). Nodes without a healthy raw_exec driver get no
#   agent; `nomad job status rollboot` shows them as placement failures. If you
#   cannot enable raw_exec, use rollboot-docker.nomad.hcl.
# - type = "system" and node_pool = "all": one allocation on every client, in every
#   node pool (a system job otherwise only covers the pool "default").
# - The drain rollboot issues always ignores system jobs (IgnoreSystemJobs), so this
#   agent keeps running on its draining and drained node: it is the agent that
#   reboots the host once the drain is done.
# - When the host reboots, the agent dies with it. After a reboot shorter than the
#   node's heartbeat TTL the allocation is still there and the Nomad client starts
#   it again at boot; the agent reads the new boot ID, runs the post-reboot hooks and
#   reports it. After a longer one Nomad marks the node down and the allocation
#   lost, and places it again only once the coordinator (which saw the node miss
#   its heartbeats and come back) has made the node eligible again.
# - The token: the task's own workload identity, which identity { env = true }
#   puts in NOMAD_TOKEN (Nomad 1.7 or newer). Its rights are those of the
#   rollboot-agent policy (deploy/acl/) attached to this job: `rollboot setup`
#   attaches it, as `nomad acl policy apply -namespace default -job rollboot
#   rollboot-agent deploy/acl/rollboot-agent.policy.hcl` does. No secret is
#   stored or pasted, and the identity is worthless once its allocation stops.
#   It can publish host records and read plans: it cannot
#   drain, write plans, control or history, or take the election lock or a
#   server reboot lock. Never give these agents the coordinator's token, nor the
#   rollboot-agent-server one (the same token on every client would let any
#   client sit on the servers' reboot locks), nor Consul operator:write or Vault
#   step-down rights. A Nomad client that also runs a server gets its agent from
#   the systemd unit instead (deploy/systemd/; docs/deploy.md shows the
#   constraint that keeps this job off it).
# - Every agent a coordinator candidate (coordinator.enabled = true in the
#   configuration below, and the rollboot-agent-candidate policy) is possible for
#   small clusters, without the coordinator job; then root on ANY client can
#   drain, reboot or pause every host. docs/deploy.md weighs it.
# - NOMAD_ADDR is the Nomad agent on this host: the agent learns what it runs from
#   the local agent's /v1/agent/health, so it must not talk to a load balancer.
# - update: max_parallel = 1 rolls out a new rollboot version one host at a time.
#   A killed agent loses nothing (its state is in Nomad Variables), and a
#   coordinator that gets SIGTERM releases the lock, so a restart is cheap.
# - restart: mode = "delay" never gives up on a host; a system allocation is not
#   rescheduled elsewhere, so failing for good would leave the host unmanaged.

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
  description = "Datacenters whose clients run the agent"
  default     = ["*"]
}

job "rollboot" {
  type        = "system"
  datacenters = var.datacenters
  node_pool   = "all"

  # Above ordinary workloads: the system scheduler may preempt lower-priority
  # allocations to fit this small task on a full node.
  priority = 80

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  # Rolling update of rollboot itself, one host at a time. Nomad versions without
  # system-job deployments honour only max_parallel and stagger.
  update {
    max_parallel     = 1
    stagger          = "15s"
    health_check     = "task_states"
    min_healthy_time = "15s"
    healthy_deadline = "3m"
  }

  group "agent" {
    # Restart forever, with a pause between bursts of failures (e.g. the Nomad
    # servers unreachable): the agent is the only thing that reboots this host.
    restart {
      attempts = 5
      interval = "10m"
      delay    = "15s"
      mode     = "delay"
    }

    task "rollboot" {
      driver = "raw_exec"

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
        args    = ["agent", "--config", "${NOMAD_TASK_DIR}/rollboot.hcl", "--log-json"]
      }

      # SIGTERM: the agent stops, and a leading coordinator releases the election
      # lock (it waits up to lock_ttl/2 for Nomad), so give it time.
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      env {
        # The Nomad agent on this host (raw_exec shares the host's network). With
        # TLS: "https://127.0.0.1:4646" and the nomad { ca_cert ... } settings in
        # the configuration below (raw_exec sees the host's files).
        NOMAD_ADDR = "http://127.0.0.1:4646"
        # One Go processor from the start: an agent that is not a candidate
        # mostly waits, and each processor keeps memory of its own (docs/deploy.md).
        # Remove it if the agents are coordinator candidates.
        GOMAXPROCS = "1"
      }

      # NOMAD_TOKEN: the task's workload identity, with the rights of the
      # policies attached to this job (rollboot-agent; see the header).
      identity {
        env = true
      }

      # The rollboot configuration (docs/configuration.md): host-local settings
      # only. The rollout policy (groups, windows, drain, rollout rules) is in no
      # job: it is stored once in the cluster (`rollboot policy apply
      # deploy/policy.hcl`), and a policy block here stops the agent at start.
      # Changing this file is a job update, rolled out like an upgrade.
      template {
        destination = "local/rollboot.hcl"
        change_mode = "restart"
        data        = <<-EOT
          nomad {
            # rollboot's state namespace. Set it: otherwise NOMAD_NAMESPACE, which
            # Nomad sets to the job's namespace, would choose it. The ACL
            # policies grant this namespace.
            namespace = "default"
          }

          state {
            prefix = "rollboot"
          }

          agent {
            # The Nomad node name, so that `rollboot status` and
            # `rollboot request <host>` use the names `nomad node status` shows.
            host          = "{{ env "node.unique.name" }}"
            boot_id_file  = "/proc/sys/kernel/random/boot_id"
            sentinel_file = "/var/run/reboot-required"

            reboot {
              method  = "command"
              command = ["systemctl", "reboot"]
            }
          }

          # Not a coordinator candidate (the default, written out):
          # rollboot-coordinator.nomad.hcl is.
          coordinator {
            enabled = false
          }
        EOT
      }

      resources {
        cpu        = 100
        memory     = 128
        memory_max = 512 # hooks and the sentinel command run inside the task; used only with memory oversubscription enabled
      }
    }
  }
}
