package e2e

// `rollboot doctor` run as an operator runs it, against emulated clusters
// each with its misconfigurations: it reports each with its fix, exits 1 when
// one blocks rollouts, and 0 on a cluster set up as docs/deploy.md says.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/doctor"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

type doctorReport struct {
	Findings []doctor.Finding `json:"findings"`
	Errors   int              `json:"errors"`
	Blocking bool             `json:"blocking"`
}

// runDoctor runs `rollboot doctor -json` against sim with token, and env
// added to its environment.
func runDoctor(t *testing.T, sim *nomadsim.Sim, token string, env ...string) (doctorReport, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, rollbootBin, "doctor", "-json", "-address", sim.Address())
	cmd.Env = append(append(os.Environ(), "NOMAD_TOKEN="+token), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("rollboot doctor: %v", err)
	}
	var r doctorReport
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("rollboot doctor -json: %v\n%s\n%s", err, out, stderr.String())
	}
	return r, code
}

// find returns the finding of check whose What contains what.
func (r doctorReport) find(check, what string) (doctor.Finding, bool) {
	for _, f := range r.Findings {
		if f.Check == check && strings.Contains(f.What, what) {
			return f, true
		}
	}
	return doctor.Finding{}, false
}

func (r doctorReport) dump() string {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString("  " + f.Severity.String() + " " + f.Check + ": " + f.What + " (fix: " + f.Fix + ")\n")
	}
	return b.String()
}

// expect checks that r has a finding of check at sev saying what, with a fix
// saying fix.
func (r doctorReport) expect(t *testing.T, check string, sev doctor.Severity, what, fix string) {
	t.Helper()
	f, ok := r.find(check, what)
	if !ok {
		t.Errorf("no %s finding saying %q:\n%s", check, what, r.dump())
		return
	}
	if f.Severity != sev || !strings.Contains(f.Fix, fix) {
		t.Errorf("%s finding %q: severity %s, fix %q; want %s and a fix with %q", check, f.What, f.Severity, f.Fix, sev, fix)
	}
}

// doctorCluster starts an emulated cluster with the agents' system job
// (raw_exec) registered and waits for its allocations to run; the hosts in
// published get a host record, as their agents would write.
func doctorCluster(t *testing.T, cfg nomadsim.Config, published ...string) (*nomadsim.Sim, *api.Client) {
	t.Helper()
	cfg.ACL = true
	sim, c := simtest.Start(t, cfg, nil)
	c.SetSecretID(sim.ManagementToken())
	if err := sim.AddJob(nomadsim.JobSpec{ID: agentJob, Type: api.JobTypeSystem, Driver: "raw_exec"}); err != nil {
		t.Fatal(err)
	}
	want := cfg.Clients - len(cfg.NoRawExec)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := sim.WaitFor(ctx, func(v *nomadsim.View) bool {
		running := 0
		for i := 1; i <= cfg.Clients; i++ {
			if h, ok := v.Host(fmt.Sprintf("client-%d", i)); ok {
				if _, ok := v.RunningAlloc(h.NodeID, agentJob); ok {
					running++
				}
			}
		}
		return running == want
	}); err != nil {
		t.Fatalf("the agents' job never ran on %d clients: %v", want, err)
	}
	st := store.New(c.Variables(), "rollboot", "")
	for _, h := range published {
		rec := store.HostRecord{Host: h, BootID: "b-" + h, AgentVersion: "test"}
		if n, err := sim.Node(h); err == nil {
			rec.NodeID = n.ID
		}
		if _, err := st.PutHost(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	return sim, c
}

// A too-old Nomad with the event broker off (the 500 shape), a client without
// raw_exec and so without an agent, and a client whose agent published no
// record: each is reported with its fix, and the exit status is 1.
func TestDoctorReportsAnOldMisconfiguredCluster(t *testing.T) {
	t.Parallel()
	sim, _ := doctorCluster(t, nomadsim.Config{Servers: 1, Clients: 3, NomadVersion: "1.6.5",
		EventBrokerDisabled: true, NoRawExec: []string{"client-2"}}, "server-1", "client-1")
	r, code := runDoctor(t, sim, sim.ManagementToken())
	if code != 1 || !r.Blocking {
		t.Errorf("exit status %d, blocking %v: want 1 and blocking", code, r.Blocking)
	}
	r.expect(t, doctor.CheckVersion, doctor.Error, "nomad 1.6.5", "upgrade the Nomad servers")
	r.expect(t, doctor.CheckBroker, doctor.Warning, `EventBroker not configured`, "enable_event_broker = true")
	r.expect(t, doctor.CheckDrivers, doctor.Warning, "node client-2 cannot run the rollboot agent: raw_exec not detected (disabled)", `plugin "raw_exec"`)
	r.expect(t, doctor.CheckAgents, doctor.Warning, "node client-2 runs no rollboot agent", `plugin "raw_exec"`)
	r.expect(t, doctor.CheckAgents, doctor.Warning, "the agent on node client-3 runs but has published no host record", "nomad alloc logs")
	r.expect(t, doctor.CheckPolicies, doctor.Warning, "are not in the cluster", "nomad acl policy apply rollboot-agent deploy/acl/rollboot-agent.policy.hcl")
	if _, ok := r.find(doctor.CheckAgents, "node client-1"); ok {
		t.Errorf("client-1 runs its agent and published its record, yet:\n%s", r.dump())
	}
}

// A token without operator:read, and a Nomad 1.11.2 whose broker is off (200,
// then the stream ends): the missing right blocks, with the policy to apply.
func TestDoctorReportsMissingRightsAndTheNewBrokerShape(t *testing.T) {
	t.Parallel()
	sim, c := doctorCluster(t, nomadsim.Config{Servers: 1, Clients: 2, NomadVersion: "1.11.2", EventBrokerDisabled: true},
		"server-1", "client-1", "client-2")
	rules := aclPolicyFile(t, "rollboot-operator")
	i := strings.Index(rules, "operator {")
	j := i + strings.Index(rules[i:], "}") + 1
	if _, err := c.ACLPolicies().Upsert(&api.ACLPolicy{Name: "ops-without-operator", Rules: rules[:i] + rules[j:]}, nil); err != nil {
		t.Fatal(err)
	}
	tok, _, err := c.ACLTokens().Create(&api.ACLToken{Name: "ops", Type: "client", Policies: []string{"ops-without-operator"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, code := runDoctor(t, sim, tok.SecretID)
	if code != 1 {
		t.Errorf("exit status %d: want 1", code)
	}
	r.expect(t, doctor.CheckRights, doctor.Error, "it lacks operator:read", "nomad acl token update -policy rollboot-operator "+tok.AccessorID)
	r.expect(t, doctor.CheckBroker, doctor.Warning, "the event stream ends at once", "enable_event_broker = true")
	r.expect(t, doctor.CheckToken, doctor.OK, `token "ops" (client)`, "")
	// No agent:read in the operator's policy: the servers' builds tell it.
	r.expect(t, doctor.CheckVersion, doctor.OK, "Nomad 1.11.2", "")
	if _, ok := r.find(doctor.CheckAgents, "runs no rollboot agent"); ok {
		t.Errorf("every client runs its agent, yet:\n%s", r.dump())
	}
}

// A cluster set up as docs/deploy.md says: the shipped policies, the agents'
// job on every client, each agent's record (the server host's too, with its
// Consul and Vault servers readable), a coordinator leading: no warning,
// exit status 0. The coordinator logged its start-up checks once.
func TestDoctorPassesAWellSetUpCluster(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, servers: 1, autoUnseal: true, coordinators: 1, acl: true})
	for _, name := range doctor.ShippedPolicyNames() {
		if _, err := c.client.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Rules: aclPolicyFile(t, name)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	c.start()
	c.waitFor("agents to publish and a coordinator to lead", 30*time.Second, func() bool {
		return len(c.status().Hosts) == 3 && c.leader() != "" && strings.Contains(c.logText("coordinator-1"), "start-up checks done")
	})
	r, code := runDoctor(t, c.sim, mgmtToken(c.sim), "CONSUL_HTTP_ADDR="+c.sim.ConsulAddress(), "CONSUL_HTTP_TOKEN="+consulToken,
		"VAULT_ADDR="+c.sim.VaultAddress(), "VAULT_TOKEN="+vaultToken)
	if code != 0 || r.Blocking {
		t.Errorf("exit status %d, blocking %v: want 0", code, r.Blocking)
	}
	for _, f := range r.Findings {
		if f.Severity >= doctor.Warning {
			t.Errorf("a well set-up cluster: %s %s: %s", f.Severity, f.Check, f.What)
		}
	}
	r.expect(t, doctor.CheckPolicies, doctor.OK, "5 of rollboot's 5 ACL policies are as shipped", "")
	r.expect(t, doctor.CheckAgents, doctor.OK, "the agent runs on all 2 ready clients", "")
	r.expect(t, doctor.CheckBroker, doctor.OK, "streams node events", "")
	r.expect(t, doctor.CheckCoordinator, doctor.OK, "leads (since", "")
	r.expect(t, doctor.CheckClusters, doctor.OK, "the Consul cluster dc1 is healthy", "")
	r.expect(t, doctor.CheckClusters, doctor.OK, "the Vault cluster", "")
	if n := strings.Count(c.logText("coordinator-1"), "start-up checks done"); n != 1 {
		t.Errorf("the coordinator logged its start-up checks %d times, want once", n)
	}
}

// Nomad that does not answer is one error pointing at the address, not one
// per check.
func TestDoctorNomadUnreachable(t *testing.T) {
	t.Parallel()
	sim, err := nomadsim.New(nomadsim.Config{Clients: 1})
	if err != nil {
		t.Fatal(err)
	}
	sim.Close() // its address now refuses connections
	r, code := runDoctor(t, sim, "")
	if code != 1 || len(r.Findings) != 1 {
		t.Fatalf("exit status %d, findings:\n%s: want 1 and one finding", code, r.dump())
	}
	r.expect(t, doctor.CheckVersion, doctor.Error, "cannot reach Nomad", "NOMAD_ADDR")
}
