package deploytest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/setup"
	"github.com/rollboot/rollboot/internal/store"
)

// The jobs' rights when their tokens are their tasks' workload identities,
// with the policies attached to the jobs as `rollboot setup` attaches them:
// the same calls allowed and refused as with tokens minted from the policies
// (TestPoliciesAgainstEmulator), and nothing of the other job's.
func TestIdentityPoliciesAgainstEmulator(t *testing.T) {
	sim, err := nomadsim.New(nomadsim.Config{ACL: true, Clients: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mgmt := apiClient(t, sim.Address(), sim.ManagementToken())
	want, err := setup.Want(setup.Options{Driver: "raw_exec", Version: "v1.2.3", ReleaseURL: "https://releases.example.com/rollboot", StateNamespace: ns, Prefix: "rollboot"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range want.Policies {
		if _, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: p.Name, Rules: p.Rules, JobACL: p.JobACL}, nil); err != nil {
			t.Fatal(err)
		}
	}
	identity := func(ns, job string) *api.Client {
		t.Helper()
		if err := sim.AddJob(nomadsim.JobSpec{ID: job, Namespace: ns, Type: "system", Groups: []nomadsim.GroupSpec{{Name: "g", Task: "rollboot", IdentityEnv: true}}}); err != nil {
			t.Fatal(err)
		}
		ids, err := sim.TaskIdentities(ns, job)
		if err != nil || len(ids) == 0 {
			t.Fatalf("identities of %s/%s: %v", ns, job, err)
		}
		return apiClient(t, sim.Address(), ids[0].Env["NOMAD_TOKEN"])
	}
	denied := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), "403") {
			t.Errorf("%s: %v, want permission denied", what, err)
		}
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	nodes, _, err := mgmt.Nodes().List(nil)
	if err != nil || len(nodes) == 0 {
		t.Fatalf("list nodes: %v", err)
	}
	st := func(c *api.Client) *store.Store { return store.New(c.Variables(), "rollboot", ns) }

	ag := identity(setup.AgentNamespace, setup.AgentJob)
	checkAgentRights(ctx, t, ag, st(ag), nodes[0], allowed, denied)
	checkAgentCannotCoordinate(ctx, t, ag, st(ag), nodes[0].ID, denied)
	co := identity(setup.CoordinatorNamespace, setup.CoordinatorJob)
	checkCoordinatorRights(ctx, t, co, st(co), nodes[0].ID, allowed, denied)
	// Another job in either namespace gets neither job's rights.
	for _, n := range []string{setup.AgentNamespace, setup.CoordinatorNamespace} {
		other := identity(n, "web")
		_, err := st(other).PutHost(ctx, store.HostRecord{Host: "web-9", BootID: "b"})
		denied("another job in "+n+": PutHost", err)
	}
}
