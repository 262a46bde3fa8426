package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
)

func TestPolicyApproval(t *testing.T) {
	src := `
approval {
  webhook   = "https://approve.example/rollboot"
  timeout   = "5s"
  hold_slot = "30m"
  auth_env  = "APPROVAL_TOKEN"
}
group "db" {
  filter   = "NodePool == \"db\""
  approval = "manual"
}
group "web" {
  filter   = "NodePool == \"web\""
  approval = "webhook"
}
group "batch" {
  filter = "NodePool == \"batch\""
}
`
	p, err := ParsePolicy([]byte(src), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	c, err := CompilePolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	want := admission.ApprovalRules{Groups: map[string]string{"db": "manual", "web": "webhook"}, HoldSlot: 30 * time.Minute, Recheck: time.Minute}
	if got := c.cc.ApprovalRules(); !reflect.DeepEqual(got, want) {
		t.Errorf("rules %+v, want %+v", got, want)
	}
	if a := c.cc.Approval; a.Timeout != 5*time.Second || a.AuthHeader != "Authorization" || a.AuthEnv != "APPROVAL_TOKEN" {
		t.Errorf("approval block %+v", a)
	}
}

func TestPolicyApprovalErrors(t *testing.T) {
	src := `approval {
  auth_env    = "1X"
  auth_file   = "/etc/secret"
  auth_header = "Bad Header"
  timeout     = "0s"
}
group "web" {
  approval = "webhook"
}
group "db" {
  filter   = "NodePool == \"db\""
  approval = "yes"
}
`
	p, err := ParsePolicy([]byte(src), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	_, err = CompilePolicy(p)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`policy.hcl:2:17: approval.auth_env: "1X" is not an environment variable name`,
		`policy.hcl:3:17: approval.auth_file: set auth_env or auth_file, not both`,
		`policy.hcl:4:17: approval.auth_header: "Bad Header" is not an HTTP header name`,
		`policy.hcl:5:17: approval.timeout: must be greater than 0`,
		`policy.hcl:8:14: group "web".approval: approval = "webhook" needs the approval block's webhook URL`,
		`policy.hcl:12:14: group "db".approval: unknown approval "yes": use`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in\n%v", want, err)
		}
	}
}
