package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

// policyCLI runs `rollboot policy ...` against the emulator.
type policyCLI struct {
	t   *testing.T
	sim *nomadsim.Sim
	st  *store.Store
	dir string
}

func newPolicyCLI(t *testing.T) *policyCLI {
	t.Helper()
	sim, c := simtest.Start(t, nomadsim.Config{Clients: 2, ClientPools: []string{"web"}}, nil)
	return &policyCLI{t: t, sim: sim, st: store.New(c.Variables(), "rollboot", ""), dir: t.TempDir()}
}

// file writes a policy file and returns its path.
func (p *policyCLI) file(name, src string) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// run runs the command and returns its output and error.
func (p *policyCLI) run(args ...string) (string, error) {
	cmd := newRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{}) // warnings
	if args[1] != "validate" {
		args = append(args, "--address", p.sim.Address())
	}
	cmd.SetArgs(normalizeArgs(cmd, args))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func (p *policyCLI) must(args ...string) string {
	p.t.Helper()
	out, err := p.run(args...)
	if err != nil {
		p.t.Fatalf("rollboot %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (p *policyCLI) stored() store.PolicyRecord {
	p.t.Helper()
	rec, err := p.st.Policy(context.Background())
	if err != nil {
		p.t.Fatal(err)
	}
	return rec
}

const cliPolicy = "group \"web\" {\n  filter = \"NodePool == \\\"web\\\"\"\n}\n"

func TestPolicyValidate(t *testing.T) {
	p := newPolicyCLI(t)
	out := p.must("policy", "validate", p.file("ok.hcl", cliPolicy))
	if !strings.Contains(out, "ok.hcl: a valid policy (groups: web, default).") {
		t.Errorf("validate said %q", out)
	}
	bad := p.file("bad.hcl", "window \"w\" {\n  start = \"25:00\"\n  end = \"02:00\"\n}\nagent {}\n")
	_, err := p.run("policy", "validate", bad)
	if err == nil || !strings.Contains(err.Error(), bad+":2:11: window \"w\".start") || !strings.Contains(err.Error(), bad+":5:1: agent block is a local setting") {
		t.Fatalf("validate of a bad file: %v", err)
	}
}

func TestPolicyApplyShowHistory(t *testing.T) {
	p := newPolicyCLI(t)
	// An agent runs: there is state, and no policy.
	if _, err := p.st.PutHost(context.Background(), store.HostRecord{Host: "client-1", BootID: "b"}); err != nil {
		t.Fatal(err)
	}
	out := p.must("policy", "show")
	if !strings.Contains(out, "No policy is stored at rollboot/policy: the coordinator enforces the safe default") {
		t.Errorf("show with none stored: %q", out)
	}
	// -json with none stored is JSON too.
	var none struct{ Stored *bool }
	if err := json.Unmarshal([]byte(p.must("policy", "show", "-json")), &none); err != nil || none.Stored == nil || *none.Stored {
		t.Errorf("show -json with none stored: %v %+v", err, none)
	}
	if out := strings.TrimSpace(p.must("policy", "history", "-json")); out != "[]" {
		t.Errorf("history -json with none stored: %q", out)
	}
	out = p.must("policy", "apply", p.file("v1.hcl", cliPolicy))
	for _, want := range []string{"this file becomes version 1", `+ group "web".filter`, ": default => web", "Policy version 1 applied"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply lacks %q:\n%s", want, out)
		}
	}
	v1 := p.stored()
	out = p.must("policy", "apply", p.file("v2.hcl", cliPolicy+"window \"night\" {\n  start = \"22:00\"\n  end = \"04:00\"\n}\n"), "-check-index", fmt.Sprint(v1.ModifyIndex))
	for _, want := range []string{"Stored policy: version 1", `+ window "night".start = "22:00"`, "Hosts: no host changes group.", "Policy version 2 applied"} {
		if !strings.Contains(out, want) {
			t.Errorf("apply lacks %q:\n%s", want, out)
		}
	}
	// ACLs are off: /v1/acl/token/self answers Nomad's "ACLs disabled token",
	// which names nobody, so the applier is user@host.
	if rec := p.stored(); rec.Version != 2 || rec.AppliedBy == "" || strings.Contains(rec.AppliedBy, "secret") ||
		strings.HasPrefix(rec.AppliedBy, "token ") {
		t.Errorf("stored: %+v", rec.PolicyVersion)
	}

	out = p.must("policy", "show")
	if !strings.HasPrefix(out, "# Version 2, applied by ") || !strings.Contains(out, "window \"night\"") || !strings.Contains(out, "(stored, modify index") {
		t.Errorf("show:\n%s", out)
	}
	out = p.must("policy", "show", "-version", "1")
	if !strings.HasPrefix(out, "# Version 1, ") || strings.Contains(out, "night") || !strings.HasSuffix(out, cliPolicy) {
		t.Errorf("show -version 1:\n%s", out)
	}
	if _, err := p.run("policy", "show", "-version", "7"); err == nil || !strings.Contains(err.Error(), "policy version 7 is not kept") {
		t.Errorf("show -version 7: %v", err)
	}
	for _, tc := range []struct {
		args    []string
		version int
		stored  bool
	}{{[]string{"policy", "show", "-json"}, 2, true}, {[]string{"policy", "show", "-json", "-version", "1"}, 1, false}} {
		var got struct {
			Version     int    `json:"version"`
			Source      string `json:"source"`
			AppliedBy   string `json:"applied_by"`
			Stored      bool   `json:"stored"`
			ModifyIndex uint64 `json:"modify_index"`
		}
		if err := json.Unmarshal([]byte(p.must(tc.args...)), &got); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got.Version != tc.version || got.Stored != tc.stored || (got.ModifyIndex != 0) != tc.stored || got.Source == "" || got.AppliedBy == "" {
			t.Errorf("%v: %+v", tc.args, got)
		}
	}
	out = p.must("policy", "history")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "VERSION") || !strings.HasPrefix(lines[1], "2 ") || !strings.HasPrefix(lines[2], "1 ") ||
		!strings.Contains(lines[2], "v1.hcl") {
		t.Errorf("history:\n%s", out)
	}
	var versions []store.PolicyVersion
	if err := json.Unmarshal([]byte(p.must("policy", "history", "-json")), &versions); err != nil ||
		len(versions) != 2 || versions[0].Version != 2 || versions[1].Filename == "" || versions[1].Source == "" {
		t.Errorf("history -json: %v %+v", err, versions)
	}
}

// Applying the stored version again writes nothing: a new version would only
// push a real one out of the history kept.
func TestPolicyApplyUnchanged(t *testing.T) {
	p := newPolicyCLI(t)
	p.must("policy", "apply", p.file("v1.hcl", cliPolicy))
	v1 := p.stored()
	out := p.must("policy", "apply", p.file("again.hcl", cliPolicy))
	if !strings.Contains(out, fmt.Sprintf("Unchanged: the file is stored version %d (modify index %d); nothing was written.", v1.Version, v1.ModifyIndex)) {
		t.Errorf("output %q, want it to say nothing changed", out)
	}
	if got := p.stored(); got.Version != v1.Version || got.ModifyIndex != v1.ModifyIndex || len(got.History) != 0 {
		t.Errorf("stored version %d index %d history %d, want version %d index %d and no history", got.Version, got.ModifyIndex, len(got.History), v1.Version, v1.ModifyIndex)
	}
}

// A stale -check-index and an invalid file are refused, and the stored policy
// stays as it was.
func TestPolicyApplyRefused(t *testing.T) {
	p := newPolicyCLI(t)
	p.must("policy", "apply", p.file("v1.hcl", cliPolicy))
	v1 := p.stored()
	p.must("policy", "apply", p.file("v2.hcl", cliPolicy+"drain {\n  deadline = \"2h\"\n}\n"))
	v2 := p.stored()

	_, err := p.run("policy", "apply", p.file("v3.hcl", "group \"x\" {}\n"), "-check-index", fmt.Sprint(v1.ModifyIndex))
	want := fmt.Sprintf("-check-index wants modify index %d, but version %d is stored, applied by ", v1.ModifyIndex, v2.Version)
	if err == nil || !strings.Contains(err.Error(), "CAS conflict") || !strings.Contains(err.Error(), want) ||
		!strings.Contains(err.Error(), fmt.Sprintf("at modify index %d; nothing was written", v2.ModifyIndex)) {
		t.Fatalf("a stale -check-index: %v, want it to say %q and the index stored", err, want)
	}
	_, err = p.run("policy", "apply", p.file("bad.hcl", "group \"x\" {\n  concurrency = \"two\"\n}\n"))
	if err == nil || !strings.Contains(err.Error(), "bad.hcl:2:17: group \"x\".concurrency: must be a whole number") {
		t.Fatalf("an invalid file: %v", err)
	}
	if got := p.stored(); got.Version != v2.Version || got.ModifyIndex != v2.ModifyIndex {
		t.Errorf("the stored policy changed: version %d index %d, want %d %d", got.Version, got.ModifyIndex, v2.Version, v2.ModifyIndex)
	}
}

// `policy apply` shows how the candidate changes `rollboot plan` before it
// stores it: here both web hosts need a reboot and move from the safe default's
// group to web, two at a time instead of one.
func TestPolicyApplyShowsThePlanChange(t *testing.T) {
	p := newPolicyCLI(t)
	ctx := context.Background()
	for _, h := range p.sim.Hosts() {
		if h.NodeID == "" {
			continue
		}
		rec := store.HostRecord{Host: h.Name, NodeID: h.NodeID, BootID: "b1", Roles: []string{"nomad-client"},
			RebootRequired: true, Reason: "kernel", RequestedAt: time.Now().Add(-time.Minute)}
		if _, err := p.st.PutHost(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	cmd := newRootCmd()
	var out, warn bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&warn)
	cmd.SetArgs(normalizeArgs(cmd, []string{"policy", "apply", p.file("v1.hcl", "group \"web\" {\n  filter = \"NodePool == \\\"web\\\"\"\n  concurrency = 2\n}\n"),
		"--address", p.sim.Address()}))
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("apply: %v\n%s", err, out.String())
	}
	if warn.Len() != 0 {
		t.Errorf("apply warned: %s", warn.String())
	}
	text := out.String()
	i := strings.Index(text, "How the plan changes (rollboot plan):")
	if i < 0 {
		t.Fatalf("apply does not show the plan change:\n%s", text)
	}
	change := text[i:]
	for _, h := range []string{"client-1", "client-2"} {
		if !strings.Contains(change, h) || !strings.Contains(change, "default -> web") {
			t.Errorf("plan change lacks %s moving from default to web:\n%s", h, change)
		}
	}
	if !strings.Contains(change, "Policy version 1 applied") {
		t.Errorf("the policy was not applied after the preview:\n%s", text)
	}
}

// policy validate and policy apply warn of a group that inherits every window
// of the file while another names its own.
func TestPolicyWarnsOfInheritedWindows(t *testing.T) {
	p := newPolicyCLI(t)
	src := "window \"night\" {\n  start = \"22:00\"\n  end = \"04:00\"\n}\n" +
		"group \"db\" {\n  filter = \"NodePool == \\\"db\\\"\"\n  windows = [\"night\"]\n}\ngroup \"web\" {}\n"
	path := p.file("windows.hcl", src)
	for _, args := range [][]string{{"policy", "validate", path}, {"policy", "apply", path, "--address", p.sim.Address()}} {
		cmd := newRootCmd()
		var stderr bytes.Buffer
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&stderr)
		cmd.SetArgs(args)
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if want := `warning: group "web" names no windows: it inherits every window of the file ("night")`; !strings.Contains(stderr.String(), want) {
			t.Errorf("%v: stderr %q, want %q", args[:2], stderr.String(), want)
		}
	}
}
