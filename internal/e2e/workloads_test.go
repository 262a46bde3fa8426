package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// Tests of the workload blockers (policy block workloads): each holds a
// pending host with its reason in `rollboot status` and `rollboot plan`, and
// releases it when its condition clears. The coordinator runs with the
// production resync: while a host is held a pass runs every 5 s, so the release
// comes well within half the resync (cluster.within).

// waitingFor reports whether status shows host waiting with a reason that
// contains want.
func (c *cluster) waitingFor(host, want string) bool {
	for _, h := range c.status().Hosts {
		if h.Host == host {
			return strings.Contains(h.Waiting, want)
		}
	}
	return false
}

// planWait is the wait kind and reason `rollboot plan` gives host.
func (c *cluster) planWait(host string) (kind, reason string) {
	c.t.Helper()
	cfg := c.writeConfig("plan", c.configFor("", c.sim.Address()))
	var r planReportJSON
	if err := json.Unmarshal([]byte(c.cli("plan", "--config", cfg, "--json")), &r); err != nil {
		c.t.Fatal(err)
	}
	for _, g := range r.Plan.Groups {
		for _, h := range g.Hosts {
			if h.Host == host {
				return h.WaitKind, h.Reason
			}
		}
	}
	return "", ""
}

func (c *cluster) nodeOf(host string) string {
	c.t.Helper()
	n, err := c.sim.Node(host)
	if err != nil {
		c.t.Fatal(err)
	}
	return n.ID
}

// eventAfter returns the first emulator event from seq on that match.
func (c *cluster) eventAfter(seq int, match func(nomadsim.Event) bool) (nomadsim.Event, bool) {
	for _, e := range c.sim.Events(seq) {
		if match(e) {
			return e, true
		}
	}
	return nomadsim.Event{}, false
}

// isDeployment matches the end of a deployment of job with status.
func isDeployment(job, status string) func(nomadsim.Event) bool {
	return func(e nomadsim.Event) bool {
		return e.Type == nomadsim.EventDeployment && e.Details["job"] == job && e.Details["status"] == status
	}
}

// deploymentEnded reports whether a deployment of job ended with status
// since event seq.
func (c *cluster) deploymentEnded(seq int, job, status string) func() bool {
	return func() bool {
		_, ok := c.eventAfter(seq, isDeployment(job, status))
		return ok
	}
}

// A batch job whose meta marks it as blocking holds the node it runs on, and
// only that node: the other pending host goes. Once the job finishes, the node
// is drained.
func TestBlockingJobHoldsItsNode(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1, resync: productionResync,
		policy: "group \"all\" {\n  concurrency = 2\n}\nworkloads {\n  job_filter = \"Meta.rollboot_block == \\\"true\\\"\"\n}\n"})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(hosts) })
	seq := len(c.sim.Events(0))
	if err := c.sim.AddJob(nomadsim.JobSpec{ID: "backup", Type: api.JobTypeBatch, RunTime: 20 * time.Second,
		Meta: map[string]string{"rollboot_block": "true"}}); err != nil {
		t.Fatal(err)
	}
	started, _ := c.eventAfter(seq, func(e nomadsim.Event) bool { return e.Type == nomadsim.EventAllocPlace })
	blocked, free := started.Host, hosts[0]
	if free == blocked {
		free = hosts[1]
	}
	c.needReboot(hosts...)
	c.waitFor("the blocked host held, with its reason", 30*time.Second, func() bool {
		return c.waitingFor(blocked, "runs allocations of job backup (workloads.job_filter)")
	})
	if kind, reason := c.planWait(blocked); kind != "blocking_job" || !strings.Contains(reason, "job backup") {
		t.Errorf("rollboot plan: %s waits for %q (%s), want the blocking job", blocked, reason, kind)
	}
	c.waitFor("the other host rebooted", 60*time.Second, c.rebootedAll([]string{free}))
	if p := c.plans()[blocked]; p.Phase != store.PhasePending {
		t.Fatalf("%s is %s while its blocking job runs", blocked, p.Phase)
	}
	c.waitFor("the batch job to finish", 60*time.Second, func() bool {
		_, ok := c.eventAfter(seq, func(e nomadsim.Event) bool { return e.Type == nomadsim.EventAllocStop && e.Details["job"] == "backup" })
		return ok
	})
	done, _ := c.eventAfter(seq, func(e nomadsim.Event) bool { return e.Type == nomadsim.EventAllocStop && e.Details["job"] == "backup" })
	c.within("the blocked host drained after the job finished", done.Time, func() bool { return c.plans()[blocked].Phase != store.PhasePending })
	c.waitFor("every host rebooted", 60*time.Second, c.rebootedAll(hosts))
}

// A deployment that fails holds its pool (the other pool goes) until a new
// version of the job deploys successfully.
func TestDeploymentHoldsItsPool(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, pools: []string{"web", "batch"}, coordinators: 1, resync: productionResync,
		policy: "group \"web\" {\n  filter = \"NodePool == \\\"web\\\"\"\n}\ngroup \"batch\" {\n  filter = \"NodePool == \\\"batch\\\"\"\n}\n"})
	c.start()
	pools := c.groupsByPool()
	var web, batch []string
	for _, h := range c.clients() {
		if pools[h] == "web" {
			web = append(web, h)
		} else {
			batch = append(batch, h)
		}
	}
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(c.clients()) })
	seq := len(c.sim.Events(0))
	if err := c.sim.AddJob(nomadsim.JobSpec{ID: "api", NodePool: "web", Update: true,
		Groups: []nomadsim.GroupSpec{{Name: "api", Count: 2, FailHealthChecks: true, MigrateHealthyDeadline: time.Second}}}); err != nil {
		t.Fatal(err)
	}
	// The hosts ask once the deployment has failed. A request made as the
	// job is registered races the deployment itself: Nomad creates it only
	// when a scheduler worker has processed the registration's evaluation
	// (scheduler/reconciler/reconcile_cluster.go), and the leading
	// coordinator sees it one answer of its deployments watch later
	// (workloadread/deployments.go); a grant in between is one no reader of
	// Nomad could have held.
	c.waitFor("the deployment to fail", 30*time.Second, c.deploymentEnded(seq, "api", api.DeploymentStatusFailed))
	c.needReboot(web[0], batch[0])
	c.waitFor("the web host held by the failed deployment", 30*time.Second, func() bool {
		return c.waitingFor(web[0], "pool web: deployment") && c.waitingFor(web[0], "of job api is failed")
	})
	if kind, reason := c.planWait(web[0]); kind != "deployment" || !strings.Contains(reason, "job api is failed") {
		t.Errorf("rollboot plan: %s waits for %q (%s), want the deployment", web[0], reason, kind)
	}
	c.waitFor("the batch host rebooted", 60*time.Second, c.rebootedAll(batch[:1]))
	if p := c.plans()[web[0]]; p.Phase != store.PhasePending {
		t.Fatalf("%s is %s during a failed deployment", web[0], p.Phase)
	}
	// The job is fixed: a new version deploys, and once it succeeds the web host goes.
	seq = len(c.sim.Events(0))
	if err := c.sim.UpdateJob(nomadsim.JobSpec{ID: "api", Update: true}); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the new deployment to succeed", 60*time.Second, c.deploymentEnded(seq, "api", api.DeploymentStatusSuccessful))
	ok, _ := c.eventAfter(seq, isDeployment("api", api.DeploymentStatusSuccessful))
	c.within("the web host drained after the deployment succeeded", ok.Time, func() bool { return c.plans()[web[0]].Phase != store.PhasePending })
	c.waitFor("both hosts rebooted", 60*time.Second, c.rebootedAll([]string{web[0], batch[0]}))
}

// Blocked evaluations of a pool's job hold the pool until the scheduler can
// place the job: here the pool's only node is cordoned (ineligible) when a job
// of the pool is registered, and a node added to the pool clears them.
func TestBlockedEvalsHoldTheirPool(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, pools: []string{"web", "gpu"}, coordinators: 1, resync: productionResync,
		policy: "group \"all\" {\n  concurrency = 2\n}\n"})
	c.start()
	pools := c.groupsByPool()
	var gpu string
	for _, h := range c.clients() {
		if pools[h] == "gpu" {
			gpu = h
		}
	}
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(c.clients()) })
	if _, err := c.client.Nodes().ToggleEligibility(c.nodeOf(gpu), false, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.sim.AddJob(nomadsim.JobSpec{ID: "train", NodePool: "gpu"}); err != nil {
		t.Fatal(err)
	}
	c.needReboot(gpu)
	c.waitFor("the gpu host held by the blocked evaluation", 30*time.Second, func() bool {
		return c.waitingFor(gpu, "pool gpu: 1 evaluation is blocked (job train)")
	})
	if kind, _ := c.planWait(gpu); kind != "blocked_evals" {
		t.Errorf("rollboot plan: %s waits for %s, want blocked_evals", gpu, kind)
	}
	start := time.Now()
	if _, err := c.sim.AddHost("gpu-extra", false, true, "gpu"); err != nil {
		t.Fatal(err)
	}
	c.within("the gpu host drained after the evaluation cleared", start, func() bool { return c.plans()[gpu].Phase != store.PhasePending })
	c.waitFor("the gpu host rebooted", 60*time.Second, c.rebootedAll([]string{gpu}))
}

// A workload blocker that cannot read Nomad holds (fail closed), with the error
// as the reason, and lets the host go once the read works again.
func TestWorkloadReadFailureHolds(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 1, coordinators: 1, resync: productionResync, acl: true})
	c.start()
	host := c.clients()[0]
	c.waitFor("the agent to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 1 })
	if err := c.sim.InjectFault(nomadsim.Fault{PathPrefix: "/v1/evaluations", ErrorRate: 1, Status: 500}); err != nil {
		t.Fatal(err)
	}
	c.needReboot(host)
	c.waitFor("the host held by the failed read", 30*time.Second, func() bool {
		return c.waitingFor(host, "cannot check the workload blockers: pool default: list the blocked evaluations:")
	})
	if p := c.plans()[host]; strings.Contains(p.Waiting, mgmtToken(c.sim)) {
		t.Errorf("the reason shows the token: %q", p.Waiting)
	}
	start := time.Now()
	c.sim.ClearFaults()
	c.within("the host drained once the read works", start, func() bool { return c.plans()[host].Phase != store.PhasePending })
}

// A system job that does not fit one node of its pool (the node is smaller
// than the others) has a blocked evaluation about that node, which holds
// nothing: every host of the pool is drained and rebooted once, the small one
// included. A service job's blocked evaluation still holds its own pool.
func TestSystemBlockedEvalDoesNotHoldItsPool(t *testing.T) {
	t.Parallel()
	const small = "client-3" // pools: client-1 web, client-2 gpu, client-3 web, client-4 web, client-5 gpu
	c := newCluster(t, clusterOpts{clients: 5, pools: []string{"web", "gpu", "web"}, coordinators: 1,
		policy: "group \"web\" {\n  filter = \"NodePool == \\\"web\\\"\"\n}\ngroup \"gpu\" {\n  filter = \"NodePool == \\\"gpu\\\"\"\n}\n",
		simConfig: func(cfg *nomadsim.Config) {
			cfg.ClientResources = map[string]nomadsim.NodeResources{small: {CPU: 8000, MemoryMB: 1500}}
		},
		jobs: []nomadsim.JobSpec{
			{ID: "web", NodePool: "web", Groups: []nomadsim.GroupSpec{{Name: "web", Count: 2}}},
			// Fits every web node but the small one (1500 MB, 300 of them the agent's).
			{ID: "logs", Type: api.JobTypeSystem, NodePool: "web", Groups: []nomadsim.GroupSpec{{Name: "logs", MemoryMB: 2000}}},
			// Fits no node: blocked in its pool for the whole test.
			{ID: "train", NodePool: "gpu", Groups: []nomadsim.GroupSpec{{Name: "train", MemoryMB: 9000}}},
		}})
	pools := c.groupsByPool()
	var web, gpu []string
	for _, h := range c.clients() {
		if pools[h] == "web" {
			web = append(web, h)
		} else {
			gpu = append(gpu, h)
		}
	}
	smallNode := c.nodeOf(small)
	systemBlocked := func() []*api.Evaluation {
		evals, _, err := c.client.Evaluations().List(&api.QueryOptions{Filter: `Status == "blocked" and Type == "system"`})
		if err != nil {
			t.Fatal(err)
		}
		return evals
	}
	if ev := systemBlocked(); len(ev) != 1 || ev[0].JobID != "logs" || ev[0].NodeID != smallNode {
		t.Fatalf("blocked system evaluations: %+v, want one of logs about %s", ev, small)
	}
	c.start()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(c.clients()) })
	c.needReboot(c.clients()...)
	c.waitFor("the gpu hosts held by the service job's blocked evaluation", 30*time.Second, func() bool {
		return c.waitingFor(gpu[0], "pool gpu: 1 evaluation is blocked (job train)") &&
			c.waitingFor(gpu[1], "pool gpu: 1 evaluation is blocked (job train)")
	})
	c.waitFor("every web host rebooted", 90*time.Second, c.rebootedAll(web))
	for _, h := range gpu {
		if p := c.plans()[h]; p.Phase != store.PhasePending {
			t.Errorf("%s is %s while a blocked evaluation of its pool's service job holds it", h, p.Phase)
		}
	}
	// Back from its reboot, the small node still lacks the room: blocked
	// again, about it.
	c.waitFor("the system job blocked about the small node again", 10*time.Second, func() bool {
		ev := systemBlocked()
		return len(ev) == 1 && ev[0].NodeID == smallNode
	})
	reboots := each(web, 1)
	for _, h := range gpu {
		reboots[h] = 0
	}
	c.mustHold(invariants.Spec{Group: c.groupsByPool(), Concurrency: map[string]int{"web": 1, "gpu": 1},
		EligibleBefore: allTrue(c.clients()), Reboots: reboots})
}
