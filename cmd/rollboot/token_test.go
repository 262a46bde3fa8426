//go:build !norollbootsim

package main

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

// A refused command tells apart a token Nomad does not know, no token at all,
// and a token Nomad knows that lacks the rights (naming it, its policies and
// the policy file that grants them); no hint shows the secret.
func TestDeniedTokenHints(t *testing.T) {
	sim, c := simtest.Start(t, nomadsim.Config{Clients: 1, ACL: true}, nil)
	c.SetSecretID(sim.ManagementToken())
	ctx := context.Background()
	if _, err := store.New(c.Variables(), "rollboot", "").PutHost(ctx, store.HostRecord{Host: "client-1", BootID: "b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ACLPolicies().Upsert(&api.ACLPolicy{Name: "read-only",
		Rules: `namespace "default" {
  variables {
    path "rollboot/*" {
      capabilities = ["read", "list"]
    }
  }
}`}, nil); err != nil {
		t.Fatal(err)
	}
	ro, _, err := c.ACLTokens().Create(&api.ACLToken{Name: "ops-readonly", Type: "client", Policies: []string{"read-only"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const unknownUUID = "0b7f3e9c-5d41-4a2e-9c1f-7e0d2b6a8c53"
	for _, tt := range []struct {
		name, token string
		args        []string
		want        []string
		not         []string
	}{
		{"unknown UUID", unknownUUID, []string{"status"}, []string{"does not know the token given", "nomad acl token self"}, []string{"lacks"}},
		{"not a UUID", "not-a-token", []string{"pause"}, []string{"does not know the token given"}, []string{"lacks"}},
		{"no token", "", []string{"status"}, []string{"no token is set", "ACLs are on", operatorPolicy}, nil},
		{"known, lacks write", ro.SecretID, []string{"pause"},
			[]string{"permission denied", `token "ops-readonly" (policies: read-only) lacks`, `write on "rollboot/control"`, operatorPolicy},
			[]string{"does not know"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append(tt.args, "-address", sim.Address())
			if tt.token != "" {
				args = append(args, "-token", tt.token)
			}
			out, _, err := runRoot(t, args...)
			if err == nil {
				t.Fatalf("no error; printed:\n%s", out)
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(msg, w) {
					t.Errorf("error says %q:\n%s", w, msg)
				}
			}
			if tt.token != "" && strings.Contains(msg, tt.token) {
				t.Errorf("error shows the token:\n%s", msg)
			}
		})
	}
	// The read-only token reads.
	if out, _, err := runRoot(t, "status", "-address", sim.Address(), "-token", ro.SecretID); err != nil || !strings.Contains(out, "client-1") {
		t.Errorf("status with a read-only token: %v\n%s", err, out)
	}
}
