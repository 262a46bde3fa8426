package e2e

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
)

var setupArgs = []string{"setup", "-version", "v1.2.3", "-release-url", "https://releases.example.com/rollboot"}

// identityOf is the NOMAD_TOKEN a task of job on host finds in its
// environment: its allocation's workload identity (the newest live one).
func (c *cluster) identityOf(ns, job, host string) string {
	ids, err := c.sim.TaskIdentities(ns, job)
	if err != nil {
		return ""
	}
	tok := ""
	for _, id := range ids {
		if id.Host == host {
			tok = id.Env["NOMAD_TOKEN"]
		}
	}
	return tok
}

// runJobCoordinators runs one `rollboot coordinator` per live allocation of
// the coordinator job, with that allocation's identity as NOMAD_TOKEN, as the
// Nomad client runs the task: a new allocation starts one, and once the
// scheduler stops an allocation its process gets SIGTERM (the job's
// kill_signal), while its identity still authenticates (until the allocation
// is client-terminal, Config.MigrateTime later).
func (c *cluster) runJobCoordinators(ctx context.Context) {
	running := map[string]string{} // allocation ID → process name
	for ctx.Err() == nil {
		ids, _ := c.sim.TaskIdentities("rollboot", "rollboot-coordinator")
		live := map[string]nomadsim.TaskIdentity{}
		for _, id := range ids {
			if id.DesiredStatus != api.AllocDesiredStatusStop {
				live[id.AllocID] = id
			}
		}
		for alloc, name := range running {
			if _, ok := live[alloc]; !ok {
				c.mu.Lock()
				c.killed[name] = true
				cmd := c.coords[name]
				c.mu.Unlock()
				_ = cmd.Process.Signal(syscall.SIGTERM)
				delete(running, alloc)
			}
		}
		for alloc, id := range live {
			if _, ok := running[alloc]; !ok && id.Env["NOMAD_TOKEN"] != "" {
				name := "coordinator-" + alloc[:8]
				c.startCoordinatorEnv(name, []string{"NOMAD_TOKEN=" + id.Env["NOMAD_TOKEN"], "NOMAD_NAMESPACE=rollboot"})
				running[alloc] = name
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// The done-when test of `rollboot setup` (issue 39): against an empty emulated
// cluster with ACLs and only a management token, -check shows the changes and
// exits non-zero; setup installs everything; a second run changes nothing; a
// rollout completes with the jobs' own identities (no token made for them);
// -destroy leaves no rollboot policy, token, variable, namespace or job.
func TestSetupFromEmptyCluster(t *testing.T) {
	t.Parallel()
	// migrateTime: a stopped coordinator allocation stays authenticated this
	// long after its SIGTERM, time enough to release the election lock (Nomad
	// gives it kill_timeout, 30s in the shipped job).
	c := newCluster(t, clusterOpts{clients: 3, acl: true, fromSetup: true, migrateTime: time.Second})
	mgmt := c.sim.ManagementToken()
	c.opts.agentEnv = func(host string) []string {
		return []string{"NOMAD_TOKEN=" + c.identityOf("default", agentJob, host)}
	}
	hosts := c.clients()
	for _, h := range hosts {
		// The coordinator job's constraint: nodes trusted with it.
		if err := c.sim.SetNodeMeta(h, map[string]string{"rollboot_coordinator": "true"}); err != nil {
			t.Fatal(err)
		}
	}

	out, err := c.cliAs(mgmt, append(setupArgs, "-check")...)
	if err == nil || !strings.Contains(out, "+ job default/rollboot") || !strings.Contains(out, "8 changes pending") {
		t.Fatalf("setup -check on an empty cluster: %v\n%s", err, out)
	}
	if jobs, _, _ := c.client.Jobs().List(nil); len(jobs) != 0 {
		t.Fatalf("setup -check registered jobs: %v", jobs)
	}
	if out, err = c.cliAs(mgmt, setupArgs...); err != nil || !strings.Contains(out, "8 changes made") {
		t.Fatalf("setup: %v\n%s", err, out)
	}
	idx := c.sim.Index()
	if out, err = c.cliAs(mgmt, setupArgs...); err != nil || !strings.Contains(out, "Nothing to change") {
		t.Fatalf("second setup: %v\n%s", err, out)
	}
	if out, err = c.cliAs(mgmt, append(setupArgs, "-check")...); err != nil {
		t.Fatalf("setup -check after setup: %v, want exit 0\n%s", err, out)
	}
	if c.sim.Index() != idx {
		t.Errorf("the second setup wrote to the cluster (index %d → %d)", idx, c.sim.Index())
	}
	checkTokens(t, c.client, mgmt, "after setup")

	// The rollout, quicker than deploy/policy.hcl's settle time.
	c.applyPolicy(`group "all" {
  concurrency = 1
}`)
	c.start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.runJobCoordinators(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	start := time.Now()
	c.needReboot(hosts...)
	c.waitFor("every host rebooted", 120*time.Second, c.rebootedAll(hosts))
	t.Logf("rollout of %d hosts: %s", len(hosts), time.Since(start).Round(time.Millisecond))
	c.mustHold(invariants.Spec{Concurrency: map[string]int{"": 1}, EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
	if ex := c.unexpectedExits(); len(ex) > 0 {
		t.Errorf("processes ended by themselves: %v", ex)
	}

	start = time.Now()
	if out, err = c.cliAs(mgmt, "setup", "-destroy", "-timeout", "60s"); err != nil {
		t.Fatalf("setup -destroy: %v\n%s", err, out)
	}
	t.Logf("setup -destroy: %s", time.Since(start).Round(time.Millisecond))
	checkNothingLeft(t, c.client, mgmt)
}

// checkTokens: the only token is the management token; the jobs hold none.
func checkTokens(t *testing.T, c *api.Client, mgmt, when string) {
	t.Helper()
	toks, _, err := c.ACLTokens().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range toks {
		if tok.Type != "management" {
			t.Errorf("%s: token %q (%v) exists: the jobs' identities are their tokens", when, tok.Name, tok.Policies)
		}
	}
}

func checkNothingLeft(t *testing.T, c *api.Client, mgmt string) {
	t.Helper()
	pols, _, err := c.ACLPolicies().List(nil)
	if err != nil || len(pols) != 0 {
		t.Errorf("ACL policies left: %v, %v", pols, err)
	}
	checkTokens(t, c, mgmt, "after setup -destroy")
	vars, _, err := c.Variables().List(&api.QueryOptions{Namespace: "*"})
	if err != nil || len(vars) != 0 {
		var paths []string
		for _, v := range vars {
			paths = append(paths, fmt.Sprintf("%s/%s", v.Namespace, v.Path))
		}
		t.Errorf("variables left: %v, %v", paths, err)
	}
	nss, _, err := c.Namespaces().List(nil)
	if err != nil || len(nss) != 1 || nss[0].Name != "default" {
		t.Errorf("namespaces left: %v, %v", nss, err)
	}
	jobs, _, err := c.Jobs().List(&api.QueryOptions{Namespace: "*"})
	if err != nil || len(jobs) != 0 {
		t.Errorf("jobs left: %v, %v", jobs, err)
	}
}
