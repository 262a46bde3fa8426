// Package deploytest checks the deployment files under deploy/: the ACL policies
// grant each role exactly what its Nomad API calls need, the rollboot
// configurations embedded in the job files and the systemd example load and
// validate, and the job files are valid HCL.
package deploytest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// root is the repository root, seen from this package's directory (go test runs
// in it).
const root = "../.."

func deployPath(parts ...string) string {
	return filepath.Join(append([]string{root, "deploy"}, parts...)...)
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---- (a) the policies parse ---------------------------------------------------------

var policyFiles = map[string]string{
	"agent":        "rollboot-agent.policy.hcl",
	"agent-server": "rollboot-agent-server.policy.hcl",
	"coordinator":  "rollboot-coordinator.policy.hcl",
	"candidate":    "rollboot-agent-candidate.policy.hcl",
	"operator":     "rollboot-operator.policy.hcl",
}

func loadPolicy(t *testing.T, role string) *nomadsim.Policy {
	t.Helper()
	path := deployPath("acl", policyFiles[role])
	src := read(t, path)
	p, err := nomadsim.ParsePolicy(path, src)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p
}

func TestPolicyFilesParse(t *testing.T) {
	got, err := filepath.Glob(deployPath("acl", "*.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, f := range policyFiles {
		want = append(want, deployPath("acl", f))
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("policy files:\n got %q\nwant %q", got, want)
	}
	for _, path := range got {
		src := read(t, path)
		if _, err := nomadsim.ParsePolicy(path, src); err != nil {
			t.Errorf("%s: %v", path, err)
		}
		// ParsePolicy ignores top-level blocks the emulator does not model; a
		// misspelt block would be ignored too, so check the top level here.
		f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
		if diags.HasErrors() {
			t.Errorf("%s: %v", path, diags)
			continue
		}
		body := f.Body.(*hclsyntax.Body)
		for name, a := range body.Attributes {
			t.Errorf("%s: unexpected top-level attribute %q", a.SrcRange, name)
		}
		for _, b := range body.Blocks {
			switch b.Type {
			case "namespace", "node", "agent", "operator":
			default:
				t.Errorf("%s: unexpected top-level block %q", b.TypeRange, b.Type)
			}
		}
	}
}

// ---- (b) each role is granted exactly what it calls ---------------------------------

// A check is one authorization decision of Nomad, and which roles must get it.
// The roles: agent (on a Nomad client, coordinator.enabled = false), agent-server
// (on a server host), coordinator (standalone), candidate (agent + coordinator
// candidate, coordinator.enabled = true), operator (the CLI). The calls behind
// them, through the HTTP API, are in tokens_test.go.
type check struct {
	what string
	ok   func(t *nomadsim.Token) bool
	want string // the roles allowed, e.g. "agent,candidate"; "" = nobody
}

const ns = "default"

func v(path, capability string) func(t *nomadsim.Token) bool {
	return func(t *nomadsim.Token) bool { return t.AllowVariable(ns, path, capability) }
}

var checks = []check{
	// Nobody: the agent learns who its host is from /v1/agent/health (no ACL
	// check), the node list and /v1/agent/members (node:read); agent:read would
	// also read any node's host data and any agent's log.
	{"agent:read (/v1/agent/self, /v1/agent/host, /v1/agent/monitor)", func(t *nomadsim.Token) bool { return t.AllowAgent(false) }, ""},
	{"agent:write", func(t *nomadsim.Token) bool { return t.AllowAgent(true) }, ""},
	// Node list and reads: the agent's own node by name, its Nomad server's
	// Serf member, its node at the go/no-go; the coordinator's node list and
	// allocations. Drain and eligibility (write): the coordinator.
	{"node:read (/v1/nodes, /v1/node/<id>, /v1/agent/members)", func(t *nomadsim.Token) bool { return t.AllowNode(false) }, "agent,agent-server,coordinator,candidate,operator"},
	{"node:write (drain, eligibility)", func(t *nomadsim.Token) bool { return t.AllowNode(true) }, "coordinator,candidate"},
	// Jobs and allocations: the coordinator and the CLI, never an agent (its
	// go/no-go reads the node's events, not its allocations).
	{"read-job in default (node allocations)", func(t *nomadsim.Token) bool { return t.AllowNamespace(ns, "read-job") }, "coordinator,candidate,operator"},
	{"read-job in another namespace (system jobs anywhere, workload blockers)", func(t *nomadsim.Token) bool { return t.AllowNamespace("batch", "read-job") }, "coordinator,candidate,operator"},
	// Workload blockers (coordinator, and `rollboot plan`): GET /v1/jobs?namespace=*.
	{"list-jobs in default", func(t *nomadsim.Token) bool { return t.AllowNamespace(ns, "list-jobs") }, "coordinator,candidate,operator"},
	{"list-jobs in another namespace", func(t *nomadsim.Token) bool { return t.AllowNamespace("batch", "list-jobs") }, "coordinator,candidate,operator"},
	{"submit-job in default", func(t *nomadsim.Token) bool { return t.AllowNamespace(ns, "submit-job") }, ""},
	{"read-logs in default", func(t *nomadsim.Token) bool { return t.AllowNamespace(ns, "read-logs") }, ""},
	{"alloc-lifecycle in default", func(t *nomadsim.Token) bool { return t.AllowNamespace(ns, "alloc-lifecycle") }, ""},
	// The autopilot health: the quorum gates (coordinator, `rollboot plan`) and a
	// Nomad server host's final go/no-go; never a client's agent.
	{"operator:read", func(t *nomadsim.Token) bool { return t.AllowOperator(false) }, "agent-server,coordinator,candidate,operator"},
	{"operator:write", func(t *nomadsim.Token) bool { return t.AllowOperator(true) }, ""},

	// Host records: written by their agent, read by everyone.
	{"read rollboot/hosts/x", v("rollboot/hosts/x", "read"), "agent,agent-server,coordinator,candidate,operator"},
	{"list rollboot/hosts/x", v("rollboot/hosts/x", "list"), "agent,agent-server,coordinator,candidate,operator"},
	{"write rollboot/hosts/x", v("rollboot/hosts/x", "write"), "agent,agent-server,coordinator,candidate"},
	{"destroy rollboot/hosts/x", v("rollboot/hosts/x", "destroy"), "coordinator,candidate,operator"}, // rollboot forget
	// Plans: written by the coordinator, watched by the agent.
	{"read rollboot/plan/x", v("rollboot/plan/x", "read"), "agent,agent-server,coordinator,candidate,operator"},
	{"list rollboot/plan/x", v("rollboot/plan/x", "list"), "agent,agent-server,coordinator,candidate,operator"},
	{"write rollboot/plan/x", v("rollboot/plan/x", "write"), "coordinator,candidate"},
	{"destroy rollboot/plan/x", v("rollboot/plan/x", "destroy"), "coordinator,candidate"},
	// Control: written by the CLI and the coordinator.
	{"read rollboot/control", v("rollboot/control", "read"), "coordinator,candidate,operator"},
	{"write rollboot/control", v("rollboot/control", "write"), "coordinator,candidate,operator"},
	{"destroy rollboot/control", v("rollboot/control", "destroy"), "coordinator,candidate"},
	// One variable per host for requests, cancels and releases.
	{"write rollboot/requests/x", v("rollboot/requests/x", "write"), "coordinator,candidate,operator"},
	{"destroy rollboot/requests/x", v("rollboot/requests/x", "destroy"), "coordinator,candidate,operator"},
	// History: written and pruned by the coordinator.
	{"list rollboot/history/x", v("rollboot/history/x", "list"), "coordinator,candidate,operator"},
	{"write rollboot/history/x", v("rollboot/history/x", "write"), "coordinator,candidate"},
	{"destroy rollboot/history/x", v("rollboot/history/x", "destroy"), "coordinator,candidate"},
	// The copies of the plans and records: written by the coordinator only,
	// never by a host (store/copies.go).
	{"write rollboot/copies/x", v("rollboot/copies/x", "write"), "coordinator,candidate"},
	// The stored policy: written by the operator only (policy apply), read by
	// the coordinator; the enforcement record written by the coordinator.
	{"read rollboot/policy", v("rollboot/policy", "read"), "coordinator,candidate,operator"},
	{"write rollboot/policy", v("rollboot/policy", "write"), "operator"},
	{"destroy rollboot/policy", v("rollboot/policy", "destroy"), ""},
	{"read rollboot/coordinator", v("rollboot/coordinator", "read"), "coordinator,candidate,operator"},
	{"write rollboot/coordinator", v("rollboot/coordinator", "write"), "coordinator,candidate"},
	// The failure budgets' halt state: written by the coordinator (failures,
	// halts) and the operator (rollboot resume lifts a halt).
	{"read rollboot/halts", v("rollboot/halts", "read"), "coordinator,candidate,operator"},
	{"write rollboot/halts", v("rollboot/halts", "write"), "coordinator,candidate,operator"},
	{"destroy rollboot/halts", v("rollboot/halts", "destroy"), "coordinator,candidate"},
	// The notification ledger: its parts written by the coordinator; the
	// single variable of version 1 deleted once moved to them.
	{"read rollboot/notify/7", v("rollboot/notify/7", "read"), "coordinator,candidate,operator"},
	{"write rollboot/notify/7", v("rollboot/notify/7", "write"), "coordinator,candidate"},
	{"write rollboot/notify/pause", v("rollboot/notify/pause", "write"), "coordinator,candidate"},
	{"destroy rollboot/notify", v("rollboot/notify", "destroy"), "coordinator,candidate"},
	// The election lock: every lock operation needs write.
	{"read rollboot/leader", v("rollboot/leader", "read"), "coordinator,candidate,operator"},
	{"write rollboot/leader (lock)", v("rollboot/leader", "write"), "coordinator,candidate"},
	// The server reboot locks: taken by the agents of server hosts only.
	{"read rollboot/serverlock/nomad-global", v("rollboot/serverlock/nomad-global", "read"), "agent-server,coordinator,candidate,operator"},
	{"write rollboot/serverlock/nomad-global (lock)", v("rollboot/serverlock/nomad-global", "write"), "agent-server,coordinator,candidate"},
	{"destroy rollboot/serverlock/nomad-global", v("rollboot/serverlock/nomad-global", "destroy"), "coordinator,candidate"},

	// Outside rollboot's state: nobody.
	{"read other/x", v("other/x", "read"), ""},
	{"write other/x", v("other/x", "write"), ""},
	{"read rollbootx/hosts/x", v("rollbootx/hosts/x", "read"), ""},
	{"read nomad/jobs/rollboot (the token variable)", v("nomad/jobs/rollboot", "read"), ""},
	{"write rollboot/hosts/x in another namespace", func(t *nomadsim.Token) bool {
		return t.AllowVariable("batch", "rollboot/hosts/x", "write")
	}, ""},
	{"read rollboot/control in another namespace", func(t *nomadsim.Token) bool {
		return t.AllowVariable("batch", "rollboot/control", "read")
	}, ""},
}

func TestPoliciesGrantExactlyWhatEachRoleCalls(t *testing.T) {
	for role := range policyFiles {
		tok := &nomadsim.Token{Name: role, Policies: []*nomadsim.Policy{loadPolicy(t, role)}}
		for _, c := range checks {
			want := false
			for _, r := range strings.Split(c.want, ",") {
				want = want || r == role
			}
			if got := c.ok(tok); got != want {
				t.Errorf("%s policy: %s: allowed = %v, want %v", role, c.what, got, want)
			}
		}
	}
}

// The candidate policy grants the union of the server hosts' agent policy and
// the coordinator policy (every host runs a candidate with it, servers
// included), and the server hosts' agent policy is the clients' one with the
// autopilot health and the server reboot locks.
func TestCandidateIsAgentPlusCoordinator(t *testing.T) {
	cand := newToken(loadPolicy(t, "candidate"))
	agent := newToken(loadPolicy(t, "agent"))
	server := newToken(loadPolicy(t, "agent-server"))
	coord := newToken(loadPolicy(t, "coordinator"))
	for _, c := range checks {
		if a, b := c.ok(cand), c.ok(server) || c.ok(coord); a != b {
			t.Errorf("%s: candidate policy %v, agent-server or coordinator policy %v", c.what, a, b)
		}
		serverOnly := strings.HasPrefix(c.what, "operator:read") || strings.Contains(c.what, "rollboot/serverlock/")
		if a, b := c.ok(server), c.ok(agent) || serverOnly && c.ok(server); a != b {
			t.Errorf("%s: agent-server policy %v, agent policy %v", c.what, a, c.ok(agent))
		}
	}
}

// Attaching both the agent and the coordinator policy to one token is NOT the
// same as the candidate policy: Nomad merges variable rules by path and the most
// specific matching path wins, so the agent's "rollboot/plan/*" (read) hides the
// coordinator's "rollboot/*" (write) and the coordinator could not write plans.
// The docs say to use the candidate policy; this keeps that advice true.
func TestAgentAndCoordinatorPoliciesDoNotCombine(t *testing.T) {
	both := &nomadsim.Token{Policies: []*nomadsim.Policy{loadPolicy(t, "agent"), loadPolicy(t, "coordinator")}}
	if both.AllowVariable(ns, "rollboot/plan/x", "write") {
		t.Error("agent+coordinator policies now combine; update the warning in deploy/acl and docs/deploy.md")
	}
}

// TestPoliciesAgainstEmulator runs the store's real calls through the emulator
// with ACLs on, one token per role.
func TestPoliciesAgainstEmulator(t *testing.T) {
	sim, err := nomadsim.New(nomadsim.Config{ACL: true, Clients: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The policies are applied and the tokens minted through the ACL API, as
	// `nomad acl policy apply` and `nomad acl token create` do.
	mgmtAPI := apiClient(t, sim.Address(), sim.ManagementToken())
	applyPolicies(t, mgmtAPI)
	client := func(role string) *api.Client {
		t.Helper()
		secret := sim.ManagementToken()
		if role != "management" {
			secret = mintToken(t, mgmtAPI, role)
		}
		c, err := api.NewClient(&api.Config{Address: sim.Address(), SecretID: secret})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	st := func(c *api.Client) *store.Store { return store.New(c.Variables(), "rollboot", ns) }
	denied := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: allowed, want permission denied", what)
		} else if !strings.Contains(err.Error(), "403") && !strings.Contains(strings.ToLower(err.Error()), "permission denied") {
			t.Errorf("%s: %v, want permission denied", what, err)
		}
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}

	mgmt := client("management")
	nodes, _, err := mgmt.Nodes().List(nil)
	if err != nil || len(nodes) == 0 {
		t.Fatalf("list nodes: %v (%d nodes)", err, len(nodes))
	}
	nodeID := nodes[0].ID

	// Agent: publish its record, read it back, watch its plan, learn who it is.
	ag := client("agent")
	agSt := st(ag)
	checkAgentRights(ctx, t, ag, agSt, nodes[0], allowed, denied)
	checkAgentCannotCoordinate(ctx, t, ag, agSt, nodeID, denied)

	// Coordinator: everything it reads and writes, the lock and node calls.
	co := client("coordinator")
	coSt := st(co)
	checkCoordinatorRights(ctx, t, co, coSt, nodeID, allowed, denied)
	checkNotifyLedgerRights(ctx, t, coSt, agSt, allowed, denied)

	// Operator: status reads, control writes, nothing else.
	op := client("operator")
	opSt := st(op)
	checkOperatorRights(ctx, t, op, opSt, nodeID, allowed, denied)

	// The stored policy: the operator applies it, the coordinator and the
	// agents only read it (or not at all).
	checkPolicyRights(ctx, t, opSt, coSt, st(ag), allowed, denied)
}

// checkAgentRights: the agent token publishes its host's record, watches its
// plan and learns who its host is (the local agent's health, the node of its
// name, a server's Serf member, its node), and reads no job and no agent's
// self.
func checkAgentRights(ctx context.Context, t *testing.T, ag *api.Client, agSt *store.Store, node *api.NodeListStub, allowed, denied func(string, error)) {
	t.Helper()
	nodeID := node.ID
	idx, err := agSt.PutHost(ctx, store.HostRecord{Host: "web-1", BootID: "b1"})
	allowed("agent: PutHost", err)
	_, err = agSt.PutHost(ctx, store.HostRecord{Host: "web-1", BootID: "b2", ModifyIndex: idx})
	allowed("agent: PutHost with CAS", err)
	_, err = agSt.Host(ctx, "web-1")
	allowed("agent: Host", err)
	_, _, err = agSt.WatchPlan(ctx, "web-1", 0, 0)
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("agent: WatchPlan before any plan: %v, want ErrNotFound", err)
	}
	_, err = agSt.PutPlan(ctx, store.Plan{Host: "web-1", Phase: store.PhasePending})
	denied("agent: PutPlan", err)
	_, err = ag.Agent().Health()
	allowed("agent: what its local agent runs (/v1/agent/health)", err)
	_, _, err = ag.Nodes().List(&api.QueryOptions{Filter: `Name == "` + node.Name + `"`, AllowStale: true})
	allowed("agent: its node by name", err)
	_, err = ag.Agent().Members()
	allowed("agent: its Nomad server's Serf member", err)
	_, _, err = ag.Nodes().Info(nodeID, nil)
	allowed("agent: read its node (final go/no-go)", err)
	_, err = ag.Agent().Self()
	denied("agent: /v1/agent/self", err)
	_, _, err = ag.Jobs().List(&api.QueryOptions{Namespace: ns})
	denied("agent: list jobs", err)
	_, err = ag.Nodes().ToggleEligibility(nodeID, false, nil)
	denied("agent: change eligibility", err)
}

// checkCoordinatorRights: the coordinator token reads and writes rollboot's
// state, takes the leader lock, and drains and gives back nodes; it does not
// read the agents' token variable.
func checkCoordinatorRights(ctx context.Context, t *testing.T, co *api.Client, coSt *store.Store, nodeID string, allowed, denied func(string, error)) {
	t.Helper()
	_, _, err := coSt.Hosts(ctx, 0, 0)
	allowed("coordinator: Hosts", err)
	_, err = coSt.Plans(ctx)
	allowed("coordinator: Plans", err)
	_, err = coSt.Control(ctx)
	allowed("coordinator: Control", err)
	_, err = coSt.PutPlan(ctx, store.Plan{Host: "web-1", Phase: store.PhasePending})
	allowed("coordinator: PutPlan", err)
	_, err = coSt.UpdateControl(ctx, func(c *store.Control) error { c.Paused = false; return nil })
	allowed("coordinator: UpdateControl", err)
	now := time.Now()
	for i := range 3 {
		rec := store.HistoryRecord{Host: fmt.Sprintf("web-%d", i), Outcome: "rebooted", Finished: now.Add(time.Duration(i) * time.Second)}
		allowed("coordinator: AppendHistory (with pruning)", coSt.AppendHistory(ctx, rec, 1))
	}
	h, err := coSt.History(ctx)
	allowed("coordinator: History", err)
	if len(h) != 1 {
		t.Errorf("history after pruning to 1: %d records", len(h))
	}
	lock, err := co.Locks(api.WriteOptions{Namespace: ns}, api.Variable{
		Namespace: ns, Path: coSt.LeaderPath(), Lock: &api.VariableLock{TTL: "15s", LockDelay: "15s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = lock.Acquire(ctx)
	allowed("coordinator: lock acquire", err)
	allowed("coordinator: lock renew", lock.Renew(ctx))
	allowed("coordinator: lock release", lock.Release(ctx))
	_, err = coSt.WatchLeader(ctx, 0, 0)
	allowed("coordinator: WatchLeader", err)
	_, _, err = co.Nodes().List(&api.QueryOptions{Filter: `NodePool == "default"`})
	allowed("coordinator: list nodes with filter", err)
	_, _, err = co.Nodes().Allocations(nodeID, nil)
	allowed("coordinator: node allocations", err)
	_, err = co.Nodes().UpdateDrainOpts(nodeID, &api.DrainOptions{DrainSpec: &api.DrainSpec{IgnoreSystemJobs: true}}, nil)
	allowed("coordinator: drain", err)
	_, err = co.Nodes().UpdateDrainOpts(nodeID, &api.DrainOptions{DrainSpec: nil, MarkEligible: true}, nil)
	allowed("coordinator: cancel drain", err)
	_, err = co.Nodes().ToggleEligibility(nodeID, true, nil)
	allowed("coordinator: eligibility", err)
	_, _, err = co.Variables().Read("nomad/jobs/rollboot", &api.QueryOptions{Namespace: ns})
	denied("coordinator: read nomad/jobs/rollboot", err)
	_, err = coSt.PutEnforcement(ctx, store.Enforcement{Leader: "c1", PolicyVersion: 1}, 0)
	allowed("coordinator: PutEnforcement", err)
}

// checkOperatorRights: the operator token reads rollboot's state and pauses
// the fleet, and writes no plan, host record or eligibility.
func checkOperatorRights(ctx context.Context, t *testing.T, op *api.Client, opSt *store.Store, nodeID string, allowed, denied func(string, error)) {
	t.Helper()
	_, _, err := opSt.Hosts(ctx, 0, 0)
	allowed("operator: Hosts", err)
	_, err = opSt.Plans(ctx)
	allowed("operator: Plans", err)
	_, err = opSt.UpdateControl(ctx, func(c *store.Control) error { c.Paused, c.PauseReason = true, "test"; return nil })
	allowed("operator: UpdateControl (pause)", err)
	ctl, err := opSt.Control(ctx)
	allowed("operator: Control", err)
	if !ctl.Paused {
		t.Error("operator: pause not stored")
	}
	p, err := opSt.Plan(ctx, "web-1")
	allowed("operator: Plan", err)
	p.Phase = store.PhaseDrained
	_, err = opSt.PutPlan(ctx, p)
	denied("operator: PutPlan", err)
	_, err = opSt.PutHost(ctx, store.HostRecord{Host: "web-9"})
	denied("operator: PutHost", err)
	_, err = op.Nodes().ToggleEligibility(nodeID, false, nil)
	denied("operator: eligibility", err)
}

// checkNotifyLedgerRights: the coordinator reads and writes the notification
// ledger's parts and deletes the single variable of version 1 it moves to
// them; the agent can do neither.
func checkNotifyLedgerRights(ctx context.Context, t *testing.T, coSt, agSt *store.Store, allowed, denied func(string, error)) {
	t.Helper()
	_, err := agSt.PutNotifyLedger(ctx, "7", map[string]string{"version": "2"}, 0)
	denied("agent: PutNotifyLedger", err)
	_, err = coSt.PutNotifyLedger(ctx, "7", map[string]string{"version": "2"}, 0)
	allowed("coordinator: PutNotifyLedger (a shard)", err)
	_, _, err = coSt.NotifyLedger(ctx, "7")
	allowed("coordinator: NotifyLedger (a shard)", err)
	idx, err := coSt.PutNotifyLedger(ctx, "", map[string]string{"version": "1"}, 0)
	allowed("coordinator: PutNotifyLedger (version 1)", err)
	err = agSt.DeleteNotifyLedger(ctx, "", idx)
	denied("agent: DeleteNotifyLedger", err)
	allowed("coordinator: DeleteNotifyLedger (version 1)", coSt.DeleteNotifyLedger(ctx, "", idx))
}

// checkPolicyRights: only the operator writes the stored policy; the
// coordinator reads and watches it; the agent neither; everyone who reads the
// status reads the enforcement record.
func checkPolicyRights(ctx context.Context, t *testing.T, opSt, coSt, agSt *store.Store, allowed, denied func(string, error)) {
	t.Helper()
	rec := store.PolicyRecord{PolicyVersion: store.PolicyVersion{Version: 1, Source: "group \"all\" {}\n", Filename: "p.hcl"}}
	_, err := coSt.PutPolicy(ctx, rec, 0)
	denied("coordinator: PutPolicy", err)
	_, err = agSt.PutPolicy(ctx, rec, 0)
	denied("agent: PutPolicy", err)
	_, err = opSt.PutPolicy(ctx, rec, 0)
	allowed("operator: PutPolicy", err)
	_, err = coSt.Policy(ctx)
	allowed("coordinator: Policy", err)
	_, err = coSt.WatchPolicy(ctx, 0, 0)
	allowed("coordinator: WatchPolicy", err)
	_, err = agSt.Policy(ctx)
	denied("agent: Policy", err)
	_, err = opSt.Policy(ctx)
	allowed("operator: Policy", err)
	_, err = opSt.Enforcement(ctx)
	allowed("operator: Enforcement", err)
}

// ---- (c) the embedded configurations load, (d) the job files parse -------------------

var jobFiles = []string{"rollboot.nomad.hcl", "rollboot-docker.nomad.hcl"}

// nodeName is the value substituted for {{ env "node.unique.name" }}.
const nodeName = "client-7.dc1"

// taskEnv is what Nomad's template `env` function sees on a client.
var taskEnv = map[string]string{
	"node.unique.name": nodeName,
	"node.unique.id":   "3f1c2a5e-0000-4000-8000-000000000007",
	"node.datacenter":  "dc1",
	"node.region":      "global",
	"attr.kernel.name": "linux",
	"NOMAD_JOB_NAME":   "rollboot",
	"NOMAD_NAMESPACE":  "default",
	"NOMAD_TASK_DIR":   "/local",
	// The pack's FleetLock listener: the group's static port on the host.
	"NOMAD_ADDR_fleetlock": "10.0.0.7:7777",
	// The coordinator's telemetry listener: the group's dynamic port.
	"NOMAD_ADDR_http": "10.0.0.9:27341",
}

// render executes a Nomad template with the functions rollboot's templates use,
// failing on any other function or on an env key not listed above.
func render(t *testing.T, name, data string, vars map[string]map[string]string) string {
	t.Helper()
	funcs := template.FuncMap{
		"env": func(k string) (string, error) {
			v, ok := taskEnv[k]
			if !ok {
				return "", fmt.Errorf("env %q: not known to the test; add a plausible value", k)
			}
			return v, nil
		},
		"nomadVar": func(path string) (map[string]string, error) {
			v, ok := vars[path]
			if !ok {
				return nil, fmt.Errorf("nomadVar %q: no such variable in the test", path)
			}
			return v, nil
		},
	}
	tmpl, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, nil); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out.String()
}

// jobTemplate is one template block of a job file.
type jobTemplate struct {
	destination string
	env         bool
	data        string
	perms       string
	pos         hcl.Range
}

// parseJob parses a job file as HCL and returns its body and template blocks.
// Attribute values that refer to variables (var.x, ${NOMAD_TASK_DIR}) are left
// alone; the template fields must be literal.
func parseJob(t *testing.T, path string) (*hclsyntax.Body, []jobTemplate) {
	t.Helper()
	return parseJobSource(t, path, read(t, path))
}

// parseJobSource is parseJob of a job file's text, such as a rendered pack.
func parseJobSource(t *testing.T, path string, src []byte) (*hclsyntax.Body, []jobTemplate) {
	t.Helper()
	f, diags := hclsyntax.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%s: %v", path, diags)
	}
	body := f.Body.(*hclsyntax.Body)
	var tmpls []jobTemplate
	var walk func(b *hclsyntax.Body)
	walk = func(b *hclsyntax.Body) {
		for _, blk := range b.Blocks {
			if blk.Type == "template" {
				var jt jobTemplate
				jt.pos = blk.DefRange()
				for name, a := range blk.Body.Attributes {
					val, diags := a.Expr.Value(nil)
					if diags.HasErrors() {
						t.Errorf("%s: template %s is not a literal: %v", a.SrcRange, name, diags)
						continue
					}
					switch name {
					case "destination":
						jt.destination = val.AsString()
					case "data":
						jt.data = val.AsString()
					case "env":
						jt.env = val.True()
					case "perms":
						jt.perms = val.AsString()
					}
				}
				tmpls = append(tmpls, jt)
			}
			walk(blk.Body)
		}
	}
	walk(body)
	return body, tmpls
}

// block returns the only block of type typ in b.
func block(t *testing.T, b *hclsyntax.Body, typ string) *hclsyntax.Body {
	t.Helper()
	var found *hclsyntax.Body
	for _, blk := range b.Blocks {
		if blk.Type == typ {
			if found != nil {
				t.Fatalf("%s: more than one %s block", blk.DefRange(), typ)
			}
			found = blk.Body
		}
	}
	if found == nil {
		t.Fatalf("%s: no %s block", b.SrcRange, typ)
	}
	return found
}

// literal evaluates an attribute that must be a literal (no variables).
func literal(t *testing.T, b *hclsyntax.Body, name string) string {
	t.Helper()
	a, ok := b.Attributes[name]
	if !ok {
		t.Fatalf("%s: no attribute %s", b.SrcRange, name)
	}
	val, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		t.Fatalf("%s: %v", a.SrcRange, diags)
	}
	switch {
	case val.Type().FriendlyName() == "number":
		return val.AsBigFloat().String()
	default:
		return val.AsString()
	}
}

func TestJobFiles(t *testing.T) {
	for _, name := range jobFiles {
		t.Run(name, func(t *testing.T) {
			path := deployPath("nomad", name)
			body, tmpls := parseJob(t, path)

			job := block(t, body, "job")
			if got := literal(t, job, "type"); got != "system" {
				t.Errorf("job type %q, want system", got)
			}
			if got := literal(t, job, "node_pool"); got != "all" {
				t.Errorf("node_pool %q, want all (every client, whatever its pool)", got)
			}
			if got := literal(t, block(t, job, "update"), "max_parallel"); got != "1" {
				t.Errorf("update.max_parallel = %s, want 1", got)
			}
			group := block(t, job, "group")
			if got := literal(t, block(t, group, "restart"), "mode"); got != "delay" {
				t.Errorf("restart.mode %q, want delay (never give up on a host)", got)
			}
			task := block(t, group, "task")
			if got := literal(t, block(t, task, "env"), "NOMAD_ADDR"); got != "http://127.0.0.1:4646" {
				t.Errorf("NOMAD_ADDR %q, want the local agent", got)
			}
			block(t, task, "resources")

			var cfgTmpl *jobTemplate
			for i := range tmpls {
				if strings.HasSuffix(tmpls[i].destination, ".hcl") {
					cfgTmpl = &tmpls[i]
				}
			}
			if cfgTmpl == nil {
				t.Fatalf("want a config template (*.hcl); got %d templates", len(tmpls))
			}
			checkIdentityToken(t, task, tmpls)
			checkNoCoordinatorSecrets(t, path)

			// The configuration: the task must be started with it.
			drv := block(t, task, "config")
			args := string(drv.Attributes["args"].SrcRange.SliceBytes(read(t, path)))
			if !strings.Contains(args, `"--config"`) || !strings.Contains(args, filepath.Base(cfgTmpl.destination)) {
				t.Errorf("task args %s do not pass --config %s", args, cfgTmpl.destination)
			}
			cfgSrc := render(t, name+":config", cfgTmpl.data, nil)
			cfg, err := config.LoadBytes([]byte(cfgSrc), name+":"+cfgTmpl.destination)
			if err != nil {
				t.Fatalf("embedded configuration:\n%s\n%v", cfgSrc, err)
			}
			if cfg.Agent.Host != nodeName {
				t.Errorf("agent.host = %q, want the node name %q", cfg.Agent.Host, nodeName)
			}
			if cfg.Coordinator.Enabled {
				t.Error("coordinator.enabled = true: the agents' job must not be coordinator candidates; rollboot-coordinator.nomad.hcl is")
			}
			checkStateMatchesPolicies(t, cfg, "agent")
			if cfg.Agent.BootIDFile != "/proc/sys/kernel/random/boot_id" {
				t.Errorf("boot_id_file %q", cfg.Agent.BootIDFile)
			}
			switch name {
			case "rollboot.nomad.hcl":
				if got := literal(t, task, "driver"); got != "raw_exec" {
					t.Errorf("driver %q", got)
				}
				if cfg.Agent.SentinelFile != "/var/run/reboot-required" {
					t.Errorf("sentinel_file %q", cfg.Agent.SentinelFile)
				}
				if strings.Join(cfg.Agent.Reboot.Command, " ") != "systemctl reboot" {
					t.Errorf("reboot command %q", cfg.Agent.Reboot.Command)
				}
			case "rollboot-docker.nomad.hcl":
				if got := literal(t, task, "driver"); got != "docker" {
					t.Errorf("driver %q", got)
				}
				// The image runs as an unprivileged user by default (Dockerfile);
				// nsenter into PID 1 needs root.
				if got := literal(t, task, "user"); got != "root" {
					t.Errorf("user %q: want root, the image's default user is unprivileged", got)
				}
				dc := block(t, task, "config")
				if literal(t, dc, "pid_mode") != "host" || literal(t, dc, "network_mode") != "host" {
					t.Error("docker: want pid_mode and network_mode host")
				}
				// The sentinel must be under a mounted host directory.
				m := block(t, dc, "mount")
				target := literal(t, m, "target")
				if !strings.HasPrefix(cfg.Agent.SentinelFile, target+"/") {
					t.Errorf("sentinel_file %q is not under the mount target %q", cfg.Agent.SentinelFile, target)
				}
				if strings.Join(cfg.Agent.Reboot.Command[:3], " ") != "nsenter -t 1" {
					t.Errorf("reboot command %q: want nsenter into PID 1", cfg.Agent.Reboot.Command)
				}
			}
		})
	}
}

// The rollboot config of the systemd unit loads, and the systemd host (a server
// host) is an agent whose state, server reboot locks included, the server
// hosts' agent policy covers.
func TestSystemdConfig(t *testing.T) {
	path := deployPath("systemd", "config.hcl")
	cfg, err := config.LoadBytes(read(t, path), path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Coordinator.Enabled {
		t.Error("systemd config: coordinator.enabled, but the docs give these hosts the rollboot-agent-server policy")
	}
	checkStateMatchesPolicies(t, cfg, "agent-server")
	if !newToken(loadPolicy(t, "agent-server")).AllowVariable(cfg.Nomad.Namespace, cfg.State.Prefix+"/serverlock/nomad-global", "write") {
		t.Errorf("rollboot-agent-server cannot take the server reboot locks under %s/serverlock/", cfg.State.Prefix)
	}

	unit := string(read(t, deployPath("systemd", "rollboot-agent.service")))
	// ProtectSystem=strict leaves only the state directory writable: the server
	// reboot locks' file must be in it, or a server host never reboots.
	if dir := filepath.Dir(cfg.Agent.ServerLockFile); dir != "/var/lib/rollboot" {
		t.Errorf("agent.server_lock_file %q is not in the unit's StateDirectory /var/lib/rollboot", cfg.Agent.ServerLockFile)
	}
	for _, want := range []string{
		"EnvironmentFile=-/etc/rollboot/env",
		"ExecStart=/usr/local/bin/rollboot agent --config /etc/rollboot/config.hcl",
		"Restart=always",
		"ProtectSystem=strict",
		"StateDirectory=rollboot",
	} {
		if !strings.Contains(unit, want) {
			t.Errorf("rollboot-agent.service: no %q", want)
		}
	}
	// Options that would break `systemctl reboot` or the Nomad API.
	for _, bad := range []string{"PrivateUsers=yes", "PrivateNetwork=yes", "User="} {
		for _, line := range strings.Split(unit, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), bad) {
				t.Errorf("rollboot-agent.service: %q", line)
			}
		}
	}
}

// checkStateMatchesPolicies: the policy for role covers the variables an agent of
// this configuration uses, in its namespace and under its prefix.
func checkStateMatchesPolicies(t *testing.T, cfg *config.Compiled, role string) {
	t.Helper()
	tok := &nomadsim.Token{Policies: []*nomadsim.Policy{loadPolicy(t, role)}}
	p, n := cfg.State.Prefix, cfg.Nomad.Namespace
	for _, c := range []struct{ path, capability string }{
		{p + "/hosts/h", "write"},
		{p + "/plan/h", "read"},
	} {
		if !tok.AllowVariable(n, c.path, c.capability) {
			t.Errorf("%s policy does not allow %s on %s/%s used by this configuration", role, c.capability, n, c.path)
		}
	}
	if cfg.Coordinator.Enabled && !tok.AllowVariable(n, p+"/leader", "write") {
		t.Errorf("%s policy does not allow the election lock %s/%s/leader", role, n, p)
	}
}

// The config templates need their interpolation rendered: loaded raw, the
// quotes of {{ env "..." }} break the HCL string. This keeps the test honest
// about substituting before loading.
func TestRawTemplateDoesNotLoad(t *testing.T) {
	_, tmpls := parseJob(t, deployPath("nomad", "rollboot.nomad.hcl"))
	for _, jt := range tmpls {
		if strings.HasSuffix(jt.destination, ".hcl") {
			if _, err := config.LoadBytes([]byte(jt.data), "raw.hcl"); err == nil {
				t.Error("the raw template loaded without rendering; the interpolation is not where expected")
			}
			return
		}
	}
	t.Fatal("no config template")
}
