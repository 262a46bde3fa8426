package nomadsim

import (
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// The ACL policy and token endpoints, as command/agent/acl_endpoint.go serves them
// and nomad/acl_endpoint.go decides them, so that tests apply the shipped policy
// files and mint tokens exactly as an operator does (`nomad acl policy apply`,
// `nomad acl token create`). Not modelled: roles, auth methods, binding rules,
// one-time tokens, bootstrap and expiry. Policies attached to jobs (JobACL) grant
// their rules to the jobs' workload identities (workloadid.go).

// storedPolicy is a policy stored by name, with its parsed rules.
type storedPolicy struct {
	api.ACLPolicy
	parsed *Policy
}

// validPolicyName is Nomad's rule for policy names (nomad/structs/acl.go
// ValidPolicyName).
var validPolicyName = regexp.MustCompile(`^[a-zA-Z0-9-]{1,128}$`)

// Limits of nomad/structs/acl.go (maxPolicyDescriptionLength, maxTokenNameLength).
const (
	maxPolicyDescriptionLength = 256
	maxTokenNameLength         = 256
)

var (
	// errACLDisabled is nomad/acl_endpoint.go aclDisabled.
	errACLDisabled = simhttp.Code(http.StatusBadRequest, "ACL support disabled")
	// errACLTokenNotFound is the 404 of aclTokenQuery.
	errACLTokenNotFound = simhttp.Code(http.StatusNotFound, "ACL token not found")
)

func (s *Sim) registerACLRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/acl/policies", methods(s.handleACLPolicies, http.MethodGet))
	mux.HandleFunc("/v1/acl/policy/", s.handleACLPolicy)
	mux.HandleFunc("/v1/acl/tokens", methods(s.handleACLTokens, http.MethodGet))
	mux.HandleFunc("/v1/acl/token", methods(s.handleACLTokenUpsert, http.MethodPut, http.MethodPost))
	mux.HandleFunc("/v1/acl/token/", s.handleACLToken)
}

// aclToken resolves the caller for an ACL endpoint: 400 while ACLs are off (every
// ACL RPC starts with `if !a.srv.config.ACLEnabled { return aclDisabled }`), and
// with manage it must be a management token (UpsertPolicies, DeletePolicies,
// UpsertTokens, DeleteTokens, ListTokens: `!aclObj.IsManagement()` is
// ErrPermissionDenied). It writes the error itself and returns nil then.
func (s *Sim) aclToken(w http.ResponseWriter, r *http.Request, manage bool) *Token {
	if !s.acl.enabled {
		simhttp.WriteErr(w, errACLDisabled)
		return nil
	}
	return s.authorize(w, r, func(t *Token) bool { return !manage || t.Management })
}

// handleACLPolicies is GET /v1/acl/policies (ACLPoliciesRequest, ACL.ListPolicies):
// a management token sees every policy, any other token only the policies it
// holds (getPolicyAuthorizationFunc). ?prefix= filters by name. The index is the
// policy table's.
func (s *Sim) handleACLPolicies(w http.ResponseWriter, r *http.Request) {
	t := s.aclToken(w, r, false)
	if t == nil {
		return
	}
	prefix := r.URL.Query().Get("prefix")
	s.blockingRead(w, r, func() (any, uint64, error) {
		out := []*api.ACLPolicyListStub{}
		for _, name := range s.policyNamesLocked() {
			if !strings.HasPrefix(name, prefix) || !t.holdsPolicy(name) {
				continue
			}
			p := s.acl.policies[name]
			out = append(out, &api.ACLPolicyListStub{Name: p.Name, Description: p.Description, JobACL: p.JobACL,
				CreateIndex: p.CreateIndex, ModifyIndex: p.ModifyIndex})
		}
		return out, s.acl.policyIndex, nil
	})
}

// handleACLPolicy is /v1/acl/policy/<name> (ACLPolicySpecificRequest): GET, PUT or
// POST (upsert), DELETE.
func (s *Sim) handleACLPolicy(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/v1/acl/policy/")
	if name == "" {
		simhttp.WriteError(w, http.StatusBadRequest, "Missing Policy Name")
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.aclPolicyQuery(w, r, name)
	case http.MethodPut, http.MethodPost:
		s.aclPolicyUpdate(w, r, name)
	case http.MethodDelete:
		s.aclPolicyDelete(w, r, name)
	default:
		simhttp.WriteError(w, http.StatusMethodNotAllowed, "Invalid method")
	}
}

// aclPolicyQuery: ACL.GetPolicy lets a management token read any policy, and
// another token only "anonymous" and the policies it holds (403 otherwise, even
// for a policy that does not exist); a missing policy is 404 "ACL policy not found".
func (s *Sim) aclPolicyQuery(w http.ResponseWriter, r *http.Request, name string) {
	t := s.aclToken(w, r, false)
	if t == nil {
		return
	}
	if name != "anonymous" && !t.holdsPolicy(name) {
		simhttp.WriteErr(w, errPermissionDenied)
		return
	}
	s.blockingRead(w, r, func() (any, uint64, error) {
		p, ok := s.acl.policies[name]
		if !ok {
			return nil, 0, &indexedError{err: simhttp.Code(http.StatusNotFound, "ACL policy not found"), index: s.acl.policyIndex}
		}
		out := p.ACLPolicy
		return &out, p.ModifyIndex, nil
	})
}

// aclPolicyUpdate: the body's Name must match the path (400 "ACL policy name does
// not match request path"); ACL.UpsertPolicies needs a management token and
// validates the policy (ACLPolicy.Validate: name, rules parsed strictly,
// description length), 400 "policy 0 invalid: ..." otherwise.
func (s *Sim) aclPolicyUpdate(w http.ResponseWriter, r *http.Request, name string) {
	var in api.ACLPolicy
	if err := decodeBody(r, &in); err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	if in.Name != name {
		simhttp.WriteError(w, http.StatusBadRequest, "ACL policy name does not match request path")
		return
	}
	if s.aclToken(w, r, true) == nil {
		return
	}
	var problems []string
	if !validPolicyName.MatchString(in.Name) {
		problems = append(problems, "invalid name '"+in.Name+"'")
	}
	parsed, err := ParsePolicy(in.Name, []byte(in.Rules))
	if err != nil {
		problems = append(problems, "failed to parse rules: "+err.Error())
	}
	if len(in.Description) > maxPolicyDescriptionLength {
		problems = append(problems, "description longer than 256")
	}
	problems = append(problems, validateJobACL(in.JobACL)...)
	if len(problems) > 0 {
		simhttp.WriteError(w, http.StatusBadRequest, "policy 0 invalid: "+strings.Join(problems, "; "))
		return
	}
	s.mu.Lock()
	idx := s.bumpLocked()
	stored := &storedPolicy{ACLPolicy: api.ACLPolicy{Name: in.Name, Description: in.Description, Rules: in.Rules,
		JobACL: in.JobACL, CreateIndex: idx, ModifyIndex: idx}, parsed: parsed}
	if old, ok := s.acl.policies[name]; ok {
		stored.CreateIndex = old.CreateIndex
	}
	s.acl.policies[name] = stored
	s.acl.policyIndex = idx
	s.aclChangedLocked("", false) // an ACLPolicy event (eventstream.go)
	s.mu.Unlock()
	setIndex(w, idx)
	w.WriteHeader(http.StatusOK)
}

// aclPolicyDelete: ACL.DeletePolicies needs a management token. Deleting a policy
// that does not exist succeeds (the state store's delete skips missing names), and
// tokens naming a deleted policy simply lose its rules.
func (s *Sim) aclPolicyDelete(w http.ResponseWriter, r *http.Request, name string) {
	if s.aclToken(w, r, true) == nil {
		return
	}
	s.mu.Lock()
	idx := s.bumpLocked()
	delete(s.acl.policies, name)
	s.acl.policyIndex = idx
	s.aclChangedLocked("", false) // an ACLPolicy event (eventstream.go)
	s.mu.Unlock()
	setIndex(w, idx)
	w.WriteHeader(http.StatusOK)
}

// handleACLTokens is GET /v1/acl/tokens (ACL.ListTokens): management only; list
// stubs without secrets, oldest first (the default CreateIndex order).
func (s *Sim) handleACLTokens(w http.ResponseWriter, r *http.Request) {
	if s.aclToken(w, r, true) == nil {
		return
	}
	prefix := r.URL.Query().Get("prefix")
	s.blockingRead(w, r, func() (any, uint64, error) {
		out := []*api.ACLTokenListStub{}
		for _, t := range s.tokensByCreateLocked() {
			if !strings.HasPrefix(t.AccessorID, prefix) {
				continue
			}
			at := t.apiToken()
			out = append(out, &api.ACLTokenListStub{AccessorID: at.AccessorID, Name: at.Name, Type: at.Type,
				Policies: at.Policies, Global: at.Global, CreateTime: at.CreateTime,
				CreateIndex: at.CreateIndex, ModifyIndex: at.ModifyIndex})
		}
		return out, s.acl.tokenIndex, nil
	})
}

// handleACLToken is /v1/acl/token/self (ACL.WhoAmI) and /v1/acl/token/<accessor>
// (aclTokenCrud): GET, PUT or POST (update), DELETE.
func (s *Sim) handleACLToken(w http.ResponseWriter, r *http.Request) {
	accessor := strings.TrimPrefix(r.URL.Path, "/v1/acl/token/")
	if accessor == "self" {
		if r.Method != http.MethodGet {
			simhttp.WriteError(w, http.StatusMethodNotAllowed, "Invalid method")
			return
		}
		s.aclTokenSelf(w, r)
		return
	}
	if accessor == "" {
		simhttp.WriteError(w, http.StatusBadRequest, "Missing Token Accessor")
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.aclTokenQuery(w, r, accessor)
	case http.MethodPut, http.MethodPost:
		s.aclTokenUpdate(w, r, accessor)
	case http.MethodDelete:
		s.aclTokenDelete(w, r, accessor)
	default:
		simhttp.WriteError(w, http.StatusMethodNotAllowed, "Invalid method")
	}
}

// aclTokenSelf is ACL.WhoAmI (nomad/acl_endpoint.go; command/agent/
// acl_endpoint.go aclTokenSelf), which, unlike the other ACL endpoints, answers
// with ACLs off: the identity Authenticate set (nomad/auth/auth.go
// Authenticate, resolveSecretToken), with the token's ModifyIndex as index.
//   - ACLs off: structs.ACLsDisabledToken (accessor "acls-disabled", name
//     "ACLs disabled token", type client, no policies), whatever secret is sent;
//   - no secret: structs.AnonymousACLToken (accessor "anonymous", name
//     "Anonymous Token", type client, policy "anonymous");
//   - the caller's own token, secret included;
//   - an unknown UUID: Authenticate's ErrPermissionDenied, 403 "Permission
//     denied"; a secret that is no UUID is verified as a workload identity
//     (auth.go VerifyClaim → encrypter.go VerifyClaim), which fails to parse it:
//     500 "failed to parse signed token: ...".
//
// The built-in tokens have ModifyIndex 0, so their answer's X-Nomad-Index is 0.
// WhoAmI is forwarded to the leader (no stale reads): 500 "No cluster leader"
// without one.
func (s *Sim) aclTokenSelf(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers.leaderLocked() == "" {
		simhttp.WriteErr(w, errNoLeader)
		return
	}
	secret := requestSecret(r)
	var at *api.ACLToken
	switch t, err := s.tokenForSecretLocked(secret); {
	case !s.acl.enabled:
		at = &api.ACLToken{AccessorID: "acls-disabled", Name: "ACLs disabled token", Type: "client"}
	case err != nil && !validUUID.MatchString(secret):
		writeIdentityRefused(w, secret, false)
		return
	case err != nil:
		simhttp.WriteErr(w, err)
		return
	case t.claims != nil:
		writeIdentityRefused(w, secret, true)
		return
	case t.AccessorID == "":
		at = &api.ACLToken{AccessorID: "anonymous", Name: "Anonymous Token", Type: "client", Policies: []string{"anonymous"}}
	default:
		at = t.apiToken()
	}
	s.setQueryMetaLocked(w, at.ModifyIndex)
	if at.ModifyIndex == 0 {
		w.Header().Set("X-Nomad-Index", "0")
	}
	writeJSON(w, http.StatusOK, at)
}

// aclTokenQuery: ACL.GetToken lets a management token read any token and another
// token only itself (403 otherwise, and 403 for a missing token unless management);
// a missing token is 404 "ACL token not found" for management.
func (s *Sim) aclTokenQuery(w http.ResponseWriter, r *http.Request, accessor string) {
	caller := s.aclToken(w, r, false)
	if caller == nil {
		return
	}
	s.blockingRead(w, r, func() (any, uint64, error) {
		t := s.tokenByAccessorLocked(accessor)
		switch {
		case t == nil && !caller.Management:
			return nil, 0, errPermissionDenied
		case t == nil:
			return nil, 0, &indexedError{err: errACLTokenNotFound, index: s.acl.tokenIndex}
		case !caller.Management && t.SecretID != caller.SecretID:
			return nil, 0, errPermissionDenied
		}
		at := t.apiToken()
		return at, at.ModifyIndex, nil
	})
}

// handleACLTokenUpsert is PUT/POST /v1/acl/token: create a token.
func (s *Sim) handleACLTokenUpsert(w http.ResponseWriter, r *http.Request) {
	s.aclTokenUpdate(w, r, "")
}

// aclTokenUpdate creates (no AccessorID) or updates a token (ACL.UpsertTokens,
// management only). The body's AccessorID must match the path (400 "ACL token
// accessor does not match request path"). ACLToken.Validate: the type is client or
// management; a client token needs policies (roles are not modelled), a management
// token may have none; the name is at most 256 characters. Policies are linked by
// name and need not exist yet (Nomad resolves them on each request). An update of
// an unknown accessor is 400 "cannot find token <id>" (uploading tokens with chosen
// IDs is not modelled).
func (s *Sim) aclTokenUpdate(w http.ResponseWriter, r *http.Request, accessor string) {
	var in api.ACLToken
	if err := decodeBody(r, &in); err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	if accessor != "" && in.AccessorID != accessor {
		simhttp.WriteError(w, http.StatusBadRequest, "ACL token accessor does not match request path")
		return
	}
	if s.aclToken(w, r, true) == nil {
		return
	}
	if msg := validateToken(&in); msg != "" {
		simhttp.WriteError(w, http.StatusBadRequest, "token 0 invalid: "+msg)
		return
	}
	s.mu.Lock()
	t, err := s.upsertTokenLocked(&in)
	var at *api.ACLToken
	if err == nil {
		at = t.apiToken()
	}
	s.mu.Unlock()
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	setIndex(w, at.ModifyIndex)
	writeJSON(w, http.StatusOK, at)
}

func validateToken(in *api.ACLToken) string {
	var problems []string
	if len(in.Name) > maxTokenNameLength {
		problems = append(problems, "token name too long")
	}
	switch in.Type {
	case "client":
		if len(in.Policies) == 0 && len(in.Roles) == 0 {
			problems = append(problems, "client token missing policies or roles")
		}
	case "management":
		if len(in.Policies) != 0 || len(in.Roles) != 0 {
			problems = append(problems, "management token cannot be associated with policies or roles")
		}
	default:
		problems = append(problems, "token type must be client or management")
	}
	if len(in.Roles) > 0 {
		problems = append(problems, "ACL roles are not modelled by the emulator")
	}
	return strings.Join(problems, "; ")
}

func (s *Sim) upsertTokenLocked(in *api.ACLToken) (*Token, error) {
	if in.AccessorID != "" {
		t := s.tokenByAccessorLocked(in.AccessorID)
		if t == nil {
			return nil, simhttp.Code(http.StatusBadRequest, "cannot find token %s", in.AccessorID)
		}
		if t.Global != in.Global {
			return nil, simhttp.Code(http.StatusBadRequest, "token 0 invalid: cannot toggle global mode")
		}
		t.Name, t.Management, t.PolicyNames = in.Name, in.Type == "management", append([]string(nil), in.Policies...)
		t.ModifyIndex = s.bumpLocked()
		s.acl.tokenIndex = t.ModifyIndex
		s.aclChangedLocked(t.SecretID, false) // an ACLToken event (eventstream.go)
		return t, nil
	}
	idx := s.bumpLocked()
	t := &Token{
		Name: in.Name, AccessorID: s.uuidLocked(), SecretID: s.uuidLocked(),
		Management: in.Type == "management", PolicyNames: append([]string(nil), in.Policies...),
		Global: in.Global, CreateTime: time.Now().UTC(), CreateIndex: idx, ModifyIndex: idx,
	}
	s.acl.tokens[t.SecretID] = t
	s.acl.tokenIndex = idx
	return t, nil
}

// aclTokenDelete: ACL.DeleteTokens, management only; an unknown accessor is 400
// "Cannot delete nonexistent tokens: <id>".
func (s *Sim) aclTokenDelete(w http.ResponseWriter, r *http.Request, accessor string) {
	if s.aclToken(w, r, true) == nil {
		return
	}
	s.mu.Lock()
	t := s.tokenByAccessorLocked(accessor)
	if t == nil {
		s.mu.Unlock()
		simhttp.WriteError(w, http.StatusBadRequest, "Cannot delete nonexistent tokens: "+accessor)
		return
	}
	delete(s.acl.tokens, t.SecretID)
	idx := s.bumpLocked()
	s.acl.tokenIndex = idx
	s.aclChangedLocked(t.SecretID, true) // an ACLToken deleted event (eventstream.go)
	s.mu.Unlock()
	setIndex(w, idx)
	w.WriteHeader(http.StatusOK)
}

func (s *Sim) tokenByAccessorLocked(accessor string) *Token {
	for _, t := range s.acl.tokens {
		if t.AccessorID == accessor {
			return t
		}
	}
	return nil
}

func (s *Sim) tokensByCreateLocked() []*Token {
	out := make([]*Token, 0, len(s.acl.tokens))
	for _, t := range s.acl.tokens {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreateIndex != out[j].CreateIndex {
			return out[i].CreateIndex < out[j].CreateIndex
		}
		return out[i].AccessorID < out[j].AccessorID
	})
	return out
}

func (s *Sim) policyNamesLocked() []string {
	names := make([]string, 0, len(s.acl.policies))
	for n := range s.acl.policies {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// holdsPolicy: a management token may see every policy, another token the
// policies linked to it by name, a workload identity those attached to its job
// (getPolicyAuthorizationFunc, getPoliciesForIdentity: ResolvePoliciesForClaims).
func (t *Token) holdsPolicy(name string) bool {
	if t.Management || slices.Contains(t.attached, name) {
		return true
	}
	for _, n := range t.PolicyNames {
		if n == name {
			return true
		}
	}
	return false
}

// apiToken is the token as the API returns it.
func (t *Token) apiToken() *api.ACLToken {
	typ := "client"
	if t.Management {
		typ = "management"
	}
	policies := append([]string(nil), t.PolicyNames...)
	if policies == nil {
		policies = []string{}
	}
	return &api.ACLToken{
		AccessorID: t.AccessorID, SecretID: t.SecretID, Name: t.Name, Type: typ, Policies: policies,
		Global: t.Global, CreateTime: t.CreateTime, CreateIndex: t.CreateIndex, ModifyIndex: t.ModifyIndex,
	}
}

// resolvedLocked is the token with the rules of its named policies added, read at
// the time of the request: Nomad resolves a token's policies by name on every
// request (nomad/auth ResolveACLForToken), so a policy applied or deleted after
// the token was made takes effect at once, and a name with no policy grants
// nothing.
func (s *Sim) resolvedLocked(t *Token) *Token {
	if len(t.PolicyNames) == 0 {
		return t
	}
	out := *t
	out.Policies = append([]*Policy(nil), t.Policies...)
	for _, n := range t.PolicyNames {
		if p, ok := s.acl.policies[n]; ok {
			out.Policies = append(out.Policies, p.parsed)
		}
	}
	return &out
}
