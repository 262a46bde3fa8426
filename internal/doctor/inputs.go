package doctor

import (
	"context"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/store"
)

// Inputs are everything the checks look at, read once (Read). A read that
// failed leaves its error beside the value; the check that needs it reports
// it.
type Inputs struct {
	Options Options
	Now     time.Time
	// Unreachable: Nomad did not answer at all; nothing else was read.
	Unreachable error

	Version VersionInput
	ACL     ACLInput
	Broker  BrokerInput
	Nodes   NodesInput
	Agent   AgentJobInput
	Hosts   HostsInput
	// Servers are the Nomad servers' Serf members (GET /v1/agent/members).
	Servers     []*api.AgentMember
	ServersErr  error
	Clusters    []ClusterInput
	Clock       ClockInput
	Variables   VariablesInput
	Coordinator CoordinatorInput
}

// VersionInput is the Nomad agent's self (GET /v1/agent/self).
type VersionInput struct {
	Self *api.AgentSelf
	Err  error
}

// ACLInput is the token in use and, with a management token, rollboot's
// policies as the cluster has them.
type ACLInput struct {
	// Self is the token in use (GET /v1/acl/token/self, which answers with
	// ACLs off too).
	Self    *api.ACLToken
	SelfErr error
	// Probes are the reads rollboot's CLI makes, each with the error it got:
	// a refusal is a missing right.
	Probes []Probe
	// Policies are the cluster's rollboot policies by name (nil value: not
	// there), read with a management token only; PoliciesErr why they could
	// not be read.
	Policies    map[string]*api.ACLPolicy
	PoliciesErr error
	// Tokens are the cluster's tokens (management token only).
	Tokens []*api.ACLTokenListStub
}

// Probe is one read made with the token in use.
type Probe struct {
	// What the read is for, the right it needs and the call.
	What, Right, Call string
	Err               error
}

// BrokerInput is the outcome of a short subscription to the event stream:
// Err is how it failed (the subscription refused, or the stream ended at
// once), nil when it stayed open for the probe's time.
type BrokerInput struct {
	Err     error
	Skipped bool // not probed (the daemons follow the stream themselves)
}

// NodesInput is the node list (GET /v1/nodes: its stubs carry the drivers).
type NodesInput struct {
	Nodes []*api.NodeListStub
	Err   error
}

// AgentJobInput is the agents' system job and its allocations.
type AgentJobInput struct {
	Job       *api.Job // nil: not registered (JobErr nil) or not read
	JobErr    error
	Allocs    []*api.AllocationListStub
	AllocsErr error
}

// HostsInput are rollboot's host records.
type HostsInput struct {
	Records []store.HostRecord
	Err     error
}

// ClusterInput is a Consul or Vault cluster's health read, for a product some
// host record names a server of.
type ClusterInput struct {
	Product health.Product
	// Cluster is its name in the records (the Consul datacenter, the Vault
	// cluster's name).
	Cluster string
	// Hosts are the hosts whose records name a server of it.
	Hosts  []string
	Health health.ClusterHealth
	// NoClient: no client of it is configured (its address unset).
	NoClient bool
	// HandOver is whether the token in use may hand the cluster's
	// leadership over, as the coordinator does before a leader's reboot.
	HandOver RightInput
}

// RightInput is whether the token in use may hand a cluster's leadership over
// (Consul: operator:write, for POST /v1/operator/raft/transfer-leader; Vault:
// update and sudo on sys/step-down). Known is false when it cannot be told
// (the token's policies cannot be read); Detail says what was read.
type RightInput struct {
	Known, Allowed bool
	Detail         string
	Err            error
}

// ClockInput is one answer of Nomad's and the local clock around it.
type ClockInput struct {
	Sent, Received time.Time
	Date           time.Time // the answer's Date header; zero: none seen
}

// VariablesInput are the sizes of rollboot's Variables.
type VariablesInput struct {
	Sizes []VariableSize
	Err   error
}

// VariableSize is one Variable's size as Nomad counts it against its limit.
type VariableSize struct {
	Path  string
	Bytes int
}

// Source reads the inputs: the narrow view of Nomad (and Consul and Vault)
// the checks need. Nomad implements it over nomad/api.
type Source interface {
	AgentSelf(ctx context.Context) (*api.AgentSelf, error)
	TokenSelf(ctx context.Context) (*api.ACLToken, error)
	// Probes makes the CLI's reads with the token in use.
	Probes(ctx context.Context, o Options) []Probe
	// Policies reads the policies named (nil for one not there) and lists the
	// tokens: management only.
	Policies(ctx context.Context, names []string) (map[string]*api.ACLPolicy, []*api.ACLTokenListStub, error)
	// Broker subscribes to the event stream for wait at most.
	Broker(ctx context.Context, wait time.Duration) error
	Nodes(ctx context.Context) ([]*api.NodeListStub, error)
	AgentJob(ctx context.Context, name, namespace string) (*api.Job, error)
	AgentAllocs(ctx context.Context, name, namespace string) ([]*api.AllocationListStub, error)
	Hosts(ctx context.Context) ([]store.HostRecord, error)
	ServerMembers(ctx context.Context) ([]*api.AgentMember, error)
	// ClusterHealth reads a Consul or Vault cluster's health; ok false when
	// no client of it is configured.
	ClusterHealth(ctx context.Context, p health.Product, cluster string) (h health.ClusterHealth, ok bool)
	// HandOverRight reads whether the token in use may hand a Consul or
	// Vault cluster's leadership over (a client of it is configured).
	HandOverRight(ctx context.Context, p health.Product) RightInput
	// Clock is the latest answer's Date header and the local times around it.
	Clock() ClockInput
	// Coordinator reads the stored policy and the leader's word.
	Coordinator(ctx context.Context) CoordinatorInput
	VariableSizes(ctx context.Context) ([]VariableSize, error)
}

// ReadOptions say what Read leaves out.
type ReadOptions struct {
	Options
	// BrokerWait is how long the event stream must stay open to count as
	// working (default DefaultBrokerWait); SkipBroker leaves the probe out.
	BrokerWait time.Duration
	SkipBroker bool
	// SkipCoordinator leaves out whether a coordinator leads: the leader
	// checking itself.
	SkipCoordinator bool
}

// DefaultBrokerWait is how long the event stream must stay open: a broker
// that is off refuses the subscription or ends it at once, well within it.
const DefaultBrokerWait = 2 * time.Second

// Read reads the inputs through src.
func Read(ctx context.Context, src Source, o ReadOptions, now func() time.Time) Inputs {
	in := Inputs{Options: o.Options}
	in.Version.Self, in.Version.Err = src.AgentSelf(ctx)
	if in.Version.Err != nil && statusOf(in.Version.Err) == 0 {
		// No answer at all (no HTTP status): nothing else will get one.
		in.Unreachable, in.Now = in.Version.Err, now()
		return in
	}
	in.ACL = readACL(ctx, src, o.Options)
	if o.SkipBroker {
		in.Broker.Skipped = true
	} else {
		wait := o.BrokerWait
		if wait <= 0 {
			wait = DefaultBrokerWait
		}
		in.Broker.Err = src.Broker(ctx, wait)
	}
	in.Nodes.Nodes, in.Nodes.Err = src.Nodes(ctx)
	if o.AgentJob != "" {
		in.Agent.Job, in.Agent.JobErr = src.AgentJob(ctx, o.AgentJob, o.AgentNamespace)
		if in.Agent.Job != nil {
			in.Agent.Allocs, in.Agent.AllocsErr = src.AgentAllocs(ctx, o.AgentJob, o.AgentNamespace)
		}
	}
	in.Hosts.Records, in.Hosts.Err = src.Hosts(ctx)
	if o.SkipCoordinator {
		in.Coordinator.Skipped = true
	} else {
		in.Coordinator = src.Coordinator(ctx)
	}
	in.Servers, in.ServersErr = src.ServerMembers(ctx)
	for _, sc := range serverClusters(in.Hosts.Records) {
		h, ok := src.ClusterHealth(ctx, sc.Product, sc.Cluster)
		sc.Health, sc.NoClient = h, !ok
		if ok {
			sc.HandOver = src.HandOverRight(ctx, sc.Product)
		}
		in.Clusters = append(in.Clusters, sc)
	}
	in.Variables.Sizes, in.Variables.Err = src.VariableSizes(ctx)
	in.Clock = src.Clock()
	in.Now = now()
	return in
}

// readACL reads the token in use, probes its rights, and with a management
// token reads rollboot's policies.
func readACL(ctx context.Context, src Source, o Options) ACLInput {
	var a ACLInput
	a.Self, a.SelfErr = src.TokenSelf(ctx)
	if a.SelfErr != nil || aclsOff(a.Self) {
		return a
	}
	a.Probes = src.Probes(ctx, o)
	if a.Self.Type == "management" {
		a.Policies, a.Tokens, a.PoliciesErr = src.Policies(ctx, ShippedPolicyNames())
	}
	return a
}

// serverClusters are the Consul and Vault clusters the host records name a
// server of, each with those hosts, in the order first named.
func serverClusters(recs []store.HostRecord) []ClusterInput {
	var out []ClusterInput
	at := map[store.Server]int{}
	for _, r := range recs {
		for _, s := range r.Servers {
			p := health.Product(s.Product)
			if p != health.Consul && p != health.Vault {
				continue
			}
			k := store.Server{Product: s.Product, Cluster: s.Cluster}
			i, ok := at[k]
			if !ok {
				i = len(out)
				at[k] = i
				out = append(out, ClusterInput{Product: p, Cluster: s.Cluster})
			}
			if h := out[i].Hosts; len(h) == 0 || h[len(h)-1] != r.Host {
				out[i].Hosts = append(out[i].Hosts, r.Host)
			}
		}
	}
	return out
}
