variable "job_name" {
  description = "Name of the system job. The Variable token source reads nomad/jobs/<job_name>."
  type        = string
  default     = "rollboot"
}

variable "datacenters" {
  description = "Datacenters whose clients run the agent."
  type        = list(string)
  default     = ["*"]
}

variable "driver" {
  description = "Task driver: \"raw_exec\" (the release archive, run as root on the host) or \"docker\" (the image, privileged)."
  type        = string
  default     = "raw_exec"
}

variable "version" {
  description = "raw_exec: the rollboot release to run, e.g. v1.2.3."
  type        = string
  default     = ""
}

variable "release_url" {
  description = "raw_exec, required: base URL where you host scripts/release's output; <release_url>/<version>/ holds rollboot_<version>_linux_<arch>.tar.gz and SHA256SUMS (docs/install.md). Nobody publishes them for you."
  type        = string
  default     = ""
}

variable "image" {
  description = "docker: the rollboot image built from the Dockerfile, pinned by tag or digest, e.g. registry.example.com/rollboot:v1.2.3."
  type        = string
  default     = ""
}

variable "token_source" {
  description = "Where the agent's Nomad token comes from: \"workload_identity\" (the task's identity, with the agent policy attached to the job, as rollboot setup attaches it; the shipped jobs' way), \"variable\" (the Nomad Variable nomad/jobs/<job_name>, item token) or \"vault\" (Vault's Nomad secrets engine)."
  type        = string
  default     = "workload_identity"
}

variable "vault_role" {
  description = "token_source = \"vault\": the Vault role of the task's vault block (\"\": the cluster's default)."
  type        = string
  default     = ""
}

variable "vault_secret_path" {
  description = "token_source = \"vault\": the Nomad secrets engine path that issues rollboot-agent tokens."
  type        = string
  default     = "nomad/creds/rollboot-agent"
}

variable "state_namespace" {
  description = "Nomad namespace of rollboot's state (nomad.namespace); the ACL policies in deploy/acl grant \"default\"."
  type        = string
  default     = "default"
}

variable "state_prefix" {
  description = "Prefix of rollboot's Nomad Variables (state.prefix)."
  type        = string
  default     = "rollboot"
}

variable "telemetry_enabled" {
  description = "Serve the agents' Prometheus /metrics on a static port of the host (telemetry.listen) and register it as the Nomad service <job_name>-metrics, for Prometheus's Nomad service discovery."
  type        = bool
  default     = false
}

variable "telemetry_port" {
  description = "Static host port of the agents' metrics listener, with telemetry_enabled. Let only Prometheus reach it: the metrics name hosts."
  type        = number
  default     = 9464
}

variable "coordinator_enabled" {
  description = "Render the coordinator's service job too (deploy/nomad/rollboot-coordinator.nomad.hcl): the one process that decides the rollout."
  type        = bool
  default     = true
}

variable "coordinator_job_name" {
  description = "Name of the coordinator's job, and of its Nomad service; the Variable token source reads nomad/jobs/<coordinator_job_name> in coordinator_namespace."
  type        = string
  default     = "rollboot-coordinator"
}

variable "coordinator_namespace" {
  description = "Nomad namespace of the coordinator's job: its own, apart from state_namespace, so that its token variable is apart from the agents'."
  type        = string
  default     = "rollboot"
}

variable "coordinator_count" {
  description = "Coordinator instances, on distinct hosts (meta.rollboot_coordinator = \"true\"): one leads, the others take over at once."
  type        = number
  default     = 2
}

variable "coordinator_telemetry" {
  description = "Serve the coordinator's /metrics and status page on a dynamic port of its group, registered as the Nomad service <coordinator_job_name> (provider nomad) for Prometheus's nomad_sd_configs."
  type        = bool
  default     = true
}

variable "coordinator_vault_secret_path" {
  description = "token_source = \"vault\": the Nomad secrets engine path that issues rollboot-coordinator tokens."
  type        = string
  default     = "nomad/creds/rollboot-coordinator"
}
