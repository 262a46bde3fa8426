package doctor

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	shipped "github.com/rollboot/rollboot/deploy/acl"
	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/store"
)

// statusErr is an API error with an HTTP status, as api.UnexpectedResponseError.
type statusErr struct {
	code int
	msg  string
}

func (e statusErr) Error() string {
	return fmt.Sprintf("Unexpected response code: %d (%s)", e.code, e.msg)
}
func (e statusErr) StatusCode() int { return e.code }

var now = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func node(name string, drivers map[string]*api.DriverInfo) *api.NodeListStub {
	return &api.NodeListStub{ID: "id-" + name, Name: name, Datacenter: "dc1", NodePool: "default",
		Status: api.NodeStatusReady, SchedulingEligibility: api.NodeSchedulingEligible, Drivers: drivers}
}

func rawExec() map[string]*api.DriverInfo {
	return map[string]*api.DriverInfo{"raw_exec": {Detected: true, Healthy: true, HealthDescription: "Healthy"}}
}

func ptr[T any](v T) *T { return &v }

func agentJob(driver string) *api.Job {
	return &api.Job{ID: ptr("rollboot"), Type: ptr(api.JobTypeSystem), NodePool: ptr("all"), Datacenters: []string{"*"},
		TaskGroups: []*api.TaskGroup{{Name: ptr("agent"), Tasks: []*api.Task{{Name: "rollboot", Driver: driver}}}}}
}

func shippedPolicies(t *testing.T) map[string]*api.ACLPolicy {
	t.Helper()
	out := map[string]*api.ACLPolicy{}
	for _, n := range shipped.Names() {
		src, ok := shipped.Rules(n)
		if !ok {
			t.Fatalf("no rules for %s", n)
		}
		out[n] = &api.ACLPolicy{Name: n, Rules: string(src)}
	}
	return out
}

// healthy is a cluster with nothing to report: Nomad 1.11, ACLs on with a
// management token, the shipped policies, the broker on, three clients with
// raw_exec each running the agent, a server host with its agent, Consul
// healthy, clocks in sync, small Variables.
func healthy(t *testing.T) Inputs {
	t.Helper()
	nodes := []*api.NodeListStub{node("client-1", rawExec()), node("client-2", rawExec()), node("client-3", rawExec())}
	var allocs []*api.AllocationListStub
	var recs []store.HostRecord
	for i, n := range nodes {
		allocs = append(allocs, &api.AllocationListStub{ID: fmt.Sprintf("alloc-%d", i), NodeID: n.ID,
			ClientStatus: api.AllocClientStatusRunning, DesiredStatus: api.AllocDesiredStatusRun})
		recs = append(recs, store.HostRecord{Host: n.Name, NodeID: n.ID})
	}
	recs = append(recs, store.HostRecord{Host: "server-1", Servers: []store.Server{{Product: "consul", Cluster: "dc1", ID: "s1"}}})
	return Inputs{
		Options: Options{Namespace: "default", Prefix: "rollboot", AgentJob: "rollboot", AgentNamespace: "default"},
		Now:     now,
		Version: VersionInput{Self: &api.AgentSelf{Config: map[string]any{"Version": map[string]any{"Version": "1.11.2"}}}},
		ACL: ACLInput{
			Self:     &api.ACLToken{AccessorID: "acc-1", Name: "bootstrap", Type: "management"},
			Probes:   []Probe{{What: "list the nodes", Right: "node:read", Call: "GET /v1/nodes"}},
			Policies: shippedPolicies(t),
		},
		Nodes:     NodesInput{Nodes: nodes},
		Agent:     AgentJobInput{Job: agentJob("raw_exec"), Allocs: allocs},
		Hosts:     HostsInput{Records: recs},
		Servers:   []*api.AgentMember{{Name: "server-1.global", Tags: map[string]string{"build": "1.11.2"}}},
		Clusters:  []ClusterInput{{Product: health.Consul, Hosts: []string{"server-1"}, Health: health.ClusterHealth{Product: health.Consul, Cluster: "dc1", Healthy: true, FailureTolerance: 1}}},
		Clock:     ClockInput{Sent: now, Received: now.Add(10 * time.Millisecond), Date: now},
		Variables: VariablesInput{Sizes: []VariableSize{{Path: "rollboot/policy", Bytes: 900}}},
		Coordinator: CoordinatorInput{Policy: store.PolicyRecord{PolicyVersion: store.PolicyVersion{Version: 3}},
			Enforcement: store.Enforcement{Leader: "coord-1", PolicyVersion: 3, Since: now.Add(-time.Hour), LockIndex: 7}, LockIndex: 7},
	}
}

func problems(fs []Finding) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Severity >= Warning {
			out = append(out, f)
		}
	}
	return out
}

func TestHealthyClusterHasNoProblems(t *testing.T) {
	fs := Check(healthy(t))
	if p := problems(fs); len(p) > 0 {
		t.Fatalf("problems in a healthy cluster: %+v", p)
	}
	for _, c := range []string{CheckVersion, CheckACL, CheckToken, CheckRights, CheckPolicies, CheckDrivers, CheckAgentJob, CheckAgents, CheckClusters, CheckClock, CheckVariables, CheckCoordinator} {
		found := false
		for _, f := range fs {
			found = found || f.Check == c
		}
		if !found {
			t.Errorf("no finding of check %s: %+v", c, fs)
		}
	}
}

// Each misconfiguration is reported by its check, at its severity, with a
// fix; the exit status follows the errors.
func TestEachMisconfigurationIsReportedWithItsFix(t *testing.T) {
	for _, tt := range []struct {
		name     string
		mutate   func(in *Inputs)
		check    string
		severity Severity
		what     string // in the finding's What
		fix      string // in its Fix
	}{
		{name: "too-old Nomad", check: CheckVersion, severity: Error, what: "nomad 1.6.5 (the version of the agent", fix: "upgrade the Nomad servers",
			mutate: func(in *Inputs) {
				in.Version.Self = &api.AgentSelf{Config: map[string]any{"Version": map[string]any{"Version": "1.6.5"}}}
			}},
		{name: "too-old server build", check: CheckVersion, severity: Error, what: "the server build", fix: "1.7.0",
			mutate: func(in *Inputs) {
				in.Version.Self = &api.AgentSelf{Member: api.AgentMember{Tags: map[string]string{"build": "1.5.0"}}}
			}},
		{name: "no agent:read, an old server", check: CheckVersion, severity: Error, what: "nomad 1.6.0 (the server build", fix: "upgrade",
			mutate: func(in *Inputs) {
				in.Version = VersionInput{Err: statusErr{403, "Permission denied"}}
				in.Servers = append(in.Servers, &api.AgentMember{Name: "server-2.global", Tags: map[string]string{"build": "1.6.0"}})
				in.Hosts.Records = append(in.Hosts.Records, store.HostRecord{Host: "server-2"})
			}},
		{name: "no agent:read, no server build", check: CheckVersion, severity: Warning, what: "cannot read the Nomad agent's version", fix: "nomad version",
			mutate: func(in *Inputs) {
				in.Version = VersionInput{Err: statusErr{403, "Permission denied"}}
				in.Servers = nil
			}},
		{name: "version unknown", check: CheckVersion, severity: Warning, what: "does not say its version", fix: "nomad version",
			mutate: func(in *Inputs) { in.Version.Self = &api.AgentSelf{} }},
		{name: "no raw_exec on one client", check: CheckDrivers, severity: Warning, what: "node client-2 cannot run the rollboot agent: raw_exec not detected (disabled)", fix: `plugin "raw_exec"`,
			mutate: func(in *Inputs) {
				in.Nodes.Nodes[1].Drivers = map[string]*api.DriverInfo{"raw_exec": {HealthDescription: "disabled"}}
			}},
		{name: "no raw_exec anywhere", check: CheckDrivers, severity: Error, what: "no Nomad client can run the rollboot agent (raw_exec)", fix: `plugin "raw_exec"`,
			mutate: func(in *Inputs) {
				for _, n := range in.Nodes.Nodes {
					n.Drivers = map[string]*api.DriverInfo{"exec": {Detected: true, Healthy: true}}
				}
			}},
		{name: "docker job without privileged", check: CheckDrivers, severity: Error, what: "no Nomad client can run the rollboot agent (docker)", fix: "allow_privileged = true",
			mutate: func(in *Inputs) {
				in.Agent.Job = agentJob("docker")
				for _, n := range in.Nodes.Nodes {
					n.Drivers = map[string]*api.DriverInfo{"docker": {Detected: true, Healthy: true, Attributes: map[string]string{"driver.docker": "true"}}}
				}
			}},
		{name: "missing right", check: CheckRights, severity: Error, what: "the token cannot read the Nomad servers' health: it lacks operator:read", fix: "nomad acl token update -policy rollboot-operator acc-1",
			mutate: func(in *Inputs) {
				in.ACL.Probes = append(in.ACL.Probes, Probe{What: "read the Nomad servers' health", Right: "operator:read",
					Call: "GET /v1/operator/autopilot/health", Err: statusErr{403, "Permission denied"}})
			}},
		{name: "unknown token", check: CheckToken, severity: Error, what: "Nomad does not know the token", fix: "NOMAD_TOKEN",
			mutate: func(in *Inputs) { in.ACL = ACLInput{SelfErr: statusErr{403, "Permission denied"}} }},
		{name: "no token", check: CheckToken, severity: Warning, what: "anonymous token", fix: "rollboot-operator",
			mutate: func(in *Inputs) {
				in.ACL = ACLInput{Self: &api.ACLToken{AccessorID: "anonymous", Name: "Anonymous Token", Type: "client", Policies: []string{"anonymous"}}}
			}},
		{name: "ACLs off", check: CheckACL, severity: Warning, what: "ACLs are off", fix: "nomad acl bootstrap",
			mutate: func(in *Inputs) { in.ACL = ACLInput{Self: &api.ACLToken{AccessorID: "acls-disabled", Type: "client"}} }},
		{name: "policy changed", check: CheckPolicies, severity: Warning, what: "the ACL policy rollboot-coordinator differs from deploy/acl/rollboot-coordinator.policy.hcl: it lacks `node policy = \"write\"`", fix: "nomad acl policy apply rollboot-coordinator deploy/acl/rollboot-coordinator.policy.hcl",
			mutate: func(in *Inputs) {
				p := in.ACL.Policies["rollboot-coordinator"]
				p.Rules = strings.Replace(p.Rules, `policy = "write"`, `policy = "read"`, 1)
			}},
		{name: "policy missing", check: CheckPolicies, severity: Warning, what: "the ACL policy rollboot-agent is not in the cluster", fix: "nomad acl policy apply rollboot-agent deploy/acl/rollboot-agent.policy.hcl",
			mutate: func(in *Inputs) { in.ACL.Policies["rollboot-agent"] = nil }},
		{name: "agent and coordinator on one token", check: CheckPolicies, severity: Warning, what: "cannot write plans", fix: "rollboot-agent-candidate",
			mutate: func(in *Inputs) {
				in.ACL.Tokens = []*api.ACLTokenListStub{{AccessorID: "acc-2", Name: "both", Policies: []string{"rollboot-agent", "rollboot-coordinator"}}}
			}},
		{name: "agent token expires soon", check: CheckPolicies, severity: Warning, what: `token "agents" (rollboot-agent) expires at 2026-12-08T12:00:00Z`, fix: `nomad acl token create -type client -policy rollboot-agent -name "agents"`,
			mutate: func(in *Inputs) {
				in.ACL.Tokens = []*api.ACLTokenListStub{{AccessorID: "acc-3", Name: "agents", Policies: []string{"rollboot-agent"}, ExpirationTime: ptr(now.Add(48 * time.Hour))}}
			}},
		{name: "coordinator token expired", check: CheckPolicies, severity: Warning, what: `token "coord" (rollboot-coordinator) expired at`, fix: "-policy rollboot-coordinator",
			mutate: func(in *Inputs) {
				in.ACL.Tokens = []*api.ACLTokenListStub{{AccessorID: "acc-4", Name: "coord", Policies: []string{"rollboot-coordinator", "other"}, ExpirationTime: ptr(now.Add(-time.Minute))}}
			}},
		{name: "broker off, 500", check: CheckBroker, severity: Warning, what: "EventBroker not configured", fix: "enable_event_broker = true",
			mutate: func(in *Inputs) { in.Broker.Err = statusErr{500, "EventBroker not configured"} }},
		{name: "broker off, 200 then closed", check: CheckBroker, severity: Warning, what: "ends at once", fix: "enable_event_broker = true",
			mutate: func(in *Inputs) { in.Broker.Err = ErrStreamEnded }},
		{name: "node without agent", check: CheckAgents, severity: Warning, what: "node client-3 runs no rollboot agent (no running allocation of default/rollboot)", fix: "nomad job status -namespace default rollboot",
			mutate: func(in *Inputs) { in.Agent.Allocs[2].ClientStatus = api.AllocClientStatusFailed }},
		{name: "node without agent for want of a driver", check: CheckAgents, severity: Warning, what: "node client-3 runs no rollboot agent", fix: `plugin "raw_exec"`,
			mutate: func(in *Inputs) {
				in.Agent.Allocs = in.Agent.Allocs[:2]
				in.Nodes.Nodes[2].Drivers = nil
			}},
		{name: "agent without host record", check: CheckAgents, severity: Warning, what: "the agent on node client-2 runs but has published no host record", fix: "nomad alloc logs -namespace default -stderr alloc-1",
			mutate: func(in *Inputs) { in.Hosts.Records = append(in.Hosts.Records[:1], in.Hosts.Records[2:]...) }},
		{name: "server without agent", check: CheckAgents, severity: Warning, what: "the Nomad server server-2 has no rollboot agent", fix: "deploy/systemd/rollboot-agent.service",
			mutate: func(in *Inputs) {
				in.Servers = append(in.Servers, &api.AgentMember{Name: "server-2.global", Tags: map[string]string{"build": "1.11.2"}})
			}},
		{name: "agent job not registered", check: CheckAgentJob, severity: Error, what: "the agents' job default/rollboot is not registered", fix: "nomad job run -namespace default deploy/nomad/rollboot.nomad.hcl",
			mutate: func(in *Inputs) { in.Agent = AgentJobInput{} }},
		{name: "agent job stopped", check: CheckAgentJob, severity: Error, what: "is stopped", fix: "nomad job run",
			mutate: func(in *Inputs) { in.Agent.Job.Stop = ptr(true) }},
		{name: "no coordinator ever led", check: CheckCoordinator, severity: Error, what: "no coordinator has ever led here", fix: "rollboot-coordinator.nomad.hcl",
			mutate: func(in *Inputs) {
				in.Coordinator.Enforcement, in.Coordinator.EnforcementErr = store.Enforcement{}, store.ErrNotFound
			}},
		{name: "the leader is gone", check: CheckCoordinator, severity: Error, what: "no coordinator leads: coord-1, the last to lead", fix: "nomad job status rollboot-coordinator",
			mutate: func(in *Inputs) { in.Coordinator.LockIndex = 9 }},
		{name: "the stored policy cannot be used", check: CheckCoordinator, severity: Error, what: "the stored rollout policy (version 3) cannot be used: group \"a\": bad filter", fix: "rollboot policy apply FILE",
			mutate: func(in *Inputs) { in.Coordinator.CompileErr = errors.New(`group "a": bad filter`) }},
		{name: "no stored policy", check: CheckCoordinator, severity: Info, what: "no rollout policy is stored", fix: "rollboot policy apply FILE",
			mutate: func(in *Inputs) { in.Coordinator.PolicyErr = store.ErrNotFound }},
		{name: "Consul unreadable", check: CheckClusters, severity: Error, what: "cannot read the Consul cluster's health", fix: "operator:read",
			mutate: func(in *Inputs) {
				in.Clusters[0].Health = health.ClusterHealth{Product: health.Consul, Err: errors.New("Unexpected response code: 403 (Permission denied)")}
			}},
		{name: "Vault servers, no client", check: CheckClusters, severity: Error, what: "run Vault servers, but no Vault client is configured", fix: "VAULT_ADDR",
			mutate: func(in *Inputs) {
				in.Clusters = append(in.Clusters, ClusterInput{Product: health.Vault, Hosts: []string{"server-1"}, NoClient: true})
			}},
		{name: "local clock behind", check: CheckClock, severity: Warning, what: "this machine's clock is at least 10s behind the Nomad server's", fix: "NTP",
			mutate: func(in *Inputs) { in.Clock.Date = now.Add(10 * time.Second) }},
		{name: "host clock ahead", check: CheckClock, severity: Warning, what: "host client-1's clock runs at least 1m0s ahead", fix: "on client-1",
			mutate: func(in *Inputs) { in.Hosts.Records[0].RequestedAt = now.Add(time.Minute) }},
		{name: "Variable near the limit", check: CheckVariables, severity: Warning, what: "the Variable rollboot/control holds 50.0 KiB of Nomad's 64 KiB limit", fix: "rollboot control reset",
			mutate: func(in *Inputs) {
				in.Variables.Sizes = append(in.Variables.Sizes, VariableSize{Path: "rollboot/control", Bytes: 50 * 1024})
			}},
		{name: "Variable at the limit", check: CheckVariables, severity: Error, what: "rollboot/policy holds 63.0 KiB", fix: "rollboot policy apply",
			mutate: func(in *Inputs) { in.Variables.Sizes[0].Bytes = 63 * 1024 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := healthy(t)
			tt.mutate(&in)
			fs := Check(in)
			var got *Finding
			for i, f := range fs {
				if f.Check == tt.check && strings.Contains(f.What, tt.what) {
					got = &fs[i]
				}
			}
			if got == nil {
				t.Fatalf("no %s finding saying %q in:\n%s", tt.check, tt.what, dump(fs))
			}
			if got.Severity != tt.severity || !strings.Contains(got.Fix, tt.fix) {
				t.Errorf("finding %+v: want severity %s and a fix with %q", *got, tt.severity, tt.fix)
			}
			if Blocking(fs) != (tt.severity == Error) {
				t.Errorf("Blocking = %v with the most serious finding a %s", Blocking(fs), tt.severity)
			}
			if fs[0].Severity != tt.severity {
				t.Errorf("the most serious finding is not first: %s", dump(fs))
			}
		})
	}
}

func dump(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "  %s %s: %s (fix: %s)\n", f.Severity, f.Check, f.What, f.Fix)
	}
	return b.String()
}

// Nomad that does not answer at all is one error, not one per check.
func TestUnreachableNomadIsOneError(t *testing.T) {
	fs := Check(Inputs{Unreachable: errors.New("dial tcp 127.0.0.1:4646: connect: connection refused")})
	if len(fs) != 1 || fs[0].Severity != Error || !strings.Contains(fs[0].Fix, "NOMAD_ADDR") {
		t.Fatalf("findings %s: want one error pointing at NOMAD_ADDR", dump(fs))
	}
}

// The shipped rules are compared for the configured namespace and prefix,
// whatever the layout, comments and order of the cluster's copy.
func TestPolicyComparedForTheConfiguredPlace(t *testing.T) {
	src, _ := shipped.Rules("rollboot-operator")
	moved := strings.ReplaceAll(strings.ReplaceAll(string(src), `namespace "default"`, `namespace "ops"`), `"rollboot/`, `"rb/`)
	moved = strings.ReplaceAll(moved, `["read", "write"]`, `["write", "read"]`) // order does not matter
	o := Options{Namespace: "ops", Prefix: "rb"}
	if f, ok := comparePolicy("rollboot-operator", &api.ACLPolicy{Rules: "# moved\n" + moved}, o); !ok {
		t.Fatalf("the moved policy differs: %+v", f)
	}
	if f, ok := comparePolicy("rollboot-operator", &api.ACLPolicy{Rules: string(src)}, o); ok || !strings.Contains(f.What, `namespace "ops"`) {
		t.Fatalf("the default-place policy in a cluster configured for ops/rb: %+v, want it to differ", f)
	}
}

// The clusters read are the Consul and Vault clusters the records name, each
// once, with the hosts that serve it.
func TestServerClusters(t *testing.T) {
	got := serverClusters([]store.HostRecord{
		{Host: "s1", Servers: []store.Server{{Product: "nomad", Cluster: "global"}, {Product: "consul", Cluster: "dc1", ID: "a"}, {Product: "vault", Cluster: "v", ID: "x"}}},
		{Host: "s2", Servers: []store.Server{{Product: "consul", Cluster: "dc1", ID: "b"}}},
		{Host: "c1"},
	})
	if len(got) != 2 || got[0].Product != health.Consul || got[0].Cluster != "dc1" || strings.Join(got[0].Hosts, ",") != "s1,s2" ||
		got[1].Product != health.Vault || strings.Join(got[1].Hosts, ",") != "s1" {
		t.Fatalf("clusters %+v", got)
	}
}

// The holders of each rollboot policy: tokens, and the job a policy is
// attached to; a token expiring in a month is no warning.
func TestPolicyHolders(t *testing.T) {
	in := healthy(t)
	in.ACL.Tokens = []*api.ACLTokenListStub{
		{Name: "agents", Policies: []string{"rollboot-agent"}, ExpirationTime: ptr(now.Add(30 * 24 * time.Hour))},
		{Name: "ops", Policies: []string{"rollboot-operator", "unrelated"}},
	}
	in.ACL.Policies["rollboot-coordinator"].JobACL = &api.JobACL{Namespace: "default", JobID: "rollboot-coordinator"}
	fs := Check(in)
	if p := problems(fs); len(p) > 0 {
		t.Fatalf("problems: %s", dump(p))
	}
	want := `holders: rollboot-agent: token "agents"; rollboot-agent-candidate: no token or job; rollboot-agent-server: no token or job; rollboot-coordinator: job default/rollboot-coordinator; rollboot-operator: token "ops"`
	for _, f := range fs {
		if f.Check == CheckPolicies && f.Severity == Info {
			if f.What != want {
				t.Fatalf("holders: %q, want %q", f.What, want)
			}
			return
		}
	}
	t.Fatalf("no holders finding: %s", dump(fs))
}
