package config

import (
	"fmt"
	"reflect"
	"regexp"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
)

// ApprovalConfig is the policy's approval block: what the groups with
// approval = "manual" or "webhook" wait for (package admission, approval.go).
type ApprovalConfig struct {
	// Webhook is the URL the coordinator POSTs a host's approval request to
	// (groups with approval = "webhook").
	Webhook string
	// Timeout bounds one request; Recheck is how long an answer that did
	// not approve stands before the webhook is asked again.
	Timeout, Recheck time.Duration
	// HoldSlot is how long a host awaiting approval keeps its group's slot.
	HoldSlot time.Duration
	// AuthHeader is the header the secret is sent in; AuthEnv and AuthFile
	// name where the coordinator reads its value (never stored).
	AuthHeader, AuthEnv, AuthFile string
}

var approvalTable = &table{typ: "approval", of: reflect.TypeFor[ApprovalConfig](), settings: []setting{
	{name: "webhook", field: "Webhook", shown: redactedURL, check: value(checkURL),
		doc: "`http://` or `https://` URL the coordinator POSTs to when a host of a group with " +
			"`approval = \"webhook\"` has its turn: a JSON object `{\"host\", \"group\", \"reason\", " +
			"\"fingerprint\"}` (the need's reason and the fingerprint its agent published). An answer 2xx " +
			"approves that host's cycle; any other status, no answer within `timeout`, or a URL that " +
			"cannot be reached holds the host (fail closed) with the answer (status and first line of the " +
			"body) in `rollboot status` and the coordinator's log, and asks again after `recheck`. The " +
			"approving answer is recorded in the host's plan and its history record (`approved_by`). " +
			"Redirects are not followed. User information in the URL is sent as basic authentication and " +
			"never shown. `\"\"`: no webhook (a group with `approval = \"webhook\"` is then an error)."},
	{name: "timeout", field: "Timeout", def: 10 * time.Second, check: value(positive),
		doc: "Bounds one request to the webhook; no answer within it holds the host. > 0."},
	{name: "recheck", field: "Recheck", def: time.Minute, check: value(positive),
		doc: "How long an answer that did not approve stands before the webhook is asked again for the " +
			"same host, while it still has its turn. > 0."},
	{name: "hold_slot", field: "HoldSlot", def: time.Hour, check: value(positive),
		doc: "How long a host awaiting approval keeps its group's slot, counted from when it began to " +
			"await. While it does, the hosts behind it in its group's line wait for that slot (first come, " +
			"first served: the host awaiting is the next to go). After it, the host steps aside, still " +
			"awaiting, and the slot goes to the next host in line (which awaits its own approval), so a " +
			"host nobody approves does not stop its group for good. > 0."},
	{name: "auth_header", field: "AuthHeader", def: "Authorization", check: value(headerName),
		doc: "The request header the secret of `auth_env` or `auth_file` is sent in, such as " +
			"`\"Authorization\"` (the value then written whole, e.g. `Bearer abc`) or `\"X-Api-Key\"`."},
	{name: "auth_env", field: "AuthEnv", check: value(optionalEnvName),
		doc: "Name of an environment variable of the coordinator whose value is sent in `auth_header`. " +
			"The secret never enters the stored policy, a log or an error. A variable that is not set " +
			"holds the hosts (fail closed), saying so. `\"\"`: none."},
	{name: "auth_file", field: "AuthFile",
		doc: "Path of a file on the coordinator's host whose content (surrounding white space removed) is " +
			"sent in `auth_header`, read at every request (so a rotated secret is used at once). A file " +
			"that cannot be read holds the hosts, saying so. Not with `auth_env`. `\"\"`: none."},
}}

var headerRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

func headerName(s string) error {
	if !headerRE.MatchString(s) {
		return fmt.Errorf("%q is not an HTTP header name (letters, digits and - such as \"Authorization\")", s)
	}
	return nil
}

// optionalEnvName checks approval.auth_env: "" or a variable name.
func optionalEnvName(s string) error {
	if s == "" {
		return nil
	}
	return envVarName(s)
}

// approvals checks what ties the approval block to the groups: a group that
// asks the webhook needs one, and the secret has one source.
func (v *validator) approvals() {
	a := v.c.Approval
	if a.AuthEnv != "" && a.AuthFile != "" {
		v.errorf(scope{"approval.auth_file", "approval.auth_file"}, "set auth_env or auth_file, not both")
	}
	for i, g := range v.c.Groups {
		key := labelScope("group", i, g.Name).sub("approval")
		if g.Approval == admission.ApprovalWebhook && a.Webhook == "" && v.good(key) {
			v.errorf(key, `approval = "webhook" needs the approval block's webhook URL: set approval { webhook = "https://..." }, or use approval = "manual"`)
		}
	}
}

// ApprovalRules compiles the approval settings of the groups, checked.
func (c *Config) ApprovalRules() admission.ApprovalRules {
	r := admission.ApprovalRules{Groups: map[string]string{}, HoldSlot: c.Approval.HoldSlot, Recheck: c.Approval.Recheck}
	for _, g := range c.Groups {
		if g.Approval != "" && g.Approval != admission.ApprovalNone {
			r.Groups[g.Name] = g.Approval
		}
	}
	return r
}
