package nomadsim

import (
	"fmt"
	"net/http"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// Token is an ACL token. With ACLs enabled every request must carry a known secret
// in X-Nomad-Token or "Authorization: Bearer" (command/agent/http.go parseToken).
type Token struct {
	Name       string
	AccessorID string
	SecretID   string
	Management bool
	Policies   []*Policy
	// PolicyNames are the policies linked by name, as `nomad acl token create
	// -policy` links them (acl_endpoint.go); their rules are looked up on every
	// request.
	PolicyNames []string
	Global      bool
	CreateTime  time.Time
	CreateIndex uint64
	ModifyIndex uint64
	// claims: a task's workload identity stands for this token
	// (workloadid.go); nil for an ACL token. attached names the policies
	// attached to its job, which it may read (getPoliciesForIdentity).
	claims   *workloadClaims
	attached []string
}

// Policy is a Nomad ACL policy as written in HCL (acl/policy.go). Only the parts
// rollboot can touch are modelled: namespace (capabilities and variables), node,
// agent and operator.
type Policy struct {
	Namespaces []*NamespacePolicy `hcl:"namespace,block"`
	Node       *LevelPolicy       `hcl:"node,block"`
	Agent      *LevelPolicy       `hcl:"agent,block"`
	Operator   *LevelPolicy       `hcl:"operator,block"`
	Remain     hcl.Body           `hcl:",remain"`
}

// NamespacePolicy is a `namespace "name" { ... }` rule.
type NamespacePolicy struct {
	Name         string           `hcl:"name,label"`
	Policy       string           `hcl:"policy,optional"`
	Capabilities []string         `hcl:"capabilities,optional"`
	Variables    *VariablesPolicy `hcl:"variables,block"`
}

// VariablesPolicy is the `variables { path "x/*" { capabilities = [...] } }` block.
type VariablesPolicy struct {
	Paths []*VariablePathRule `hcl:"path,block"`
}

// VariablePathRule grants capabilities on variable paths matching a glob.
type VariablePathRule struct {
	Path         string   `hcl:"path,label"`
	Capabilities []string `hcl:"capabilities"`
}

// LevelPolicy is a `node`, `agent` or `operator` rule: deny, read or write.
type LevelPolicy struct {
	Policy string `hcl:"policy"`
}

// ParsePolicy parses a Nomad ACL policy written in HCL, as `nomad acl policy apply`
// accepts it. Unknown top-level blocks (job, quota, host_volume...) are ignored here
// because the emulator does not model them.
func ParsePolicy(filename string, src []byte) (*Policy, error) {
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	var p Policy
	if diags := gohcl.DecodeBody(f.Body, nil, &p); diags.HasErrors() {
		return nil, diags
	}
	for _, lp := range []*LevelPolicy{p.Node, p.Agent, p.Operator} {
		if lp != nil && lp.Policy != "deny" && lp.Policy != "read" && lp.Policy != "write" {
			return nil, fmt.Errorf("%s: invalid policy %q", filename, lp.Policy)
		}
	}
	return &p, nil
}

type aclState struct {
	enabled bool
	tokens  map[string]*Token // by secret
	mgmt    *Token
	// policies are the policies stored through the API, by name, and the
	// indexes of the policy and token tables (acl_endpoint.go).
	policies    map[string]*storedPolicy
	policyIndex uint64
	tokenIndex  uint64
	// identityKey signs the tasks' workload identities; keyID names it in
	// their header (workloadid.go).
	identityKey []byte
	keyID       string
}

func (a *aclState) init(s *Sim, enabled bool) {
	a.enabled = enabled
	a.tokens = map[string]*Token{}
	a.policies = map[string]*storedPolicy{}
	a.mgmt = &Token{Name: "bootstrap", AccessorID: s.uuidLocked(), SecretID: s.uuidLocked(), Management: true}
	a.identityKey, a.keyID = newIdentityKey(), s.uuidLocked()
	a.tokens[a.mgmt.SecretID] = a.mgmt
}

// ACLEnabled reports whether ACLs are enforced.
func (s *Sim) ACLEnabled() bool { return s.acl.enabled }

// ManagementToken is the secret of the bootstrap management token.
func (s *Sim) ManagementToken() string { return s.acl.mgmt.SecretID }

// CreateToken makes a client token with the given policies and returns its secret.
func (s *Sim) CreateToken(name string, policies ...*Policy) Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &Token{Name: name, AccessorID: s.uuidLocked(), SecretID: s.uuidLocked(), Policies: policies}
	s.acl.tokens[t.SecretID] = t
	return *t
}

// CreateManagementToken makes another management token.
func (s *Sim) CreateManagementToken(name string) Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &Token{Name: name, AccessorID: s.uuidLocked(), SecretID: s.uuidLocked(), Management: true}
	s.acl.tokens[t.SecretID] = t
	return *t
}

// anonymous stands for every request while ACLs are disabled: Nomad then allows all.
var anonymous = &Token{Name: "anonymous", Management: true}

// requestSecret is the request's token secret (command/agent/http.go
// parseToken: X-Nomad-Token first, then Authorization: Bearer).
func requestSecret(r *http.Request) string {
	secret := r.Header.Get("X-Nomad-Token")
	if secret == "" {
		if auth := r.Header.Get("Authorization"); strings.HasPrefix(auth, "Bearer ") {
			secret = strings.TrimSpace(strings.TrimPrefix(auth, "Bearer "))
		}
	}
	return secret
}

// validUUID is helper.IsUUID's pattern (helper/funcs.go): the servers look up
// only a UUID as an ACL token's secret (nomad/auth/auth.go resolveSecretToken).
var validUUID = regexp.MustCompile(`(?i)^[\da-f]{8}-[\da-f]{4}-[\da-f]{4}-[\da-f]{4}-[\da-f]{12}$`)

// tokenForSecretLocked authenticates a secret as the servers do
// (nomad/auth/auth.go Authenticate, resolveSecretToken): with ACLs off every
// request is allowed all; no secret is the anonymous token, whose rules are
// those of the policy named "anonymous" if one was stored (none by default);
// an unknown secret fails (ErrTokenNotFound for a UUID that is no token's,
// else the failed workload-identity check), and every RPC-backed endpoint
// answers that failure, after forwarding, with structs.ErrPermissionDenied:
// 403 "Permission denied" (e.g. nomad/node_endpoint.go Node.List: `if authErr
// != nil { return structs.ErrPermissionDenied }`).
func (s *Sim) tokenForSecretLocked(secret string) (*Token, error) {
	if !s.acl.enabled {
		return anonymous, nil
	}
	if secret == "" {
		// structs.AnonymousACLToken: Policies ["anonymous"].
		return s.resolvedLocked(&Token{Name: "anonymous", PolicyNames: []string{"anonymous"}}), nil
	}
	if !validUUID.MatchString(secret) {
		// ErrTokenInvalid: verified as a workload identity (workloadid.go).
		c, err := s.verifyIdentityLocked(secret)
		if err != nil {
			return nil, errPermissionDenied
		}
		return s.workloadTokenLocked(c), nil
	}
	t, ok := s.acl.tokens[secret]
	if !ok {
		return nil, errPermissionDenied
	}
	return s.resolvedLocked(t), nil
}

// tokenLocked resolves the token of a request to an RPC-backed endpoint
// (tokenForSecretLocked): an unknown secret is 403 "Permission denied".
func (s *Sim) tokenLocked(r *http.Request) (*Token, error) {
	return s.tokenForSecretLocked(requestSecret(r))
}

// agentTokenLocked resolves the token of a request that the agent answers
// itself, without an RPC (/v1/agent/self, /v1/agent/host, a client's own
// /v1/client/metadata): command/agent/http.go ResolveToken asks the local
// server (nomad/auth/auth.go ResolveToken, resolveTokenFromSnapshotCache) or
// client, where an unknown secret is structs.ErrTokenNotFound, which wrap turns
// into 403 "ACL token not found".
func (s *Sim) agentTokenLocked(r *http.Request) (*Token, error) {
	t, err := s.tokenLocked(r)
	if err != nil {
		return nil, errTokenNotFound
	}
	return t, nil
}

// accessorIdentity is how Nomad records who made a change (AuthenticatedIdentity.String).
func (t *Token) accessorIdentity() string {
	if t.claims != nil {
		return "alloc:" + t.claims.AllocationID
	}
	if t.AccessorID == "" {
		return "anonymous"
	}
	return "token:" + t.AccessorID
}

func levelAllows(lp *LevelPolicy, write bool) bool {
	if lp == nil {
		return false
	}
	switch lp.Policy {
	case "write":
		return true
	case "read":
		return !write
	}
	return false
}

// levelAllowed merges the rules of every policy: deny wins, then the highest level
// (acl/acl.go NewACL merges policies this way).
func (t *Token) levelAllowed(pick func(*Policy) *LevelPolicy, write bool) bool {
	if t.Management {
		return true
	}
	allowed := false
	for _, p := range t.Policies {
		lp := pick(p)
		if lp == nil {
			continue
		}
		if lp.Policy == "deny" {
			return false
		}
		if levelAllows(lp, write) {
			allowed = true
		}
	}
	return allowed
}

// AllowNode is node:read or node:write (acl.AllowNodeRead / AllowNodeWrite).
func (t *Token) AllowNode(write bool) bool {
	return t.levelAllowed(func(p *Policy) *LevelPolicy { return p.Node }, write)
}

// AllowAgent is agent:read or agent:write.
func (t *Token) AllowAgent(write bool) bool {
	return t.levelAllowed(func(p *Policy) *LevelPolicy { return p.Agent }, write)
}

// AllowOperator is operator:read or operator:write.
func (t *Token) AllowOperator(write bool) bool {
	return t.levelAllowed(func(p *Policy) *LevelPolicy { return p.Operator }, write)
}

// namespacePolicies returns the rules that apply to ns: an exact name wins over a
// glob; among globs the closest match wins (acl/acl.go findClosestMatchingGlob).
func (t *Token) namespacePolicies(ns string) []*NamespacePolicy {
	var exact, glob []*NamespacePolicy
	bestGlob := -1
	for _, p := range t.Policies {
		for _, np := range p.Namespaces {
			if np.Name == ns {
				exact = append(exact, np)
				continue
			}
			if ok, _ := path.Match(np.Name, ns); ok {
				// Closest glob: fewest characters the wildcard had to cover.
				score := len(np.Name)
				if score > bestGlob {
					bestGlob, glob = score, []*NamespacePolicy{np}
				} else if score == bestGlob {
					glob = append(glob, np)
				}
			}
		}
	}
	if len(exact) > 0 {
		return exact
	}
	return glob
}

// expandNamespaceCaps turns a coarse namespace policy into capabilities
// (acl/policy.go expandNamespacePolicy): read includes read-job, write adds submit-job.
func expandNamespaceCaps(np *NamespacePolicy) []string {
	caps := append([]string(nil), np.Capabilities...)
	switch np.Policy {
	case "read":
		caps = append(caps, "list-jobs", "read-job", "read-job-scaling")
	case "write":
		caps = append(caps, "list-jobs", "read-job", "read-job-scaling", "submit-job", "dispatch-job", "read-logs", "alloc-lifecycle")
	case "deny":
		caps = append(caps, "deny")
	}
	return caps
}

// AllowNamespace reports whether the token has capability c in namespace ns.
func (t *Token) AllowNamespace(ns, c string) bool {
	if t.Management {
		return true
	}
	has := false
	for _, np := range t.namespacePolicies(ns) {
		for _, got := range expandNamespaceCaps(np) {
			if got == "deny" {
				return false
			}
			if got == c {
				has = true
			}
		}
	}
	return has
}

// variableCaps returns the variable capabilities the token has on ns/p. Path rules
// are globs; the longest matching rule wins (acl/acl.go AllowVariableOperation uses
// the closest match). A namespace `policy = "read"` grants read and list on every
// path, `policy = "write"` also write and destroy (acl/policy.go
// expandNamespacePolicy adds a "*" variables rule for coarse policies).
func (t *Token) variableCaps(ns, p string) map[string]bool {
	out := map[string]bool{}
	if t.Management {
		for _, c := range []string{"read", "list", "write", "destroy"} {
			out[c] = true
		}
		return out
	}
	best := -1
	var bestCaps []string
	exact := false
	for _, np := range t.namespacePolicies(ns) {
		rules := []*VariablePathRule{}
		switch np.Policy {
		case "read":
			rules = append(rules, &VariablePathRule{Path: "*", Capabilities: []string{"read", "list"}})
		case "write":
			rules = append(rules, &VariablePathRule{Path: "*", Capabilities: []string{"read", "list", "write", "destroy"}})
		}
		if np.Variables != nil {
			rules = append(rules, np.Variables.Paths...)
		}
		for _, rule := range rules {
			if !globMatch(rule.Path, p) {
				continue
			}
			exact = exact || rule.Path == p
			score := len(strings.TrimSuffix(rule.Path, "*"))
			if score > best {
				best, bestCaps = score, append([]string(nil), rule.Capabilities...)
			} else if score == best {
				bestCaps = append(bestCaps, rule.Capabilities...)
			}
		}
	}
	if !exact && t.claims.implicitWorkloadRead(ns, p) {
		// A workload's implicit read and list of its own nomad/jobs paths
		// comes before any glob rule (workloadid.go).
		bestCaps = []string{"read", "list"}
	}
	for _, c := range bestCaps {
		if c == "deny" {
			return map[string]bool{}
		}
		out[c] = true
		if c == "read" {
			out["list"] = true // read implies list (acl/policy.go expandVariablesCapabilities)
		}
	}
	return out
}

// AllowVariable reports whether the token has capability c on variable ns/p.
func (t *Token) AllowVariable(ns, p, c string) bool {
	return t.variableCaps(ns, p)[c]
}

// globMatch matches Nomad's variable path globs: '*' matches any run of characters,
// including slashes.
func globMatch(pattern, s string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == s
	}
	parts := strings.Split(pattern, "*")
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for i, part := range parts[1:] {
		if i == len(parts)-2 {
			return strings.HasSuffix(s, part)
		}
		k := strings.Index(s, part)
		if k < 0 {
			return false
		}
		s = s[k+len(part):]
	}
	return true
}

// Tokens lists the tokens by name (for `rollboot sim` to print).
func (s *Sim) Tokens() []Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Token, 0, len(s.acl.tokens))
	for _, t := range s.acl.tokens {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// authorize resolves the token of r for an RPC-backed endpoint (tokenLocked)
// and checks allow; it writes the 403 itself and returns nil when the request
// must stop.
func (s *Sim) authorize(w http.ResponseWriter, r *http.Request, allow func(*Token) bool) *Token {
	return s.authorizeWith(w, r, s.tokenLocked, allow)
}

// authorizeAgent is authorize for an endpoint the agent answers itself
// (agentTokenLocked).
func (s *Sim) authorizeAgent(w http.ResponseWriter, r *http.Request, allow func(*Token) bool) *Token {
	return s.authorizeWith(w, r, s.agentTokenLocked, allow)
}

func (s *Sim) authorizeWith(w http.ResponseWriter, r *http.Request, resolve func(*http.Request) (*Token, error), allow func(*Token) bool) *Token {
	s.mu.Lock()
	t, err := resolve(r)
	s.mu.Unlock()
	if err != nil {
		simhttp.WriteErr(w, err)
		return nil
	}
	if allow != nil && !allow(t) {
		simhttp.WriteErr(w, errPermissionDenied)
		return nil
	}
	return t
}
