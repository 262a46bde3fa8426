package nomadsim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

const varsPolicy = `
namespace "default" {
  variables {
    path "app/*" {
      capabilities = ["read", "write"]
    }
  }
}
`

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: succeeded, want %s", what, code)
		return
	}
	if !strings.Contains(err.Error(), code) {
		t.Errorf("%s: %v, want %s", what, err, code)
	}
}

// The policy and token endpoints as `nomad acl policy apply` and
// `nomad acl token create` use them: management only, validated, and a token's
// policies resolved by name on every request.
func TestACLPolicyAndTokenLifecycle(t *testing.T) {
	s, mgmt := newTestSim(t, Config{Clients: 1, ACL: true})
	put := func(c *api.Client, path string) error {
		_, _, err := c.Variables().Create(&api.Variable{Namespace: "default", Path: path, Items: api.VariableItems{"k": "v"}}, nil)
		return err
	}

	// A token may name a policy that does not exist yet: it grants nothing.
	tok, _, err := mgmt.ACLTokens().Create(&api.ACLToken{Name: "app", Type: "client", Policies: []string{"app"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessorID == "" || tok.SecretID == "" || tok.Type != "client" || tok.CreateIndex == 0 {
		t.Fatalf("created token %+v", tok)
	}
	app := newClient(t, s.Address(), tok.SecretID)
	wantCode(t, "write before the policy exists", put(app, "app/x"), "403")

	if _, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: "app", Description: "d", Rules: varsPolicy}, nil); err != nil {
		t.Fatal(err)
	}
	if err := put(app, "app/x"); err != nil {
		t.Errorf("write after the policy was applied: %v", err)
	}
	wantCode(t, "write outside the policy", put(app, "other/x"), "403")

	// Reads of policies and tokens.
	p, _, err := mgmt.ACLPolicies().Info("app", nil)
	if err != nil || p.Rules != varsPolicy || p.Description != "d" || p.ModifyIndex == 0 {
		t.Errorf("policy info: %+v, %v", p, err)
	}
	if _, _, err := app.ACLPolicies().Info("app", nil); err != nil {
		t.Errorf("a token reads its own policy: %v", err)
	}
	_, _, err = mgmt.ACLPolicies().Info("missing", nil)
	wantCode(t, "missing policy", err, "404")
	list, _, err := app.ACLPolicies().List(nil)
	if err != nil || len(list) != 1 || list[0].Name != "app" {
		t.Errorf("a client token lists its own policies only: %+v, %v", list, err)
	}
	self, _, err := app.ACLTokens().Self(nil)
	if err != nil || self.AccessorID != tok.AccessorID {
		t.Errorf("token self: %+v, %v", self, err)
	}
	if _, _, err := app.ACLTokens().Info(tok.AccessorID, nil); err != nil {
		t.Errorf("a token reads itself by accessor: %v", err)
	}
	_, _, err = app.ACLTokens().Info(s.acl.mgmt.AccessorID, nil)
	wantCode(t, "a client token reads another token", err, "403")
	toks, _, err := mgmt.ACLTokens().List(nil)
	if err != nil || len(toks) != 2 {
		t.Errorf("token list: %d tokens, %v (want the bootstrap token and app)", len(toks), err)
	}

	// Management only (nomad/acl_endpoint.go: IsManagement() or ErrPermissionDenied).
	_, err = app.ACLPolicies().Upsert(&api.ACLPolicy{Name: "app", Rules: `node { policy = "write" }`}, nil)
	wantCode(t, "client token applies a policy", err, "403")
	_, _, err = app.ACLTokens().Create(&api.ACLToken{Type: "management"}, nil)
	wantCode(t, "client token creates a token", err, "403")
	_, _, err = app.ACLTokens().List(nil)
	wantCode(t, "client token lists tokens", err, "403")
	_, err = app.ACLPolicies().Delete("app", nil)
	wantCode(t, "client token deletes a policy", err, "403")

	// Validation.
	_, err = mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: "bad.name", Rules: varsPolicy}, nil)
	wantCode(t, "invalid policy name", err, "400")
	_, err = mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: "broken", Rules: `node { policy = "sudo" }`}, nil)
	wantCode(t, "invalid rules", err, "400")
	_, _, err = mgmt.ACLTokens().Create(&api.ACLToken{Name: "none", Type: "client"}, nil)
	wantCode(t, "client token without policies", err, "400")

	// Deleting the policy takes its rights away at once; deleting the token
	// makes its secret unknown.
	if _, err := mgmt.ACLPolicies().Delete("app", nil); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "write after the policy was deleted", put(app, "app/y"), "403")
	if _, err := mgmt.ACLTokens().Delete(tok.AccessorID, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err = app.ACLTokens().Self(nil)
	// WhoAmI reports a failed Authenticate as it is: Permission denied.
	wantCode(t, "deleted token", err, "Permission denied")
	_, err = mgmt.ACLTokens().Delete(tok.AccessorID, nil)
	wantCode(t, "delete an unknown token", err, "400")
}

func TestACLEndpointsWithACLsDisabled(t *testing.T) {
	_, c := newTestSim(t, Config{Clients: 1})
	_, _, err := c.ACLPolicies().List(nil)
	wantCode(t, "list policies", err, "ACL support disabled")
	_, _, err = c.ACLTokens().Create(&api.ACLToken{Type: "management"}, nil)
	wantCode(t, "create token", err, "400")
}

func TestACLPolicyNameMustMatchPath(t *testing.T) {
	s, _ := newTestSim(t, Config{Clients: 1, ACL: true})
	req, _ := http.NewRequest(http.MethodPut, s.Address()+"/v1/acl/policy/a", strings.NewReader(`{"Name":"b","Rules":""}`))
	req.Header.Set("X-Nomad-Token", s.ManagementToken())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("status %d, want 400", resp.StatusCode)
	}
}

// A request without a token is Nomad's anonymous token: it grants nothing until an
// operator applies a policy named "anonymous", and then grants that policy.
func TestACLAnonymousPolicy(t *testing.T) {
	s, mgmt := newTestSim(t, Config{Clients: 1, ACL: true})
	anon := newClient(t, s.Address(), "")
	self, _, err := anon.ACLTokens().Self(nil)
	if err != nil || self.AccessorID != "anonymous" {
		t.Errorf("anonymous token self: %+v, %v", self, err)
	}
	_, _, err = anon.Nodes().List(nil)
	wantCode(t, "anonymous node list without an anonymous policy", err, "403")
	if _, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: "anonymous", Rules: `node { policy = "read" }`}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := anon.Nodes().List(nil); err != nil {
		t.Errorf("anonymous node list with an anonymous policy granting node:read: %v", err)
	}
	if _, _, err := anon.ACLPolicies().Info("anonymous", nil); err != nil {
		t.Errorf("anyone reads the anonymous policy: %v", err)
	}
}

// GET /v1/acl/token/self (ACL.WhoAmI) answers with the identity Authenticate
// set: Nomad's built-in tokens when ACLs are off or no token is sent, with index
// 0; an unknown secret is a failed Authenticate.
func TestACLTokenSelfIdentities(t *testing.T) {
	off := vtSim(t, Config{Clients: 1})
	for _, token := range []string{"", "00000000-0000-4000-8000-000000000000"} {
		r := vtDo(t, off, "GET", "/v1/acl/token/self", token, "")
		var tok api.ACLToken
		if err := json.Unmarshal([]byte(r.body), &tok); r.code != 200 || err != nil || tok.AccessorID != "acls-disabled" ||
			tok.Name != "ACLs disabled token" || tok.Type != "client" || tok.Policies != nil || r.header.Get("X-Nomad-Index") != "0" {
			t.Errorf("ACLs off, token %q: %d %s (index %s)", token, r.code, r.body, r.header.Get("X-Nomad-Index"))
		}
	}
	if tok, _, err := vtClient(t, off, "", "").ACLTokens().Self(nil); err != nil || tok.AccessorID != "acls-disabled" {
		t.Errorf("api client, ACLs off: %+v, %v", tok, err)
	}

	on := vtSim(t, Config{Clients: 1, ACL: true})
	r := vtDo(t, on, "GET", "/v1/acl/token/self", "", "")
	var tok api.ACLToken
	if err := json.Unmarshal([]byte(r.body), &tok); r.code != 200 || err != nil || tok.AccessorID != "anonymous" ||
		tok.Name != "Anonymous Token" || len(tok.Policies) != 1 || tok.Policies[0] != "anonymous" || r.header.Get("X-Nomad-Index") != "0" {
		t.Errorf("no token: %d %s", r.code, r.body)
	}
	if r := vtDo(t, on, "GET", "/v1/acl/token/self", "00000000-0000-4000-8000-000000000000", ""); r.code != 403 || r.body != "Permission denied" {
		t.Errorf("unknown UUID: %d %q", r.code, r.body)
	}
	if r := vtDo(t, on, "GET", "/v1/acl/token/self", "not-a-token", ""); r.code != 500 ||
		r.body != "failed to parse signed token: go-jose/go-jose: compact JWS format must have three parts" {
		t.Errorf("not a UUID: %d %q", r.code, r.body)
	}
	r = vtDo(t, on, "GET", "/v1/acl/token/self", on.ManagementToken(), "")
	if err := json.Unmarshal([]byte(r.body), &tok); r.code != 200 || err != nil || tok.SecretID != on.ManagementToken() || tok.Type != "management" {
		t.Errorf("management: %d %s", r.code, r.body)
	}
	// The agent answers /v1/agent/self itself: an unknown token is "ACL token
	// not found" there (command/agent/http.go ResolveToken).
	if r := vtDo(t, on, "GET", "/v1/agent/self", "00000000-0000-4000-8000-000000000000", ""); r.code != 403 || r.body != "ACL token not found" {
		t.Errorf("agent self, unknown token: %d %q", r.code, r.body)
	}
}
