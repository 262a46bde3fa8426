package doctor

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	shipped "github.com/rollboot/rollboot/deploy/acl"
)

// aclsOff: GET /v1/acl/token/self answers with ACLs off too, with
// structs.ACLsDisabledToken (accessor "acls-disabled"; nomad/acl_endpoint.go
// WhoAmI).
func aclsOff(t *api.ACLToken) bool { return t != nil && t.AccessorID == "acls-disabled" }

// checkACL: whether ACLs are on, who the token in use is, what it may read,
// and with a management token whether rollboot's policies are the shipped
// ones.
func checkACL(in ACLInput, o Options, now time.Time) []Finding {
	switch {
	case in.SelfErr != nil:
		return []Finding{tokenError(in.SelfErr)}
	case in.Self == nil:
		return nil
	case aclsOff(in.Self):
		return []Finding{{Check: CheckACL, Severity: Warning,
			What: "ACLs are off: whoever reaches Nomad's API can drain nodes and change rollboot's state",
			Fix:  "enable ACLs (acl { enabled = true } on every Nomad agent), run `nomad acl bootstrap`, and apply the policies in deploy/acl (docs/deploy.md)"}}
	}
	out := []Finding{{Check: CheckACL, What: "ACLs are on"}, tokenFinding(in.Self)}
	out = append(out, checkProbes(in.Self, in.Probes)...)
	if in.Self.Type == "management" {
		out = append(out, checkPolicies(in, o, now)...)
		out = append(out, policyHolders(in)...)
	}
	return out
}

// tokenError: Nomad does not know the token, or cannot say.
func tokenError(err error) Finding {
	f := Finding{Check: CheckToken, Severity: Error}
	if statusOf(err) == http.StatusForbidden {
		f.What = "Nomad does not know the token in use (GET /v1/acl/token/self: Permission denied)"
		f.Fix = "set NOMAD_TOKEN (or nomad.token in the configuration) to the secret ID of a token Nomad knows; `nomad acl token self` checks it"
		return f
	}
	f.What = fmt.Sprintf("cannot ask Nomad who the token in use is (GET /v1/acl/token/self): %v", err)
	f.Fix = "check NOMAD_ADDR and that the Nomad servers have a leader (`nomad server members`); a secret that is no UUID is refused as a workload identity"
	return f
}

func tokenFinding(t *api.ACLToken) Finding {
	f := Finding{Check: CheckToken}
	switch {
	case t.AccessorID == "anonymous":
		f.Severity = Warning
		f.What = "no token given: requests run as the anonymous token"
		f.Fix = "set NOMAD_TOKEN (or -token, or nomad.token) to a token with the rollboot-operator policy (" + shipped.File("rollboot-operator") + ")"
	case t.Type == "management":
		f.What = fmt.Sprintf("token %q is a management token", t.Name)
	default:
		f.What = fmt.Sprintf("token %q (client) with the policies %s", t.Name, strings.Join(t.Policies, ", "))
	}
	return f
}

// checkProbes: each read the token was refused is a missing right.
func checkProbes(t *api.ACLToken, probes []Probe) []Finding {
	var out []Finding
	var allowed []string
	for _, p := range probes {
		switch {
		case p.Err == nil || statusOf(p.Err) == http.StatusNotFound:
			allowed = append(allowed, p.Right)
		case statusOf(p.Err) == http.StatusForbidden:
			out = append(out, Finding{Check: CheckRights, Severity: Error, Subject: p.Right,
				What: fmt.Sprintf("the token cannot %s: it lacks %s (%s refused)", p.What, p.Right, p.Call),
				Fix:  operatorPolicyFix(t)})
		default:
			out = append(out, Finding{Check: CheckRights, Severity: Warning, Subject: p.Right,
				What: fmt.Sprintf("cannot tell whether the token may %s (%s): %v", p.What, p.Call, p.Err),
				Fix:  "check NOMAD_ADDR and the Nomad servers (`nomad server members`), then run rollboot doctor again"})
		}
	}
	if len(out) == 0 && len(allowed) > 0 {
		out = append(out, Finding{Check: CheckRights, What: "the token has the rights rollboot's CLI reads with: " + strings.Join(allowed, ", ")})
	}
	return out
}

func operatorPolicyFix(t *api.ACLToken) string {
	return fmt.Sprintf("apply the operator policy and give it to the token: `nomad acl policy apply -description \"rollboot CLI\" rollboot-operator %s`, then `nomad acl token update -policy rollboot-operator %s` (repeat -policy for each policy it keeps)",
		shipped.File("rollboot-operator"), t.AccessorID)
}

// checkPolicies: the rollboot policies the cluster has against the shipped
// files (for the configured namespace and prefix), and tokens that combine the
// agent's and the coordinator's policies.
func checkPolicies(in ACLInput, o Options, now time.Time) []Finding {
	if in.PoliciesErr != nil {
		return []Finding{{Check: CheckPolicies, Severity: Warning,
			What: fmt.Sprintf("cannot read rollboot's ACL policies: %v", in.PoliciesErr),
			Fix:  "run rollboot doctor again with a management token"}}
	}
	var out []Finding
	var absent []string
	same := 0
	for _, name := range ShippedPolicyNames() {
		if in.Policies[name] == nil {
			absent = append(absent, name)
			continue
		}
		if f, ok := comparePolicy(name, in.Policies[name], o); !ok {
			out = append(out, f)
		} else {
			same++
		}
	}
	if len(absent) > 0 {
		out = append(out, absentPolicies(absent, o))
	}
	if same > 0 {
		out = append(out, Finding{Check: CheckPolicies, What: fmt.Sprintf("%d of rollboot's %d ACL policies are as shipped", same, len(ShippedPolicyNames()))})
	}
	out = append(out, checkMixedTokens(in.Tokens)...)
	return append(out, checkTokenExpiry(in.Tokens, now)...)
}

// comparePolicy compares the cluster's policy name (nil: not there) with the
// shipped file; ok when they grant the same.
func comparePolicy(name string, have *api.ACLPolicy, o Options) (Finding, bool) {
	src, _ := shipped.Rules(name)
	file := shipped.File(name)
	apply := applyCommand(name, o)
	f := Finding{Check: CheckPolicies, Severity: Warning, Subject: name, Fix: apply}
	want, err := ruleLines(src, file, shippedRename(o.Namespace, o.Prefix))
	if err != nil {
		f.What = err.Error()
		return f, false
	}
	got, err := ruleLines([]byte(have.Rules), "policy "+name, nil)
	if err != nil {
		f.What = fmt.Sprintf("the ACL policy %s does not parse: %v", name, err)
		return f, false
	}
	missing, extra := ruleDiff(got, want)
	if len(missing) == 0 && len(extra) == 0 {
		return f, true
	}
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("it lacks `%s`", missing[0]))
	}
	if len(extra) > 0 {
		parts = append(parts, fmt.Sprintf("it has `%s`", extra[0]))
	}
	if n := len(missing) + len(extra) - len(parts); n > 0 {
		parts = append(parts, fmt.Sprintf("%d more differences", n))
	}
	f.What = fmt.Sprintf("the ACL policy %s differs from %s: %s", name, file, strings.Join(parts, "; "))
	return f, false
}

// applyCommand applies the shipped policy name.
func applyCommand(name string, o Options) string {
	apply := fmt.Sprintf("nomad acl policy apply %s %s", name, shipped.File(name))
	if o.Namespace != "" && o.Namespace != "default" || o.Prefix != "" && o.Prefix != "rollboot" {
		apply += fmt.Sprintf(" (after renaming namespace \"default\" to %q and the paths' \"rollboot/\" to %q)", o.Namespace, o.Prefix+"/")
	}
	return apply
}

// optionalPolicy is used only by agents that are coordinator candidates
// (coordinator.enabled = true), not by the default deployment.
const optionalPolicy = "rollboot-agent-candidate"

// absentPolicies: the shipped policies the cluster lacks; a warning unless
// only the optional one is.
func absentPolicies(names []string, o Options) Finding {
	f := Finding{Check: CheckPolicies, Severity: Warning,
		What: fmt.Sprintf("the ACL policies %s are not in the cluster: tokens and jobs meant to hold them lack their rights", strings.Join(names, ", "))}
	if len(names) == 1 {
		f.Subject = names[0]
		f.What = fmt.Sprintf("the ACL policy %s is not in the cluster: tokens and jobs meant to hold it lack their rights", names[0])
		if names[0] == optionalPolicy {
			f.Severity = Info
			f.What = fmt.Sprintf("the ACL policy %s is not in the cluster: only agents that are coordinator candidates use it", optionalPolicy)
		}
	}
	var cmds []string
	for _, n := range names {
		cmds = append(cmds, applyCommand(n, o))
	}
	f.Fix = strings.Join(cmds, "; ")
	return f
}

// checkMixedTokens: a token holding an agent's policy and the coordinator's
// cannot write plans (Nomad merges variable rules by path and the most
// specific wins: the agent's "plan/*" read hides the coordinator's write).
func checkMixedTokens(tokens []*api.ACLTokenListStub) []Finding {
	var out []Finding
	for _, t := range tokens {
		agent := slices.Contains(t.Policies, "rollboot-agent") || slices.Contains(t.Policies, "rollboot-agent-server")
		if agent && slices.Contains(t.Policies, "rollboot-coordinator") {
			out = append(out, Finding{Check: CheckPolicies, Severity: Warning, Subject: t.Name,
				What: fmt.Sprintf("token %q holds an agent policy and rollboot-coordinator: its agent's read-only plan rule hides the coordinator's, so as coordinator it cannot write plans", t.Name),
				Fix:  fmt.Sprintf("give it rollboot-agent-candidate instead (%s): `nomad acl token update -policy rollboot-agent-candidate %s`", shipped.File("rollboot-agent-candidate"), t.AccessorID)})
		}
	}
	return out
}

// statusOf is the HTTP status of a Nomad API error (api.UnexpectedResponseError
// and anything else that says its StatusCode), 0 when it has none.
func statusOf(err error) int {
	var sc interface{ StatusCode() int }
	if errors.As(err, &sc) {
		return sc.StatusCode()
	}
	return 0
}

// expirySoon is how long before a token's expiry checkTokenExpiry warns.
const expirySoon = 7 * 24 * time.Hour

// rollbootPolicies are the shipped policies among names.
func rollbootPolicies(names []string) []string {
	var out []string
	for _, n := range names {
		if _, ok := shipped.Rules(n); ok {
			out = append(out, n)
		}
	}
	return out
}

// checkTokenExpiry: a token holding a rollboot policy that expired or expires
// within expirySoon (Nomad refuses an expired token: nomad/auth/auth.go
// resolveSecretToken, structs.ACLToken.IsExpired).
func checkTokenExpiry(tokens []*api.ACLTokenListStub, now time.Time) []Finding {
	var out []Finding
	for _, t := range tokens {
		pols := rollbootPolicies(t.Policies)
		if len(pols) == 0 || t.ExpirationTime == nil || t.ExpirationTime.Sub(now) > expirySoon {
			continue
		}
		f := Finding{Check: CheckPolicies, Severity: Warning, Subject: t.Name,
			Fix: fmt.Sprintf("create its successor (`nomad acl token create -type client -policy %s -name %q`) and put its secret where the old one is used", strings.Join(pols, " -policy "), t.Name)}
		when := t.ExpirationTime.UTC().Format(time.RFC3339)
		if t.ExpirationTime.Before(now) {
			f.What = fmt.Sprintf("token %q (%s) expired at %s: whoever holds it is refused", t.Name, strings.Join(pols, ", "), when)
		} else {
			f.What = fmt.Sprintf("token %q (%s) expires at %s: whoever holds it will be refused", t.Name, strings.Join(pols, ", "), when)
		}
		out = append(out, f)
	}
	return out
}

// policyHolders says which tokens hold each rollboot policy there is, and
// which job it is attached to (workload identity); nothing when there is none.
func policyHolders(in ACLInput) []Finding {
	holders := map[string][]string{}
	for _, t := range in.Tokens {
		for _, p := range rollbootPolicies(t.Policies) {
			holders[p] = append(holders[p], fmt.Sprintf("token %q", t.Name))
		}
	}
	var parts []string
	for _, name := range ShippedPolicyNames() {
		p := in.Policies[name]
		if p == nil {
			continue
		}
		h := holders[name]
		if j := p.JobACL; j != nil {
			h = append(h, "job "+j.Namespace+"/"+j.JobID)
		}
		if len(h) == 0 {
			h = []string{"no token or job"}
		}
		parts = append(parts, name+": "+strings.Join(h, ", "))
	}
	if len(parts) == 0 || in.PoliciesErr != nil {
		return nil
	}
	return []Finding{{Check: CheckPolicies, Severity: Info, What: "holders: " + strings.Join(parts, "; ")}}
}
