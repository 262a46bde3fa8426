# rollboot as a Nomad system job with the docker driver: for clusters where
# raw_exec may not be enabled. Same job name as rollboot.nomad.hcl (so the
# rollboot-agent policy attached to the job is the same): run one of the two,
# not both. `rollboot setup -driver docker -image ...` registers this one.
#
#   nomad job run -var 'image=<registry>/rollboot:v1.2.3' deploy/nomad/rollboot-docker.nomad.hcl
#
# The image is the project's Dockerfile, built from a release (docs/install.md):
# the release binary as its entrypoint, and nsenter (util-linux). Pin it by tag
# or digest: changing it is how rollboot is upgraded. The image runs as an
# unprivileged user by default; this task runs it as root (user = "root"),
# which the privileged reboot below needs.
#
# Why these choices (the rest, the agent's identity and the coordinator job among
# them, is as in rollboot.nomad.hcl: read its header):
#
# - Rebooting from a container: pid_mode = "host" makes PID 1 the host's systemd,
#   and `nsenter -t 1 -m -u -i -n -p -- systemctl reboot` runs the host's own
#   systemctl in the host's namespaces, an orderly reboot exactly as on the host.
#   nsenter needs CAP_SYS_ADMIN (setns) and CAP_SYS_PTRACE (to open /proc/1/ns/*),
#   and the container runtime's AppArmor/SELinux profile must not get in the way,
#   hence privileged = true, which needs `allow_privileged = true` in the client's
#   docker plugin configuration.
# - The signal method (agent.reboot.method = "signal": SIGRTMIN+5 to PID 1, which
#   systemd takes as "reboot") needs no nsenter and, in principle, only CAP_KILL,
#   which docker grants by default. It is not the default here because capabilities
#   are not the whole story: docker's default AppArmor profile only lets a
#   container signal processes in its own profile, so signalling the host's
#   (unconfined) systemd is refused on AppArmor hosts unless the container runs
#   with security_opt = ["apparmor=unconfined"], and SELinux hosts may need
#   ["label=disable"]. Hooks would also run inside the container, not on the host.
#   If you prefer it, replace privileged = true with
#       pid_mode     = "host"
#       cap_drop     = ["all"]
#       cap_add      = ["kill"]
#       security_opt = ["apparmor=unconfined"]
#   and in the configuration: reboot { method = "signal" }. The container must run
#   as root in the host's user namespace (no userns remapping).
# - Boot ID: the kernel's boot_id is not namespaced, so the container's
#   /proc/sys/kernel/random/boot_id is the host's; no mount is needed.
# - Sentinel: the host's /run is mounted read-only at /host/run and the agent
#   watches /host/run/reboot-required (/var/run is a link to /run). The directory
#   is mounted, not the file: the file usually does not exist, and a bind mount of
#   a missing file fails (or, with docker's -v semantics, creates a directory in
#   its place, which would look like a permanent reboot request). Bind mounts need
#   `volumes { enabled = true }` in the docker plugin configuration.
# - network_mode = "host": 127.0.0.1:4646 is the Nomad agent on this host, whose
#   /v1/agent/health tells the agent that the host runs a Nomad client (its node
#   is then the node of its name).
# - agent.host is set from the node name, because a container's hostname is not
#   necessarily the host's.
# - Pre/post hooks run inside the container; wrap host commands in the same
#   nsenter prefix, e.g. ["nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--",
#   "/usr/local/bin/notify", "rebooting"].

variable "image" {
  type        = string
  description = "rollboot image built from the Dockerfile (with nsenter), pinned by tag or digest, e.g. <registry>/rollboot:v1.2.3"
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
    healthy_deadline = "5m"
  }

  group "agent" {
    restart {
      attempts = 5
      interval = "10m"
      delay    = "15s"
      mode     = "delay"
    }

    task "rollboot" {
      driver = "docker"

      # The image's default user is unprivileged; nsenter into PID 1 needs root.
      user = "root"

      config {
        image        = var.image
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

      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      env {
        NOMAD_ADDR = "http://127.0.0.1:4646"
        # One Go processor from the start (see rollboot.nomad.hcl).
        GOMAXPROCS = "1"
      }

      # NOMAD_TOKEN: the task's workload identity, with the rights of the
      # policies attached to this job (rollboot-agent, as in rollboot.nomad.hcl).
      identity {
        env = true
      }

      # Host-local settings only: the agents are not coordinator candidates
      # (coordinator.enabled = false, the default, written out); the coordinator
      # is rollboot-coordinator.nomad.hcl, the rollout policy is stored in the
      # cluster.
      template {
        destination = "local/rollboot.hcl"
        change_mode = "restart"
        data        = <<-EOT
          nomad {
            namespace = "default"
          }

          state {
            prefix = "rollboot"
          }

          agent {
            host          = "{{ env "node.unique.name" }}"
            boot_id_file  = "/proc/sys/kernel/random/boot_id"
            sentinel_file = "/host/run/reboot-required"

            reboot {
              method  = "command"
              command = ["nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--", "systemctl", "reboot"]
            }
          }

          coordinator {
            enabled = false
          }
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
