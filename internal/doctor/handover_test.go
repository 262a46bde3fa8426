package doctor

import (
	"errors"
	"strings"
	"testing"

	consulapi "github.com/hashicorp/consul/api"

	"github.com/rollboot/rollboot/internal/health"
)

// fakeConsulACL answers the token's self read and its policies' reads.
type fakeConsulACL struct {
	self     *consulapi.ACLToken
	selfErr  error
	policies map[string]*consulapi.ACLPolicy // nil entry: refused (no acl:read)
}

func (f fakeConsulACL) TokenReadSelf(*consulapi.QueryOptions) (*consulapi.ACLToken, *consulapi.QueryMeta, error) {
	return f.self, nil, f.selfErr
}

func (f fakeConsulACL) PolicyRead(id string, _ *consulapi.QueryOptions) (*consulapi.ACLPolicy, *consulapi.QueryMeta, error) {
	if p := f.policies[id]; p != nil {
		return p, nil, nil
	}
	return nil, nil, errors.New("Unexpected response code: 403 (Permission denied)")
}

// Whether the token may hand leadership over: Consul's from its policies,
// Vault's from its capabilities on sys/step-down; each case with the finding
// doctor reports.
func TestHandOverRight(t *testing.T) {
	link := func(id, name string) []*consulapi.ACLTokenPolicyLink {
		return []*consulapi.ACLTokenPolicyLink{{ID: id, Name: name}}
	}
	for _, tc := range []struct {
		name     string
		product  health.Product
		right    RightInput
		severity Severity
		what     string
	}{
		{"consul acls off", health.Consul, consulHandOverRight(fakeConsulACL{selfErr: errors.New("Unexpected response code: 401 (ACL support disabled)")}, nil),
			OK, "may hand leadership over (Consul's ACLs are off)"},
		{"consul global-management", health.Consul, consulHandOverRight(fakeConsulACL{self: &consulapi.ACLToken{Policies: link("1", "global-management")}}, nil),
			OK, "may hand leadership over"},
		{"consul operator write", health.Consul, consulHandOverRight(fakeConsulACL{self: &consulapi.ACLToken{Policies: link("2", "rollboot")},
			policies: map[string]*consulapi.ACLPolicy{"2": {Rules: "operator = \"write\"\n"}}}, nil),
			OK, `policy rollboot has operator = "write"`},
		{"consul operator read only", health.Consul, consulHandOverRight(fakeConsulACL{self: &consulapi.ACLToken{Policies: link("2", "rollboot")},
			policies: map[string]*consulapi.ACLPolicy{"2": {Rules: "operator = \"read\"\n"}}}, nil),
			Warning, "the Consul token may not hand leadership over (policies: rollboot)"},
		{"consul policy unreadable", health.Consul, consulHandOverRight(fakeConsulACL{self: &consulapi.ACLToken{Policies: link("3", "ops")}}, nil),
			Info, "cannot tell whether the Consul token may hand leadership over (policy ops cannot be read (acl:read))"},
		{"consul token refused", health.Consul, consulHandOverRight(fakeConsulACL{selfErr: errors.New("Unexpected response code: 403 (ACL not found)")}, nil),
			Warning, "cannot tell whether the Consul token may hand leadership over: Unexpected response code: 403"},
		{"vault sudo and update", health.Vault, VaultStepDownRight([]string{"sudo", "update"}), OK, "may hand leadership over"},
		{"vault root", health.Vault, VaultStepDownRight([]string{"root"}), OK, "may hand leadership over"},
		{"vault update only", health.Vault, VaultStepDownRight([]string{"update"}), Warning,
			"the Vault token may not hand leadership over (capabilities on sys/step-down: update)"},
		{"vault deny", health.Vault, VaultStepDownRight([]string{"deny"}), Warning, "may not hand leadership over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := handOverFinding(ClusterInput{Product: tc.product, HandOver: tc.right})
			if f.Severity != tc.severity || !strings.Contains(f.What, tc.what) {
				t.Errorf("finding %v %q, want %v containing %q", f.Severity, f.What, tc.severity, tc.what)
			}
			if f.Severity == Warning && !strings.Contains(f.Fix, "give the token") {
				t.Errorf("fix %q names no right", f.Fix)
			}
		})
	}
}
