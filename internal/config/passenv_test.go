package config

import (
	"slices"
	"strings"
	"testing"
)

func TestPassEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		src     string
		want    []string
		wantErr string
	}{
		{"default: nothing passed on", ``, nil, ""},
		{"names", `agent {
  pass_env = ["VAULT_TOKEN", "CONSUL_HTTP_TOKEN"]
}`, []string{"VAULT_TOKEN", "CONSUL_HTTP_TOKEN"}, ""},
		{"a pair is not a name", `agent {
  pass_env = ["VAULT_TOKEN", "X=1"]
}`, nil, `t.hcl:2:30: agent.pass_env[1]: "X=1" is not an environment variable name`},
		{"no wildcards", `agent {
  pass_env = ["*_TOKEN"]
}`, nil, `agent.pass_env[0]: "*_TOKEN" is not an environment variable name`},
		{"not a list", `agent {
  pass_env = "VAULT_TOKEN"
}`, nil, "a list of strings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadBytes([]byte(tc.src), "t.hcl")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Agent.PassEnv, tc.want) {
				t.Errorf("pass_env = %q, want %q", c.Agent.PassEnv, tc.want)
			}
		})
	}
}
