package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/api"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/deadline"
	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/parallel"
	"github.com/rollboot/rollboot/internal/store"
)

// Nomad is the Source over the Nomad API (and Consul's and Vault's, when
// their clients are given). Every method only reads.
type Nomad struct {
	Client *api.Client
	Store  *store.Store
	// Consul and Vault reach those clusters' servers; nil: not configured.
	Consul *consulapi.Client
	Vault  *vaultapi.Client
	// Dates records the Date headers of Client's answers (NomadClient); nil:
	// the clock is not checked against Nomad's.
	Dates *Dates
	// Namespace is rollboot's Variables' namespace.
	Namespace string
}

// NomadClient builds a Nomad client for the configuration, whose answers'
// Date headers go to the returned Dates, with a deadline on every request.
func NomadClient(cfg *config.Compiled) (*api.Client, *Dates, error) {
	ac := cfg.Nomad.APIConfig()
	c, err := deadline.NomadClient(ac)
	if err != nil {
		return nil, nil, fmt.Errorf("nomad client for %s: %w", cfg.Nomad.Address, err)
	}
	d := &Dates{Next: ac.HttpClient.Transport}
	ac.HttpClient.Transport = d // the client keeps ac's http.Client
	return c, d, nil
}

// Dates is an http.RoundTripper that keeps, of the answers it passes on, the
// Date header of the one with the shortest round trip (the tightest bound on
// the server's clock) and the local times around it.
type Dates struct {
	Next http.RoundTripper
	mu   sync.Mutex
	best ClockInput
}

// RoundTrip passes req on and records the answer's Date.
func (d *Dates) RoundTrip(req *http.Request) (*http.Response, error) {
	sent := time.Now()
	resp, err := d.Next.RoundTrip(req)
	received := time.Now()
	if err != nil {
		return resp, err
	}
	if date, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
		d.mu.Lock()
		if d.best.Date.IsZero() || received.Sub(sent) < d.best.Received.Sub(d.best.Sent) {
			d.best = ClockInput{Sent: sent, Received: received, Date: date}
		}
		d.mu.Unlock()
	}
	return resp, nil
}

// Clock returns the recorded answer.
func (n Nomad) Clock() ClockInput {
	if n.Dates == nil {
		return ClockInput{}
	}
	n.Dates.mu.Lock()
	defer n.Dates.mu.Unlock()
	return n.Dates.best
}

func (n Nomad) q(ctx context.Context, ns string) *api.QueryOptions {
	return (&api.QueryOptions{Namespace: ns}).WithContext(ctx)
}

// AgentSelf is GET /v1/agent/self, through the raw API: Agent().Self() turns
// the error into text, and Read tells a refusal (a status) from no answer.
func (n Nomad) AgentSelf(ctx context.Context) (*api.AgentSelf, error) {
	var self api.AgentSelf
	if _, err := n.Client.Raw().Query("/v1/agent/self", &self, n.q(ctx, "")); err != nil {
		return nil, err
	}
	return &self, nil
}

// TokenSelf is GET /v1/acl/token/self.
func (n Nomad) TokenSelf(ctx context.Context) (*api.ACLToken, error) {
	t, _, err := n.Client.ACLTokens().Self(n.q(ctx, ""))
	return t, err
}

// Probes makes the reads rollboot's CLI makes, each needing one right.
func (n Nomad) Probes(ctx context.Context, o Options) []Probe {
	probes := []Probe{{What: "list the nodes", Right: "node:read", Call: "GET /v1/nodes"}}
	_, _, probes[0].Err = n.Client.Nodes().List((&api.QueryOptions{Filter: `ID == ""`}).WithContext(ctx)) // a list that matches no node
	for _, v := range []string{"policy", "control"} {
		p := o.Prefix + "/" + v
		_, _, err := n.Client.Variables().Read(p, n.q(ctx, o.Namespace))
		if errors.Is(err, api.ErrVariablePathNotFound) {
			err = nil
		}
		probes = append(probes, Probe{What: "read rollboot's state", Right: fmt.Sprintf("variables read on %s in namespace %s", p, o.Namespace),
			Call: "GET /v1/var/" + p, Err: err})
	}
	if o.AgentJob != "" {
		_, _, err := n.Client.Jobs().Allocations(o.AgentJob, false, n.q(ctx, o.AgentNamespace))
		probes = append(probes, Probe{What: "see which nodes run the agent", Right: "read-job in namespace " + o.AgentNamespace,
			Call: fmt.Sprintf("GET /v1/job/%s/allocations", o.AgentJob), Err: err})
	}
	_, _, err := n.Client.Operator().AutopilotServerHealth(n.q(ctx, ""))
	probes = append(probes, Probe{What: "read the Nomad servers' health", Right: "operator:read",
		Call: "GET /v1/operator/autopilot/health", Err: err})
	return probes
}

// Policies reads the named ACL policies and lists the tokens.
func (n Nomad) Policies(ctx context.Context, names []string) (map[string]*api.ACLPolicy, []*api.ACLTokenListStub, error) {
	out := map[string]*api.ACLPolicy{}
	for _, name := range names {
		p, _, err := n.Client.ACLPolicies().Info(name, n.q(ctx, ""))
		switch {
		case statusOf(err) == http.StatusNotFound:
			out[name] = nil
		case err != nil:
			return nil, nil, fmt.Errorf("read ACL policy %s: %w", name, err)
		default:
			out[name] = p
		}
	}
	tokens, _, err := n.Client.ACLTokens().List(n.q(ctx, ""))
	if err != nil {
		return out, nil, fmt.Errorf("list ACL tokens: %w", err)
	}
	return out, tokens, nil
}

// Broker subscribes to the node events for wait: nil when the subscription
// stays open (or delivers), the refusal or ErrStreamEnded otherwise.
func (n Nomad) Broker(ctx context.Context, wait time.Duration) error {
	sub, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	events, err := n.Client.EventStream().Stream(sub, map[api.Topic][]string{api.TopicNode: {"*"}}, 0, &api.QueryOptions{})
	if err != nil {
		if ctx.Err() == nil && sub.Err() != nil {
			return nil // the answer's head took the whole wait: it was not refused
		}
		return err
	}
	for {
		select {
		case <-sub.Done():
			return ctx.Err() // the wait ended with the stream open
		case ev, ok := <-events:
			switch {
			case sub.Err() != nil:
				return ctx.Err()
			case !ok, ev.Err != nil && (errors.Is(ev.Err, io.EOF) || errors.Is(ev.Err, io.ErrUnexpectedEOF)):
				return ErrStreamEnded
			case ev.Err != nil:
				return ev.Err
			}
			return nil // it delivers
		}
	}
}

// Nodes is GET /v1/nodes: the stubs carry each node's drivers.
func (n Nomad) Nodes(ctx context.Context) ([]*api.NodeListStub, error) {
	nodes, _, err := n.Client.Nodes().List(n.q(ctx, ""))
	return nodes, err
}

// AgentJob reads the agents' job: nil and no error when it is not registered.
func (n Nomad) AgentJob(ctx context.Context, name, namespace string) (*api.Job, error) {
	j, _, err := n.Client.Jobs().Info(name, n.q(ctx, namespace))
	if statusOf(err) == http.StatusNotFound {
		return nil, nil
	}
	return j, err
}

// AgentAllocs lists the agents' job's allocations.
func (n Nomad) AgentAllocs(ctx context.Context, name, namespace string) ([]*api.AllocationListStub, error) {
	allocs, _, err := n.Client.Jobs().Allocations(name, false, n.q(ctx, namespace))
	return allocs, err
}

// Coordinator reads the stored policy and the leader's word.
func (n Nomad) Coordinator(ctx context.Context) CoordinatorInput {
	return readCoordinator(ctx, n.Store)
}

// Hosts reads rollboot's host records.
func (n Nomad) Hosts(ctx context.Context) ([]store.HostRecord, error) {
	recs, _, err := n.Store.Hosts(ctx, 0, 0)
	return recs, err
}

// ServerMembers are the Nomad servers' Serf members (GET /v1/agent/members):
// their names and build tags.
func (n Nomad) ServerMembers(ctx context.Context) ([]*api.AgentMember, error) {
	var m api.ServerMembers
	if _, err := n.Client.Raw().Query("/v1/agent/members", &m, n.q(ctx, "")); err != nil {
		return nil, err
	}
	return m.Members, nil
}

// ClusterHealth reads a Consul or Vault cluster's health as the quorum gates
// read it (package health).
func (n Nomad) ClusterHealth(ctx context.Context, p health.Product, cluster string) (health.ClusterHealth, bool) {
	switch {
	case p == health.Consul && n.Consul != nil:
		return health.ReadConsul(ctx, n.Consul.Operator(), cluster), true
	case p == health.Vault && n.Vault != nil:
		return health.ReadVault(ctx, n.Vault.Sys(), nil), true
	}
	return health.ClusterHealth{Product: p, Cluster: cluster}, false
}

// HandOverRight reads whether the token in use may hand leadership over:
// Vault answers for itself (sys/capabilities-self on sys/step-down); Consul
// has no such endpoint, so the token's own policies are read
// (acl/token/self, then each policy, which needs acl:read) and searched for
// operator = "write", or the built-in global-management policy.
func (n Nomad) HandOverRight(ctx context.Context, p health.Product) RightInput {
	switch {
	case p == health.Vault && n.Vault != nil:
		caps, err := n.Vault.Sys().CapabilitiesSelfWithContext(ctx, "sys/step-down")
		if err != nil {
			return RightInput{Err: err}
		}
		return VaultStepDownRight(caps)
	case p == health.Consul && n.Consul != nil:
		return consulHandOverRight(n.Consul.ACL(), (&consulapi.QueryOptions{}).WithContext(ctx))
	}
	return RightInput{Detail: "no client configured"}
}

// VaultStepDownRight: Vault's step-down needs update and sudo on
// sys/step-down (vault/logical_system_paths.go marks the path sudo).
func VaultStepDownRight(caps []string) RightInput {
	has := func(c string) bool { return slices.Contains(caps, c) }
	return RightInput{Known: true, Allowed: has("root") || (has("update") && has("sudo")),
		Detail: "capabilities on sys/step-down: " + strings.Join(caps, ", ")}
}

// consulACL is the part of Consul's ACL API the hand-over check reads.
type consulACL interface {
	TokenReadSelf(q *consulapi.QueryOptions) (*consulapi.ACLToken, *consulapi.QueryMeta, error)
	PolicyRead(id string, q *consulapi.QueryOptions) (*consulapi.ACLPolicy, *consulapi.QueryMeta, error)
}

// operatorWrite matches an operator rule that grants write.
var operatorWrite = regexp.MustCompile(`(?m)^\s*operator\s*=\s*"write"`)

func consulHandOverRight(acl consulACL, q *consulapi.QueryOptions) RightInput {
	tok, _, err := acl.TokenReadSelf(q)
	if err != nil {
		if strings.Contains(err.Error(), "ACL support disabled") {
			return RightInput{Known: true, Allowed: true, Detail: "Consul's ACLs are off"}
		}
		return RightInput{Err: err}
	}
	var names []string
	for _, l := range tok.Policies {
		if l.Name == "global-management" {
			return RightInput{Known: true, Allowed: true, Detail: "policy global-management"}
		}
		pol, _, err := acl.PolicyRead(l.ID, q)
		if err != nil || pol == nil {
			return RightInput{Detail: fmt.Sprintf("policy %s cannot be read (acl:read)", l.Name)}
		}
		if operatorWrite.MatchString(pol.Rules) {
			return RightInput{Known: true, Allowed: true, Detail: "policy " + l.Name + " has operator = \"write\""}
		}
		names = append(names, l.Name)
	}
	if len(tok.Roles) > 0 || len(tok.ServiceIdentities) > 0 || len(tok.NodeIdentities) > 0 {
		return RightInput{Detail: "the token's roles and identities are not read"}
	}
	return RightInput{Known: true, Detail: "policies: " + strings.Join(names, ", ")}
}

// variableReaders bounds the Variables read at once.
const variableReaders = 4

// VariableSizes reads every Variable under rollboot's prefix and measures it
// as Nomad does: the sum of its keys' and values' lengths.
func (n Nomad) VariableSizes(ctx context.Context) ([]VariableSize, error) {
	prefix := n.Store.Prefix() + "/"
	metas, _, err := n.Client.Variables().PrefixList(prefix, n.q(ctx, n.Namespace))
	if errors.Is(err, api.ErrVariablePathNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sizes, err := parallel.Map(len(metas), variableReaders, func(i int) (VariableSize, error) {
		v, _, err := n.Client.Variables().Read(metas[i].Path, n.q(ctx, n.Namespace))
		switch {
		case errors.Is(err, api.ErrVariablePathNotFound):
			return VariableSize{}, nil // deleted since the list
		case err != nil:
			return VariableSize{}, fmt.Errorf("read %s: %w", metas[i].Path, err)
		}
		return VariableSize{Path: metas[i].Path, Bytes: itemsSize(v.Items)}, nil
	})
	if err != nil {
		return nil, err
	}
	kept := sizes[:0]
	for _, v := range sizes {
		if v.Path != "" {
			kept = append(kept, v)
		}
	}
	return kept, nil
}

func itemsSize(items api.VariableItems) int {
	n := 0
	for k, v := range items {
		n += len(k) + len(v)
	}
	return n
}
