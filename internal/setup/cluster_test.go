package setup

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

func simClient(t *testing.T, cfg nomadsim.Config, token func(*nomadsim.Sim) string) *api.Client {
	t.Helper()
	s, err := nomadsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c, err := api.NewClient(&api.Config{Address: s.Address(), SecretID: token(s)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mgmt(s *nomadsim.Sim) string { return s.ManagementToken() }

// Preflight refuses, with the fix, each cluster that cannot run rollboot.
func TestPreflightRefuses(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cfg   nomadsim.Config
		token func(*nomadsim.Sim) string
		opts  Options
		want  []string
	}{
		{"Nomad too old", nomadsim.Config{Clients: 1, ACL: true, NomadVersion: "1.6.5"}, mgmt, release,
			[]string{"1.6.5", "too old", "upgrade Nomad"}},
		{"ACLs on, a client token", nomadsim.Config{Clients: 1, ACL: true}, func(s *nomadsim.Sim) string { return s.CreateToken("ops").SecretID }, release,
			[]string{"client token", "management token"}},
		{"ACLs on, an unknown token", nomadsim.Config{Clients: 1, ACL: true}, func(*nomadsim.Sim) string { return "00000000-0000-4000-8000-000000000000" }, release,
			[]string{"management token", "nomad acl bootstrap"}},
		{"no client runs privileged docker", nomadsim.Config{Clients: 2, ACL: true}, mgmt,
			Options{Driver: "docker", Image: "registry.example.com/rollboot:v1", Version: "v1", ReleaseURL: "https://x.example.com", StateNamespace: "default", Prefix: "rollboot"},
			[]string{"none of the 2 Nomad clients", "allow_privileged = true", "-driver raw_exec"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := simClient(t, tt.cfg, tt.token)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := Preflight(ctx, c, tt.opts)
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("%v, want an error with %q", err, w)
				}
			}
		})
	}
	// A cluster that can run it: ACLs on with a management token, raw_exec.
	c := simClient(t, nomadsim.Config{Clients: 1, ACL: true}, mgmt)
	if acls, err := Preflight(context.Background(), c, release); err != nil || !acls {
		t.Errorf("a cluster that can run rollboot: acls %v, %v", acls, err)
	}
	off := simClient(t, nomadsim.Config{Clients: 1}, func(*nomadsim.Sim) string { return "" })
	if acls, err := Preflight(context.Background(), off, release); err != nil || acls {
		t.Errorf("ACLs off: acls %v, %v", acls, err)
	}
}
