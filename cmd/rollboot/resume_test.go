//go:build !norollbootsim

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

// rollboot resume -group G lifts G's halt with the operator's token, recorded
// with its name; the rollout's halt and the pause stay. rollboot resume lifts
// the pause and the rollout's halt.
func TestResumeLiftsHalts(t *testing.T) {
	sim, c := simtest.Start(t, nomadsim.Config{Clients: 1, ACL: true}, nil)
	c.SetSecretID(sim.ManagementToken())
	ctx := context.Background()
	rules, err := os.ReadFile(filepath.Join("..", "..", "deploy", "acl", "rollboot-operator.policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ACLPolicies().Upsert(&api.ACLPolicy{Name: "rollboot-operator", Rules: string(rules)}, nil); err != nil {
		t.Fatal(err)
	}
	tok, _, err := c.ACLTokens().Create(&api.ACLToken{Name: "ops-bob", Type: "client", Policies: []string{"rollboot-operator"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(c.Variables(), "rollboot", "")
	if _, err := st.PutHost(ctx, store.HostRecord{Host: "client-1", BootID: "b"}); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Minute).UTC()
	halted := policy.HaltState{Halts: map[string]policy.Halt{
		"web":               {Scope: "web", Since: since, Failures: []policy.Failure{{Host: "web-1", Kind: policy.FailStuck}}},
		policy.RolloutScope: {Scope: policy.RolloutScope, Since: since},
	}}
	if _, err := st.PutHalts(ctx, halted, 0); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		out, _, err := runRoot(t, append(args, "-address", sim.Address(), "-token", tok.SecretID)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	run("pause", "-reason", "freeze")
	if out := run("resume", "-group", "db"); !strings.Contains(out, "Group db was neither paused nor halted.") {
		t.Errorf("resume -group db said %q", out)
	}
	if out := run("resume", "-group", "web"); !strings.Contains(out, `The halt of group "web" is lifted`) {
		t.Errorf("resume -group web said %q", out)
	}
	hs, _, err := st.Halts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hs.Halts["web"]; ok || hs.Resumes["web"].By != "token ops-bob" || len(hs.Halts) != 1 {
		t.Errorf("after resume -group web: %+v", hs)
	}
	if ctl, _ := st.Control(ctx); !ctl.Paused {
		t.Error("resume -group lifted the pause")
	}
	if out := run("resume"); !strings.Contains(out, "Rollout resumed.") || !strings.Contains(out, "The halt of the rollout is lifted") {
		t.Errorf("resume said %q", out)
	}
	hs, _, _ = st.Halts(ctx)
	if ctl, _ := st.Control(ctx); ctl.Paused || len(hs.Halts) != 0 || len(hs.Log) != 2 {
		t.Errorf("after resume: paused %v, halts %+v", ctl.Paused, hs)
	}
}
