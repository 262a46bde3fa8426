package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// The security suite: the default deployment with ACLs on, the policies applied
// from deploy/acl and the tokens minted through Nomad's ACL API exactly as
// docs/deploy.md tells an operator to. The agents run with the agent token, one
// standalone coordinator with the coordinator token. A compromised client host
// holds the agent token (every agent has it); each attack it can try on another
// host is refused, and the rollout still works with these tokens.

// aclPolicyFile is a shipped policy file, applied under its documented name.
func aclPolicyFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "acl", name+".policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mintTokens applies the shipped policies and creates one client token per role,
// as `nomad acl policy apply` and `nomad acl token create -type client -policy`.
func mintTokens(t *testing.T, mgmt *api.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range []string{"rollboot-agent", "rollboot-agent-server", "rollboot-coordinator", "rollboot-operator"} {
		if _, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Rules: aclPolicyFile(t, name)}, nil); err != nil {
			t.Fatalf("apply %s: %v", name, err)
		}
		tok, _, err := mgmt.ACLTokens().Create(&api.ACLToken{Name: name, Type: "client", Policies: []string{name}}, nil)
		if err != nil {
			t.Fatalf("token %s: %v", name, err)
		}
		out[name] = tok.SecretID
	}
	return out
}

func refused(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed, want 403", what)
	} else if !strings.Contains(err.Error(), "403") && !strings.Contains(strings.ToLower(err.Error()), "permission denied") {
		t.Errorf("%s: %v, want 403 permission denied", what, err)
	}
}

// cliAs runs the rollboot CLI with a token, as a person on a host would.
func (c *cluster) cliAs(token string, args ...string) (string, error) {
	args = append(args, "--address", c.sim.Address())
	cmd := exec.Command(rollbootBin, args...)
	cmd.Env = append(os.Environ(), "NOMAD_TOKEN="+token)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestSecurityAgentTokenCannotActOnOtherHosts(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 1, acl: true, policy: `group "all" {
  concurrency = 1
}`})
	tokens := mintTokens(t, c.client)
	c.opts.agentToken, c.opts.coordToken = tokens["rollboot-agent"], tokens["rollboot-coordinator"]
	c.start()
	hosts := c.clients()
	attacker, victim := hosts[0], hosts[1]
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The agents work with the narrow token: every host publishes its record.
	c.waitFor("every agent published its record", 30*time.Second, func() bool {
		recs, _, err := c.st.Hosts(ctx, 0, 0)
		return err == nil && len(recs) == len(hosts)
	})
	c.waitFor("a coordinator leads", 30*time.Second, func() bool { return c.leader() != "" })
	victimRec, err := c.st.Host(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	victimNode, err := c.sim.Node(victim)
	if err != nil {
		t.Fatal(err)
	}
	bootsBefore := boots(c, victim)

	// The attacker: the agent token found on a compromised client host.
	ag, err := api.NewClient(&api.Config{Address: c.sim.Address(), SecretID: c.opts.agentToken})
	if err != nil {
		t.Fatal(err)
	}
	defer ag.Close()

	agentTokenAttacks(ctx, t, c, ag, attacker, victimRec, victimNode)
	recordAttacks(ctx, t, c, ag, victimRec, victimNode)

	// None of it had any effect: the victim did not reboot, nothing is paused.
	if got := boots(c, victim); got != bootsBefore {
		t.Errorf("%s booted %d times during the attacks, want %d", victim, got, bootsBefore)
	}
	if n, _ := c.sim.Node(victim); n.SchedulingEligibility != api.NodeSchedulingEligible || n.DrainStrategy != nil {
		t.Errorf("%s: eligibility %q, drain %+v after the attacks", victim, n.SchedulingEligibility, n.DrainStrategy)
	}
	if ctl, err := c.st.Control(ctx); err == nil && ctl.Paused {
		t.Error("the fleet is paused after the attacks")
	}

	// The operator token, minted the same way, can ask for the reboot, and the
	// deployment carries it out with the agent and coordinator tokens.
	if out, err := c.cliAs(tokens["rollboot-operator"], "request", victim); err != nil {
		t.Fatalf("rollboot request with the operator token: %v\n%s", err, out)
	}
	c.waitFor(victim+" rebooted by the coordinator", 60*time.Second, c.rebootedAll([]string{victim}))
	// Who asked is the token's name, as `policy apply` records it.
	for _, r := range c.history() {
		if r.Host == victim && r.RequestedBy != "token rollboot-operator" {
			t.Errorf("the request of %s was recorded as by %q, want the operator token's name", victim, r.RequestedBy)
		}
	}
	c.mustHold(invariants.Spec{
		Group: map[string]string{hosts[0]: "all", hosts[1]: "all", hosts[2]: "all"}, Concurrency: map[string]int{"all": 1},
		EligibleBefore: allTrue(hosts), Reboots: map[string]int{victim: 1, attacker: 0, hosts[2]: 0},
	})
}

func boots(c *cluster, host string) int {
	for _, h := range c.sim.HostStatuses() {
		if h.Name == host {
			return h.Boots
		}
	}
	c.t.Fatalf("no host %s", host)
	return 0
}

// agentTokenAttacks tries, with the agent token (client ag), every write that
// would act on another host, and checks each is refused with 403.
func agentTokenAttacks(ctx context.Context, t *testing.T, c *cluster, ag *api.Client, attacker string, victimRec store.HostRecord, victimNode *api.Node) {
	t.Helper()
	victim := victimRec.Host
	st := store.New(ag.Variables(), "rollboot", "")
	var err error
	// Forged plan: the victim "drained" for its current boot, so that its agent
	// reboots it without a drain.
	_, err = st.PutPlan(ctx, store.Plan{Host: victim, Phase: store.PhaseDrained, GrantID: "forged", BootIDAtGrant: victimRec.BootID, NodeID: victimNode.ID, PhaseSince: time.Now()})
	refused(t, "forged plan for "+victim, err)
	_, err = st.PutPlan(ctx, store.Plan{Host: attacker, Phase: store.PhaseDrained, GrantID: "forged"})
	refused(t, "forged plan for the attacker's own host", err)
	// Pause the fleet, or request reboots of others, through control.
	_, err = st.UpdateControl(ctx, func(ctl *store.Control) error { ctl.Paused, ctl.PauseReason = true, "forged"; return nil })
	refused(t, "write control", err)
	for _, args := range [][]string{{"pause", "--reason", "forged"}, {"request", victim}} {
		out, err := c.cliAs(c.opts.agentToken, args...)
		if err == nil || !strings.Contains(out, "403") {
			t.Errorf("rollboot %s with the agent token: %v, want a 403:\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Rewrite history.
	refused(t, "write history", st.AppendHistory(ctx, store.HistoryRecord{Host: victim, Outcome: "rebooted", Finished: time.Now()}, 100))
	// Take the leader lock, to coordinate itself.
	lock, err := ag.Locks(api.WriteOptions{}, api.Variable{Path: st.LeaderPath(), Lock: &api.VariableLock{TTL: "15s", LockDelay: "15s"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = lock.Acquire(ctx)
	refused(t, "acquire the leader lock", err)
	// Drain or cordon the victim's node directly.
	_, err = ag.Nodes().UpdateDrainOpts(victimNode.ID, &api.DrainOptions{DrainSpec: &api.DrainSpec{Deadline: time.Minute, IgnoreSystemJobs: true}}, nil)
	refused(t, "drain "+victim, err)
	_, err = ag.Nodes().ToggleEligibility(victimNode.ID, false, nil)
	refused(t, "mark "+victim+" ineligible", err)
	// Mint itself a better token.
	_, _, err = ag.ACLTokens().Create(&api.ACLToken{Type: "management"}, nil)
	refused(t, "create a management token", err)
	_, err = ag.ACLPolicies().Upsert(&api.ACLPolicy{Name: "rollboot-agent", Rules: `node { policy = "write" }`}, nil)
	refused(t, "widen the agent policy", err)

}

// recordAttacks writes, with the agent token (which may write host records: Nomad
// cannot scope it to the host's own one), a record that shadows the victim's node
// and a garbled record in the victim's place. The coordinator ignores both and
// reports them, and the victim's agent restores its own record; the caller then
// checks that the victim was neither drained nor rebooted.
func recordAttacks(ctx context.Context, t *testing.T, c *cluster, ag *api.Client, victimRec store.HostRecord, victimNode *api.Node) {
	t.Helper()
	victim := victimRec.Host
	st := store.New(ag.Variables(), "rollboot", "")
	shadow := store.HostRecord{Host: "shadow-host", NodeID: victimNode.ID, BootID: victimRec.BootID,
		RebootRequired: true, Reason: "forged", RequestedAt: time.Now().UTC()}
	if _, err := st.PutHost(ctx, shadow); err != nil {
		t.Fatalf("the agent token may write host records, but: %v", err)
	}
	garbled := &api.Variable{Path: "rollboot/hosts/" + victim,
		Items: api.VariableItems{"host": victim, "node_id": victimNode.ID, "reboot_required": "maybe"}}
	if _, _, err := ag.Variables().Update(garbled, nil); err != nil {
		t.Fatalf("write a garbled record: %v", err)
	}
	c.waitFor("the coordinator to ignore the shadowing record", 60*time.Second, func() bool {
		return strings.Contains(c.logText("coordinator-1"), "host record ignored")
	})
	c.waitFor(victim+"'s agent to restore its record", 60*time.Second, func() bool {
		r, err := c.st.Host(ctx, victim)
		return err == nil && !r.RebootRequired && r.NodeID == victimNode.ID
	})
	// Several passes later, nothing was drained for either record.
	deadline := time.Now().Add(2 * time.Second)
	c.waitFor("a few reconcile passes", 10*time.Second, func() bool { return time.Now().After(deadline) })
	for _, e := range c.sim.Events(0) {
		if e.Type == nomadsim.EventDrainStart {
			t.Errorf("a drain started after the record attacks: %+v", e)
		}
	}
}
