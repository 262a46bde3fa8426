package nomadsim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

const agentVarsPolicy = `
namespace "default" {
  variables {
    path "rollboot/hosts/*" {
      capabilities = ["read", "write"]
    }
  }
}
`

// identities returns the task identities of job, by host.
func identities(t *testing.T, s *Sim, ns, job string) map[string]TaskIdentity {
	t.Helper()
	ids, err := s.TaskIdentities(ns, job)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]TaskIdentity{}
	for _, id := range ids {
		out[id.Host] = id
	}
	return out
}

func putVar(c *api.Client, ns, path string) error {
	_, _, err := c.Variables().Create(&api.Variable{Namespace: ns, Path: path, Items: api.VariableItems{"k": "v"}}, &api.WriteOptions{Namespace: ns})
	return err
}

func getVar(c *api.Client, ns, path string) error {
	_, _, err := c.Variables().Read(path, &api.QueryOptions{Namespace: ns})
	return err
}

// A task's identity authenticates as its allocation: it gets the rules of the
// policies attached to its job (and to its group and task when they name
// them), the implicit read of its own nomad/jobs paths, and nothing once its
// allocation is gone.
func TestWorkloadIdentityResolvesJobACL(t *testing.T) {
	s, mgmt := newTestSim(t, Config{Clients: 2, ACL: true})
	if err := s.AddJob(JobSpec{ID: "rollboot", Type: "system", Groups: []GroupSpec{{Name: "agent", Task: "rollboot", IdentityEnv: true}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddJob(JobSpec{ID: "other", Type: "system"}); err != nil {
		t.Fatal(err)
	}
	ids := identities(t, s, "default", "rollboot")
	if len(ids) != 2 {
		t.Fatalf("identities %+v, want one per client", ids)
	}
	id := ids["client-1"]
	if id.Task != "rollboot" || id.Group != "agent" || id.Env["NOMAD_TOKEN"] != id.Token || strings.Count(id.Token, ".") != 2 {
		t.Fatalf("identity %+v: want a JWT in NOMAD_TOKEN for task rollboot of group agent", id)
	}
	if other := identities(t, s, "default", "other")["client-1"]; len(other.Env) != 0 {
		t.Errorf("a task without identity { env = true } has %v in its environment", other.Env)
	}
	wi := newClient(t, s.Address(), id.Token)
	other := newClient(t, s.Address(), identities(t, s, "default", "other")["client-1"].Token)

	// No policy attached: implicit read of nomad/jobs/<job>[/group[/task]] only.
	for _, p := range []string{"nomad/jobs/rollboot", "nomad/jobs/rollboot/agent", "nomad/jobs/rollboot/agent/rollboot"} {
		if err := putVar(mgmt, "default", p); err != nil {
			t.Fatal(err)
		}
		if err := getVar(wi, "default", p); err != nil {
			t.Errorf("the job's identity reads %s: %v", p, err)
		}
		wantCode(t, "another job's identity reads "+p, getVar(other, "default", p), "403")
	}
	wantCode(t, "the identity writes its own variable", putVar(wi, "default", "nomad/jobs/rollboot"), "403")
	wantCode(t, "the identity writes host records without a policy", putVar(wi, "default", "rollboot/hosts/client-1"), "403")

	// A policy attached to another job, or to another group, grants nothing.
	for _, j := range []*api.JobACL{{Namespace: "default", JobID: "other"}, {Namespace: "default", JobID: "rollboot", Group: "web"}, {Namespace: "ops", JobID: "rollboot"}} {
		if _, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: "agent", Rules: agentVarsPolicy, JobACL: j}, nil); err != nil {
			t.Fatal(err)
		}
		wantCode(t, "write with a policy attached to "+j.Namespace+"/"+j.JobID+"/"+j.Group, putVar(wi, "default", "rollboot/hosts/client-1"), "403")
	}
	// Attached to the job, to its group, to its task, or to its namespace: granted.
	for _, j := range []*api.JobACL{{Namespace: "default", JobID: "rollboot"}, {Namespace: "default", JobID: "rollboot", Group: "agent"},
		{Namespace: "default", JobID: "rollboot", Group: "agent", Task: "rollboot"}, {Namespace: "default"}} {
		if _, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: "agent", Rules: agentVarsPolicy, JobACL: j}, nil); err != nil {
			t.Fatal(err)
		}
		if err := putVar(wi, "default", "rollboot/hosts/client-1"); err != nil {
			t.Errorf("write with a policy attached to %+v: %v", j, err)
		}
	}
	// It reads the policies attached to its job; another job's identity not.
	if _, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: "agent", Rules: agentVarsPolicy, JobACL: &api.JobACL{Namespace: "default", JobID: "rollboot"}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := wi.ACLPolicies().Info("agent", nil); err != nil {
		t.Errorf("the identity reads the policy attached to its job: %v", err)
	}
	if list, _, err := wi.ACLPolicies().List(nil); err != nil || len(list) != 1 || list[0].Name != "agent" {
		t.Errorf("the identity lists %+v, %v; want its attached policy", list, err)
	}
	_, _, err := other.ACLPolicies().Info("agent", nil)
	wantCode(t, "another job's identity reads the policy", err, "403")
	// Recorded as the allocation; token self knows no token.
	self, err := s.aclSelfStatus(id.Token)
	if err != nil || self != http.StatusNotFound {
		t.Errorf("token self with an identity: %d, %v; want 404", self, err)
	}
	forged := id.Token[:strings.LastIndex(id.Token, ".")+1] + "AAAA"
	wantCode(t, "a forged signature", getVar(newClient(t, s.Address(), forged), "default", "nomad/jobs/rollboot"), "403")

	// Once its allocation is client-terminal, the identity is refused.
	if err := s.StopJob("default", "rollboot"); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(testCtx(t), func(v *View) bool {
		for _, sa := range v.s.cluster.allocs {
			if sa.a.JobID == "rollboot" && !allocClientTerminal(sa.a) {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "the identity of a stopped allocation", getVar(wi, "default", "nomad/jobs/rollboot"), "403")
}

// aclSelfStatus is the status of GET /v1/acl/token/self with secret.
func (s *Sim) aclSelfStatus(secret string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, s.Address()+"/v1/acl/token/self", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Nomad-Token", secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// ACLPolicy.Validate's JobACL rules: a job needs a namespace, a group a job,
// a task a group.
func TestJobACLValidation(t *testing.T) {
	_, mgmt := newTestSim(t, Config{Clients: 1, ACL: true})
	for _, tt := range []struct {
		j    *api.JobACL
		want string
	}{
		{&api.JobACL{JobID: "j"}, "namespace must be set to set job ID"},
		{&api.JobACL{Namespace: "default", Group: "g"}, "job ID must be set to set group"},
		{&api.JobACL{Namespace: "default", JobID: "j", Task: "t"}, "group must be set to set task"},
	} {
		_, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: "p", Rules: agentVarsPolicy, JobACL: tt.j}, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("JobACL %+v: %v, want 400 %q", tt.j, err, tt.want)
		}
	}
}

// The control API shows each task's identity as its environment would hold it.
func TestControlIdentities(t *testing.T) {
	s, _ := newTestSim(t, Config{Clients: 1, ACL: true})
	if err := s.AddJob(JobSpec{ID: "rollboot", Type: "system", Groups: []GroupSpec{{Name: "agent", IdentityEnv: true}}}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(s.Address() + "/sim/v1/identities?job=rollboot")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []TaskIdentity
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Host != "client-1" || out[0].Task != "agent" || out[0].Env["NOMAD_TOKEN"] == "" {
		t.Errorf("identities %+v", out)
	}
	for _, q := range []string{"", "?job=nosuch"} {
		resp, err := http.Get(s.Address() + "/sim/v1/identities" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Errorf("identities%s: %d, want an error", q, resp.StatusCode)
		}
	}
}
