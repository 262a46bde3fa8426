package doctor

import (
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// The drivers the agents' job can run with: raw_exec
// (deploy/nomad/rollboot.nomad.hcl), or docker with privileged containers
// (deploy/nomad/rollboot-docker.nomad.hcl).
const (
	driverRawExec = "raw_exec"
	driverDocker  = "docker"
	// dockerPrivileged is the attribute the docker driver fingerprints when
	// the client allows privileged containers (drivers/docker/fingerprint.go
	// buildFingerprint: allow_privileged).
	dockerPrivileged = "driver.docker.privileged.enabled"
)

const rawExecFix = `enable raw_exec on its Nomad client (plugin "raw_exec" { config { enabled = true } } in the client's configuration, then restart the client), or run deploy/nomad/rollboot-docker.nomad.hcl on clients whose docker plugin has allow_privileged = true`

// agentDriver is the driver the agents' job's task uses ("" when the job is
// not known or names none).
func agentDriver(job *api.Job) string {
	if job == nil {
		return ""
	}
	for _, tg := range job.TaskGroups {
		for _, t := range tg.Tasks {
			if t != nil && t.Driver != "" {
				return t.Driver
			}
		}
	}
	return ""
}

// driverUsable says whether node can run a task of driver, as the scheduler
// decides it (scheduler/feasible/feasible.go DriverChecker.hasDrivers: the
// driver detected and healthy), and for docker with privileged containers.
func driverUsable(n *api.NodeListStub, driver string) (bool, string) {
	d := n.Drivers[driver]
	switch {
	case d == nil:
		return false, driver + " not fingerprinted"
	case !d.Detected:
		return false, fmt.Sprintf("%s not detected (%s)", driver, orDash(d.HealthDescription))
	case !d.Healthy:
		return false, fmt.Sprintf("%s unhealthy (%s)", driver, orDash(d.HealthDescription))
	case driver == driverDocker && d.Attributes[dockerPrivileged] != "true":
		return false, "docker without allow_privileged"
	}
	return true, ""
}

// nodeCanRunAgent: the job's driver, or when the job is not known either of
// the two shipped ones.
func nodeCanRunAgent(n *api.NodeListStub, driver string) (bool, string) {
	if driver != "" {
		return driverUsable(n, driver)
	}
	ok, why := driverUsable(n, driverRawExec)
	if ok {
		return true, ""
	}
	if ok, _ := driverUsable(n, driverDocker); ok {
		return true, ""
	}
	return false, why
}

// candidates are the nodes the agents' job should run on: ready, eligible,
// and in its node pool and datacenters when the job is known.
func candidates(nodes []*api.NodeListStub, job *api.Job) []*api.NodeListStub {
	var out []*api.NodeListStub
	for _, n := range nodes {
		if n.Status != api.NodeStatusReady || n.SchedulingEligibility != api.NodeSchedulingEligible {
			continue
		}
		if job != nil && !jobCovers(job, n) {
			continue
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *api.NodeListStub) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// jobCovers: the node is in the job's node pool ("all": every pool) and one of
// its datacenters (glob patterns).
func jobCovers(job *api.Job, n *api.NodeListStub) bool {
	if p := job.NodePool; p != nil && *p != "" && *p != api.NodePoolAll && *p != n.NodePool {
		return false
	}
	if len(job.Datacenters) == 0 {
		return true
	}
	return slices.ContainsFunc(job.Datacenters, func(dc string) bool {
		ok, _ := path.Match(dc, n.Datacenter)
		return ok
	})
}

// checkDrivers: every ready, eligible client can run the agent; none that can
// blocks every rollout.
func checkDrivers(in Inputs) []Finding {
	if in.Nodes.Err != nil {
		f := Finding{Check: CheckDrivers, Severity: Error,
			What: fmt.Sprintf("cannot list the Nomad nodes: %v", in.Nodes.Err),
			Fix:  "check that the Nomad servers have a leader (`nomad server members`)"}
		if statusOf(in.Nodes.Err) == http.StatusForbidden {
			f.Fix = "give the token node:read (node { policy = \"read\" }, as deploy/acl/rollboot-operator.policy.hcl does)"
		}
		return []Finding{f}
	}
	driver := agentDriver(in.Agent.Job)
	cands := candidates(in.Nodes.Nodes, in.Agent.Job)
	var out []Finding
	for _, n := range cands {
		if ok, why := nodeCanRunAgent(n, driver); !ok {
			out = append(out, Finding{Check: CheckDrivers, Severity: Warning, Subject: n.Name,
				What: fmt.Sprintf("node %s cannot run the rollboot agent: %s", n.Name, why),
				Fix:  driverFix(driver)})
		}
	}
	want := "raw_exec or privileged docker"
	if driver != "" {
		want = driver
	}
	switch {
	case len(cands) == 0:
		out = append(out, Finding{Check: CheckDrivers, Severity: Warning, What: "no ready, eligible Nomad client to run the agents on"})
	case len(out) == len(cands):
		out = append(out, Finding{Check: CheckDrivers, Severity: Error,
			What: fmt.Sprintf("no Nomad client can run the rollboot agent (%s): no host can be rebooted", want),
			Fix:  driverFix(driver)})
	default:
		out = append(out, Finding{Check: CheckDrivers,
			What: fmt.Sprintf("%d of %d ready clients can run the rollboot agent (%s)", len(cands)-len(out), len(cands), want)})
	}
	return out
}

func driverFix(driver string) string {
	if driver == driverDocker {
		return `allow privileged containers on its client (plugin "docker" { config { allow_privileged = true } }, then restart the client), or enable raw_exec and run deploy/nomad/rollboot.nomad.hcl`
	}
	return rawExecFix
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// checkAgents: the agents' job runs an allocation on every node it should,
// each such agent has published its host record, and every Nomad server host
// has an agent (a record: they run it as a service).
func checkAgents(in Inputs) []Finding {
	o := in.Options
	if o.AgentJob == "" {
		return []Finding{{Check: CheckAgentJob, Severity: Info,
			What: "coordinator.agent_job is \"\": which nodes lack an agent is not checked"}}
	}
	job := o.AgentNamespace + "/" + o.AgentJob
	out, ok := checkAgentJob(in.Agent, job, o)
	if !ok || in.Nodes.Err != nil {
		return out
	}
	running := map[string]string{} // node ID → allocation ID
	for _, a := range in.Agent.Allocs {
		if a.ClientStatus == api.AllocClientStatusRunning && a.DesiredStatus == api.AllocDesiredStatusRun {
			running[a.NodeID] = a.ID
		}
	}
	records := map[string]bool{}
	for _, r := range in.Hosts.Records {
		records[r.Host] = true
	}
	driver := agentDriver(in.Agent.Job)
	cands := candidates(in.Nodes.Nodes, in.Agent.Job)
	missing := 0
	for _, n := range cands {
		alloc, runs := running[n.ID]
		switch {
		case !runs:
			missing++
			f := Finding{Check: CheckAgents, Severity: Warning, Subject: n.Name,
				What: fmt.Sprintf("node %s runs no rollboot agent (no running allocation of %s): its host is never rebooted", n.Name, job),
				Fix:  fmt.Sprintf("`nomad job status -namespace %s %s` shows why it was not placed", o.AgentNamespace, o.AgentJob)}
			if ok, _ := nodeCanRunAgent(n, driver); !ok {
				f.Fix = driverFix(driver)
			}
			out = append(out, f)
		case in.Hosts.Err == nil && !records[n.Name]:
			missing++
			out = append(out, Finding{Check: CheckAgents, Severity: Warning, Subject: n.Name,
				What: fmt.Sprintf("the agent on node %s runs but has published no host record", n.Name),
				Fix:  fmt.Sprintf("`nomad alloc logs -namespace %s -stderr %s` shows why (often its token: deploy/acl/rollboot-agent.policy.hcl)", o.AgentNamespace, alloc)})
		}
	}
	out = append(out, checkServerAgents(in, records)...)
	if in.Hosts.Err != nil {
		out = append(out, Finding{Check: CheckAgents, Severity: Warning,
			What: fmt.Sprintf("cannot read rollboot's host records: %v", in.Hosts.Err),
			Fix:  fmt.Sprintf("give the token read on %s/* in namespace %s (deploy/acl/rollboot-operator.policy.hcl)", o.Prefix, o.Namespace)})
	}
	if missing == 0 && len(cands) > 0 {
		out = append(out, Finding{Check: CheckAgents, What: fmt.Sprintf("the agent runs on all %d ready clients", len(cands))})
	}
	return out
}

// checkAgentJob: the agents' job is registered and running; ok false when
// there is nothing more to check.
func checkAgentJob(a AgentJobInput, job string, o Options) ([]Finding, bool) {
	runFix := fmt.Sprintf("register it: `nomad job run -namespace %s deploy/nomad/rollboot.nomad.hcl` (or the docker variant); if the agents run outside Nomad, set coordinator.agent_job = \"\"", o.AgentNamespace)
	switch {
	case a.JobErr != nil && statusOf(a.JobErr) == http.StatusNotFound, a.JobErr == nil && a.Job == nil:
		return []Finding{{Check: CheckAgentJob, Severity: Error, Subject: job,
			What: fmt.Sprintf("the agents' job %s is not registered: no client host is rebooted", job), Fix: runFix}}, false
	case a.JobErr != nil:
		return []Finding{{Check: CheckAgentJob, Severity: Warning, Subject: job,
			What: fmt.Sprintf("cannot read the agents' job %s: %v", job, a.JobErr),
			Fix:  fmt.Sprintf("give the token read-job in namespace %s (deploy/acl/rollboot-operator.policy.hcl)", o.AgentNamespace)}}, false
	case a.Job.Stop != nil && *a.Job.Stop:
		return []Finding{{Check: CheckAgentJob, Severity: Error, Subject: job,
			What: fmt.Sprintf("the agents' job %s is stopped: no client host is rebooted", job), Fix: runFix}}, false
	case a.Job.Type != nil && *a.Job.Type != api.JobTypeSystem:
		return []Finding{{Check: CheckAgentJob, Severity: Warning, Subject: job,
			What: fmt.Sprintf("the agents' job %s is a %s job, not a system job: it does not run one agent per client", job, *a.Job.Type),
			Fix:  "run deploy/nomad/rollboot.nomad.hcl (type = \"system\")"}}, true
	case a.AllocsErr != nil:
		return []Finding{{Check: CheckAgentJob, Severity: Warning, Subject: job,
			What: fmt.Sprintf("cannot list the allocations of %s: %v", job, a.AllocsErr),
			Fix:  fmt.Sprintf("give the token read-job in namespace %s", o.AgentNamespace)}}, false
	}
	return []Finding{{Check: CheckAgentJob, Subject: job, What: fmt.Sprintf("the agents' job %s is registered", job)}}, true
}

// checkServerAgents: each Nomad server's host has published a host record (its
// agent runs as a service there).
func checkServerAgents(in Inputs, records map[string]bool) []Finding {
	if in.ServersErr != nil || in.Hosts.Err != nil {
		return nil
	}
	var out []Finding
	for _, m := range in.Servers {
		host, _, _ := strings.Cut(m.Name, ".") // "<name>.<region>" (nomad/server.go setupSerf)
		if records[host] || records[m.Name] {
			continue
		}
		out = append(out, Finding{Check: CheckAgents, Severity: Warning, Subject: host,
			What: fmt.Sprintf("the Nomad server %s has no rollboot agent (no host record): its host is never rebooted", host),
			Fix:  "install the agent as a service on it: deploy/systemd/rollboot-agent.service with deploy/systemd/config.hcl and a rollboot-agent-server token (docs/deploy.md)"})
	}
	return out
}
