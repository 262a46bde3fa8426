//go:build !norollbootsim

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

// Every control change records who made it as `policy apply` does: the ACL
// token's name, for request, pause, cancel and release alike; status shows
// who paused and who canceled a need.
func TestControlChangesRecordTheTokenName(t *testing.T) {
	sim, c := simtest.Start(t, nomadsim.Config{Clients: 2, ACL: true}, nil)
	c.SetSecretID(sim.ManagementToken())
	ctx := context.Background()
	rules, err := os.ReadFile(filepath.Join("..", "..", "deploy", "acl", "rollboot-operator.policy.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ACLPolicies().Upsert(&api.ACLPolicy{Name: "rollboot-operator", Rules: string(rules)}, nil); err != nil {
		t.Fatal(err)
	}
	tok, _, err := c.ACLTokens().Create(&api.ACLToken{Name: "ops-alice", Type: "client", Policies: []string{"rollboot-operator"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(c.Variables(), "rollboot", "")
	for _, h := range []string{"client-1", "client-2"} {
		if _, err := st.PutHost(ctx, store.HostRecord{Host: h, BootID: "b", RebootRequired: h == "client-1", RequestedAt: time.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.PutPlan(ctx, store.Plan{Host: "client-2", Phase: store.PhaseStuck, GrantID: "g1", PhaseSince: time.Now()}); err != nil {
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
	var done struct{ Command, Host, Message, By string }
	if err := json.Unmarshal([]byte(run("cancel", "client-1", "-json")), &done); err != nil ||
		done.Command != "cancel" || done.Host != "client-1" || done.By != "token ops-alice" || !strings.Contains(done.Message, "canceled") {
		t.Errorf("cancel -json: %v %+v", err, done)
	}
	run("release", "client-2")
	run("request", "client-2")
	ctl, err := st.Control(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const by = "token ops-alice"
	if ctl.PausedBy != by || ctl.CanceledBy["client-1"] != by || ctl.ReleasedBy["client-2"] != by || ctl.Requests["client-2"].By != by {
		t.Errorf("recorded: paused by %q, canceled by %q, released by %q, requested by %q; want %q each",
			ctl.PausedBy, ctl.CanceledBy["client-1"], ctl.ReleasedBy["client-2"], ctl.Requests["client-2"].By, by)
	}
	if out := run("status"); !strings.Contains(out, "Rollout paused: freeze (paused by token ops-alice)") {
		t.Errorf("status does not say who paused:\n%s", out)
	}
	out := run("status", "client-1")
	for _, w := range []string{"by token ops-alice (rollboot cancel)", "Canceled      at "} {
		if !strings.Contains(out, w) {
			t.Errorf("status client-1 lacks %q:\n%s", w, out)
		}
	}
	if out := run("status", "client-2"); !strings.Contains(out, "Request       at ") || !strings.Contains(out, "by token ops-alice") {
		t.Errorf("status client-2 does not say who asked:\n%s", out)
	}
	run("resume")
	if ctl, err := st.Control(ctx); err != nil || ctl.Paused || ctl.PausedBy != "" {
		t.Errorf("after resume: paused %v by %q (%v)", ctl.Paused, ctl.PausedBy, err)
	}
}
