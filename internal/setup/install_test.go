package setup

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// Each job setup registers is the job its file declares, in the namespace the
// policy attached to it names: the file, not setup, says where a job runs.
func TestJobFilesMatchWhatSetupAttaches(t *testing.T) {
	for _, o := range []Options{release, {Driver: "docker", Image: "registry.example.com/rollboot:v1.2.3", Version: "v1.2.3",
		ReleaseURL: release.ReleaseURL, StateNamespace: "default", Prefix: "rollboot"}} {
		for _, j := range want(t, o).Jobs {
			job, err := nomadsim.ParseJobHCL(string(j.Source), j.Vars)
			if err != nil {
				t.Fatalf("%s: %v", j.File, err)
			}
			ns := "default"
			if job.Namespace != nil {
				ns = *job.Namespace
			}
			if *job.ID != j.ID || ns != j.Namespace {
				t.Errorf("deploy/%s declares job %s/%s; setup registers and attaches a policy to %s/%s", j.File, ns, *job.ID, j.Namespace, j.ID)
			}
		}
	}
}

func installed(t *testing.T) (*nomadsim.Sim, *api.Client, *store.Store) {
	t.Helper()
	s, err := nomadsim.New(nomadsim.Config{Clients: 2, ACL: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c, err := api.NewClient(&api.Config{Address: s.Address(), SecretID: s.ManagementToken()})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(c.Variables(), "rollboot", "default")
	ctx := context.Background()
	d := want(t, release)
	obs, err := Observe(ctx, c, st, d, true)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Apply(ctx, c, st, Plan(d, obs), d.StoredPolicy, "test", &out); err != nil {
		t.Fatal(err)
	}
	return s, c, st
}

// After Apply, Observe finds everything in place: the plan is empty.
func TestApplyThenNothingPending(t *testing.T) {
	_, c, st := installed(t)
	d := want(t, release)
	obs, err := Observe(context.Background(), c, st, d, true)
	if err != nil {
		t.Fatal(err)
	}
	if n := Pending(Plan(d, obs)); n != 0 {
		var b bytes.Buffer
		WritePlan(&b, Plan(d, obs))
		t.Errorf("%d changes pending after Apply:\n%s", n, b.String())
	}
	p, _, err := c.ACLPolicies().Info("rollboot-agent", nil)
	if err != nil || p.JobACL == nil || p.JobACL.JobID != AgentJob || p.JobACL.Namespace != AgentNamespace {
		t.Errorf("rollboot-agent: %+v, %v; want it attached to the agents' job", p, err)
	}
}

// Destroy refuses while a host holds a slot, naming it and the fix, and
// removes nothing then.
func TestDestroyRefusesWhileASlotIsHeld(t *testing.T) {
	_, c, st := installed(t)
	ctx := context.Background()
	if _, err := st.PutPlan(ctx, store.Plan{Host: "client-1", Phase: store.PhaseDrained, PhaseSince: time.Now(), Group: "all"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutPlan(ctx, store.Plan{Host: "client-2", Phase: store.PhasePending, PhaseSince: time.Now(), Group: "all"}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := Destroy(ctx, c, st, "default", want(t, release), true, &out)
	for _, w := range []string{"1 hosts hold a slot", "client-1 (drained)", "rollboot release <host>", "rollboot pause"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%v, want an error with %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "client-2") {
		t.Errorf("%v: a pending host holds no slot", err)
	}
	if jobs, _, _ := c.Jobs().List(&api.QueryOptions{Namespace: "*"}); len(jobs) != 2 {
		t.Errorf("jobs after a refused destroy: %d, want both", len(jobs))
	}
}

// A server host's token is minted once: a second setup prints the same one,
// with the systemd steps that install it.
func TestServerHostToken(t *testing.T) {
	_, c, _ := installed(t)
	ctx := context.Background()
	first, created, err := ServerHostToken(ctx, c, "server-1")
	if err != nil || !created {
		t.Fatalf("first: created %v, %v", created, err)
	}
	again, created, err := ServerHostToken(ctx, c, "server-1")
	if err != nil || created || again.SecretID != first.SecretID {
		t.Errorf("second: created %v, same secret %v, %v", created, again.SecretID == first.SecretID, err)
	}
	if first.Policies[0] != "rollboot-agent-server" {
		t.Errorf("policies %v", first.Policies)
	}
	var out bytes.Buffer
	if err := WriteServerHostSteps(&out, "server-1", first, "v1.2.3"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"NOMAD_TOKEN=" + first.SecretID, "/etc/rollboot/config.hcl", "[Service]", "systemctl enable --now rollboot-agent"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("steps lack %q:\n%s", w, out.String())
		}
	}
	if _, _, err := ServerHostToken(ctx, c, "bad host"); err == nil {
		t.Error("a host name with a space: no error")
	}
}

// Fewer than three clients that may run the coordinator job: a warning with
// the fix; three: none.
func TestCoordinatorNodeWarning(t *testing.T) {
	s, c, _ := installed(t)
	w, err := CoordinatorNodeWarning(context.Background(), c)
	if err != nil || !strings.Contains(w, "0 clients") || !strings.Contains(w, "nomad node meta apply rollboot_coordinator=true") {
		t.Errorf("no client marked: %q, %v", w, err)
	}
	for _, h := range []string{"client-1", "client-2"} {
		if err := s.SetNodeMeta(h, map[string]string{"rollboot_coordinator": "true"}); err != nil {
			t.Fatal(err)
		}
	}
	if w, _ := CoordinatorNodeWarning(context.Background(), c); !strings.Contains(w, "2 clients") {
		t.Errorf("two marked: %q", w)
	}
	if _, err := s.AddHost("client-3", false, true, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.SetNodeMeta("client-3", map[string]string{"rollboot_coordinator": "true"}); err != nil {
		t.Fatal(err)
	}
	if w, err := CoordinatorNodeWarning(context.Background(), c); w != "" || err != nil {
		t.Errorf("three marked: %q, %v", w, err)
	}
}

// Destroy deletes rollboot's state only once the purged jobs' allocations
// have stopped: an agent still running would write its host record again.
func TestDestroyWaitsForTheAgentsToStop(t *testing.T) {
	_, c, st := installed(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d := want(t, release)
	running := func() int {
		n := 0
		for _, j := range d.Jobs {
			allocs, _, err := c.Jobs().Allocations(j.ID, false, &api.QueryOptions{Namespace: j.Namespace})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range allocs {
				if a.ClientStatus == api.AllocClientStatusRunning || a.ClientStatus == api.AllocClientStatusPending {
					n++
				}
			}
		}
		return n
	}
	for running() == 0 {
		if ctx.Err() != nil {
			t.Fatal("no allocation of the installed jobs ever ran")
		}
		time.Sleep(50 * time.Millisecond) // the clients start them: no condition to block on here
	}
	var out bytes.Buffer
	if err := Destroy(ctx, c, st, "default", d, true, &out); err != nil {
		t.Fatalf("destroy: %v\n%s", err, out.String())
	}
	if n := running(); n != 0 {
		t.Errorf("%d allocations of the purged jobs still running once the state was deleted", n)
	}
}
