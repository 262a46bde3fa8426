package config

import (
	"strings"
	"testing"

	"github.com/rollboot/rollboot/internal/workload"
)

func TestWorkloads(t *testing.T) {
	if got := DefaultRules().cc.Workloads.Settings(); got != workload.Default() {
		t.Errorf("default workloads = %+v, want %+v", got, workload.Default())
	}
	src := "workloads {\n  job_filter = \"Meta.rollboot_block == \\\"true\\\"\"\n  deployments = false\n  deployment_filter = \"Type == \\\"service\\\"\"\n  blocked_evals = false\n}\n"
	p, err := ParsePolicy([]byte(src), "w.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r, err := CompilePolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	want := workload.Settings{JobFilter: `Meta.rollboot_block == "true"`, DeploymentFilter: `Type == "service"`}
	if got := r.cc.Workloads.Settings(); got != want {
		t.Errorf("workloads = %+v, want %+v", got, want)
	}
	if got := DefaultRules().cc.With(r).Workloads.Settings(); got != want {
		t.Errorf("With: workloads = %+v, want %+v", got, want)
	}
	for _, line := range []string{`job_filter        = "Meta.rollboot_block == \"true\""`, "deployments       = false", "blocked_evals     = false"} {
		if !strings.Contains(r.String(), line) {
			t.Errorf("policy rendering lacks %q:\n%s", line, r.String())
		}
	}
	if !strings.Contains(DefaultRules().String(), "workloads {\n  job_filter        = \"\"\n  deployments       = true\n") {
		t.Errorf("default rendering lacks the workloads defaults:\n%s", DefaultRules().String())
	}
}

func TestWorkloadsErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"bad job filter", "workloads {\n  job_filter = \"Meta.x ==\"\n}\n", `w.hcl:2:16: workloads.job_filter: invalid filter expression "Meta.x =="`},
		{"bad deployment filter", "workloads {\n  deployment_filter = \"((\"\n}\n", `w.hcl:2:23: workloads.deployment_filter: invalid filter expression`},
		{"not a bool", "workloads {\n  blocked_evals = \"maybe\"\n}\n", `w.hcl:2:19: workloads.blocked_evals`},
		{"in a local file", "workloads {\n}\n", "w.hcl:1:1: workloads block is a rollout policy setting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.name == "in a local file" {
				_, err = LoadBytes([]byte(tt.src), "w.hcl")
			} else {
				p, perr := ParsePolicy([]byte(tt.src), "w.hcl")
				if perr != nil {
					t.Fatal(perr)
				}
				_, err = CompilePolicy(p)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %s", err, tt.want)
			}
		})
	}
}
