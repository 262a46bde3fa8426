package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// tokenKind is what Nomad says of the token a command runs with.
type tokenKind int

const (
	tokenUnchecked tokenKind = iota // Nomad could not be asked (it failed otherwise)
	tokenACLsOff                    // ACLs are off: any token does anything
	tokenAnonymous                  // no token, with ACLs on
	tokenKnown                      // a token Nomad knows
	tokenInvalid                    // a secret Nomad does not know (a typo, deleted, expired, another region's)
)

// tokenInfo is the token a command runs with, as /v1/acl/token/self (ACL.WhoAmI)
// describes it: never its secret.
type tokenInfo struct {
	kind     tokenKind
	name     string
	policies []string
}

// selfReader is the part of the Nomad ACL tokens API whoseToken reads.
type selfReader interface {
	Self(q *api.QueryOptions) (*api.ACLToken, *api.QueryMeta, error)
}

// whoseToken asks Nomad who the token is. WhoAmI answers any token Nomad
// knows, whatever its policies, and, with ACLs off, the built-in "ACLs
// disabled" identity; without a token the built-in anonymous one
// (nomad/structs ACLsDisabledToken, AnonymousACLToken). A secret Nomad does not
// know fails Authenticate: 403 "Permission denied" (or "ACL token not found",
// "ACL token expired"), or, for a secret that is no UUID, 500 "failed to parse
// signed token" (nomad/auth/auth.go Authenticate, resolveSecretToken).
func whoseToken(ctx context.Context, acl selfReader) tokenInfo {
	tok, _, err := acl.Self((&api.QueryOptions{}).WithContext(ctx))
	var ure api.UnexpectedResponseError
	switch {
	case err == nil && tok != nil && tok.AccessorID == "acls-disabled":
		return tokenInfo{kind: tokenACLsOff}
	case err == nil && tok != nil && tok.AccessorID == "anonymous":
		return tokenInfo{kind: tokenAnonymous}
	case err == nil && tok != nil:
		return tokenInfo{kind: tokenKnown, name: tok.Name, policies: tok.Policies}
	case errors.As(err, &ure) && (ure.StatusCode() == 403 || ure.StatusCode() == 401 ||
		ure.StatusCode() == 500 && strings.Contains(ure.Body(), "failed to parse signed token")):
		return tokenInfo{kind: tokenInvalid}
	}
	return tokenInfo{}
}

// operatorPolicy is the shipped ACL policy an operator's token needs.
const operatorPolicy = "deploy/acl/rollboot-operator.policy.hcl"

// deniedHint explains a 403 (or a list that shows nothing) by what Nomad says
// of the token: unknown, none, or known but lacking the rights the command
// needs, which it names with the policy file that grants them.
func deniedHint(c connInfo, t tokenInfo) string {
	rights := fmt.Sprintf("variables read on %q (and write on %q and %q to change it, on %q to apply a policy) in namespace %q; %s grants them",
		c.Prefix+"/*", c.Prefix+"/control", c.Prefix+"/requests/*", c.Prefix+"/policy", c.Namespace, operatorPolicy)
	switch {
	case t.kind == tokenInvalid:
		return fmt.Sprintf("Nomad at %s does not know the token given (-token, NOMAD_TOKEN or nomad.token): a typo, a deleted or expired token, or a token of another region. Check it with `nomad acl token self`", c.Address)
	case t.kind == tokenAnonymous || !c.TokenSet && t.kind != tokenKnown:
		return fmt.Sprintf("no token is set (-token, NOMAD_TOKEN or nomad.token) and ACLs are on at %s: anonymous requests lack %s", c.Address, rights)
	case t.kind == tokenKnown:
		return fmt.Sprintf("token %q (policies: %s) lacks %s", t.name, orNone(t.policies), rights)
	}
	return fmt.Sprintf("the token lacks %s", rights)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
