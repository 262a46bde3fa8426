package deploytest

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// The split of roles: the agents' jobs hold the narrow agent token and are not
// coordinator candidates; the coordinator job, in its own namespace, is the only
// holder of the coordinator token (and of the Consul and Vault hand-over tokens).

// policyName is the name the docs apply a policy file under
// (`nomad acl policy apply <name> <file>`): the file name without .policy.hcl.
func policyName(role string) string {
	return strings.TrimSuffix(policyFiles[role], ".policy.hcl")
}

func apiClient(t *testing.T, addr, secret string) *api.Client {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: addr, SecretID: secret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// applyPolicies stores every shipped policy file through the ACL API, as
// `nomad acl policy apply -description ... <name> <file>` does.
func applyPolicies(t *testing.T, mgmt *api.Client) {
	t.Helper()
	for role, file := range policyFiles {
		p := &api.ACLPolicy{Name: policyName(role), Description: "rollboot " + role, Rules: string(read(t, deployPath("acl", file)))}
		if _, err := mgmt.ACLPolicies().Upsert(p, nil); err != nil {
			t.Fatalf("apply %s: %v", file, err)
		}
	}
}

// mintToken creates a client token with the role's policy through the ACL API, as
// `nomad acl token create -type client -policy <name>` does, and returns its secret.
func mintToken(t *testing.T, mgmt *api.Client, role string) string {
	t.Helper()
	tok, _, err := mgmt.ACLTokens().Create(&api.ACLToken{Name: "rollboot-" + role, Type: "client", Policies: []string{policyName(role)}}, nil)
	if err != nil {
		t.Fatalf("create %s token: %v", role, err)
	}
	return tok.SecretID
}

// checkAgentCannotCoordinate: with the agent token, every step that changes
// another host is refused: control, history, the election lock, drains and
// eligibility, and deleting records.
func checkAgentCannotCoordinate(ctx context.Context, t *testing.T, ag *api.Client, st *store.Store, nodeID string, denied func(string, error)) {
	t.Helper()
	_, err := st.UpdateControl(ctx, func(c *store.Control) error { c.Paused = true; return nil })
	denied("agent: UpdateControl", err)
	err = st.AppendHistory(ctx, store.HistoryRecord{Host: "web-1", Outcome: "rebooted", Finished: time.Now()}, 10)
	denied("agent: AppendHistory", err)
	lock, err := ag.Locks(api.WriteOptions{Namespace: ns}, api.Variable{
		Namespace: ns, Path: st.LeaderPath(), Lock: &api.VariableLock{TTL: "15s", LockDelay: "15s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = lock.Acquire(ctx)
	denied("agent: lock acquire", err)
	_, err = ag.Nodes().UpdateDrainOpts(nodeID, &api.DrainOptions{DrainSpec: &api.DrainSpec{IgnoreSystemJobs: true}}, nil)
	denied("agent: drain", err)
	_, err = ag.Nodes().ToggleEligibility(nodeID, false, nil)
	denied("agent: eligibility", err)
	_, err = ag.Variables().Delete(st.LeaderPath(), &api.WriteOptions{Namespace: ns})
	denied("agent: delete the leader variable", err)
}

// checkNoCoordinatorSecrets: an agents' job never carries the coordinator's
// Consul or Vault tokens, nor the coordinator's token variable.
func checkNoCoordinatorSecrets(t *testing.T, path string) {
	t.Helper()
	for i, line := range strings.Split(string(read(t, path)), "\n") {
		code := strings.TrimSpace(line)
		if strings.HasPrefix(code, "#") {
			continue
		}
		for _, bad := range []string{"CONSUL_HTTP_TOKEN", "VAULT_TOKEN", "nomad/jobs/rollboot-coordinator"} {
			if strings.Contains(code, bad) {
				t.Errorf("%s:%d: an agents' job holds %s; only the coordinator job may", path, i+1, bad)
			}
		}
	}
}

func TestCoordinatorJobFile(t *testing.T) {
	path := deployPath("nomad", "rollboot-coordinator.nomad.hcl")
	body, tmpls := parseJob(t, path)
	job := block(t, body, "job")
	if got := literal(t, job, "type"); got != "service" {
		t.Errorf("job type %q, want service", got)
	}
	jobNS := literal(t, job, "namespace")
	group := block(t, job, "group")
	if got := literal(t, group, "count"); got != "2" {
		t.Errorf("count = %s, want 2 (one leads, one waits to take over)", got)
	}
	if got := literal(t, block(t, group, "migrate"), "max_parallel"); got != "1" {
		t.Errorf("migrate.max_parallel = %s, want 1 (a drain never takes both instances)", got)
	}
	distinct := false
	for _, b := range job.Blocks {
		if b.Type == "constraint" {
			if a, ok := b.Body.Attributes["operator"]; ok {
				v, _ := a.Expr.Value(nil)
				distinct = distinct || v.AsString() == "distinct_hosts"
			}
		}
	}
	if !distinct {
		t.Error("no distinct_hosts constraint: both instances could share a host and its reboot")
	}
	task := block(t, group, "task")
	if got := literal(t, task, "driver"); got == "raw_exec" {
		t.Errorf("driver %q: the coordinator needs no host access", got)
	}

	var cfgTmpl *jobTemplate
	for i := range tmpls {
		if strings.HasSuffix(tmpls[i].destination, ".hcl") {
			cfgTmpl = &tmpls[i]
		}
	}
	if cfgTmpl == nil {
		t.Fatalf("want a config template; got %d templates", len(tmpls))
	}
	checkIdentityToken(t, task, tmpls)

	cfg, err := config.LoadBytes([]byte(render(t, "coordinator:config", cfgTmpl.data, nil)), path)
	if err != nil {
		t.Fatal(err)
	}
	if jobNS == cfg.Nomad.Namespace {
		t.Errorf("the coordinator job runs in rollboot's state namespace %q: give it its own, so its token variable is apart from the agents'", jobNS)
	}
	tok := loadPolicy(t, "coordinator")
	for _, c := range []struct{ path, capability string }{
		{cfg.State.Prefix + "/plan/h", "write"},
		{cfg.State.Prefix + "/control", "write"},
		{cfg.State.Prefix + "/leader", "write"},
		{cfg.State.Prefix + "/hosts/h", "read"},
		{cfg.State.Prefix + "/policy", "read"},
		{cfg.State.Prefix + "/coordinator", "write"},
	} {
		tk := newToken(tok)
		if !tk.AllowVariable(cfg.Nomad.Namespace, c.path, c.capability) {
			t.Errorf("coordinator policy does not allow %s on %s/%s used by the coordinator job", c.capability, cfg.Nomad.Namespace, c.path)
		}
	}
	checkCoordinatorTelemetry(t, group, cfg)
	if cfg.Coordinator.LeaderTransferDenied != "continue" {
		t.Errorf("leader_transfer_denied %q: without a management token (never given) \"continue\" keeps server reboots going", cfg.Coordinator.LeaderTransferDenied)
	}
}

// The agent token, minted from the shipped agent policy, may not read the
// coordinator's token variable in the coordinator's namespace, nor in the
// agents' own: only the coordinator job's workload identity reads it.
func TestAgentPolicyCannotReachCoordinatorToken(t *testing.T) {
	for _, role := range []string{"agent", "agent-server", "operator"} {
		tk := newToken(loadPolicy(t, role))
		for _, n := range []string{"rollboot", ns} {
			if tk.AllowVariable(n, "nomad/jobs/rollboot-coordinator", "read") {
				t.Errorf("%s policy reads %s/nomad/jobs/rollboot-coordinator", role, n)
			}
		}
	}
}

func newToken(p *nomadsim.Policy) *nomadsim.Token {
	return &nomadsim.Token{Policies: []*nomadsim.Policy{p}}
}

// Every deploy/ file that docs/deploy.md names exists, and every policy the docs
// apply is applied under the name the job files and tests use.
func TestDeployDocNamesExistingFiles(t *testing.T) {
	doc := string(read(t, filepath.Join(root, "docs", "deploy.md")))
	for _, m := range regexp.MustCompile("deploy/[a-z]+/[A-Za-z0-9._-]+").FindAllString(doc, -1) {
		m = strings.TrimRight(m, ".")
		if _, err := os.Stat(filepath.Join(root, m)); err != nil {
			t.Errorf("docs/deploy.md names %s: %v", m, err)
		}
	}
	// The jobs' policies are attached to the jobs (their identities are their
	// tokens); only the server hosts, outside Nomad, get tokens.
	attached := map[string]string{"agent": "-namespace default -job rollboot \\\n  rollboot-agent ",
		"coordinator": "-namespace rollboot -job rollboot-coordinator \\\n  rollboot-coordinator "}
	for _, role := range []string{"agent", "agent-server", "coordinator", "operator"} {
		if a, ok := attached[role]; ok && !strings.Contains(doc, a) {
			t.Errorf("docs/deploy.md: %s is not applied attached to its job (%q)", policyName(role), a)
		}
		want := "nomad acl token create -type client -name \"" + policyName(role) + " <host>\" -policy " + policyName(role)
		if role == "agent-server" && !strings.Contains(doc, want) {
			t.Errorf("docs/deploy.md: no %q", want)
		}
		if !strings.Contains(doc, policyName(role)+" deploy/acl/"+policyFiles[role]) {
			t.Errorf("docs/deploy.md does not apply %s as %s", policyFiles[role], policyName(role))
		}
	}
}

// checkIdentityToken: the task's Nomad token is its own workload identity
// (identity { env = true }, the default identity), with the rights of the
// policy setup attaches to the job; no template pastes a stored token.
func checkIdentityToken(t *testing.T, task *hclsyntax.Body, tmpls []jobTemplate) {
	t.Helper()
	id := block(t, task, "identity")
	if a, ok := id.Attributes["env"]; !ok {
		t.Error("identity without env: want env = true (NOMAD_TOKEN is the task's identity)")
	} else if v, diags := a.Expr.Value(nil); diags.HasErrors() || !v.True() {
		t.Errorf("%s: identity.env: want true (NOMAD_TOKEN is the task's identity)", a.SrcRange)
	}
	if _, named := id.Attributes["name"]; named {
		t.Error("identity has a name: NOMAD_TOKEN carries only the default identity")
	}
	for _, tm := range tmpls {
		if strings.Contains(tm.data, "NOMAD_TOKEN") || strings.Contains(tm.data, ".token") {
			t.Errorf("%s: template %s writes a stored token; the task's identity is its token", tm.pos, tm.destination)
		}
	}
}
