package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A candidate policy is checked as `rollboot policy validate` checks it (every
// problem at once, with file:line:col; a local setting is refused); a good one
// brings its groups, windows and drain settings, and the connection stays the
// one in force.
func TestLoadCandidatePolicy(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inForce, err := compileConfig(configFlags{address: "http://nomad.example:4646"})
	if err != nil {
		t.Fatal(err)
	}
	bad := write("bad.hcl", "group \"web\" {\n  concurrency = 1\n  windows = [\"nope\"]\n}\ndrain {\n  deadline = \"soon\"\n}\n")
	_, err = loadCandidatePolicy(inForce, bad)
	if err == nil {
		t.Fatal("a candidate naming an undefined window and a malformed deadline was accepted")
	}
	for _, want := range []string{bad + ":3:", bad + ":6:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	local := write("local.hcl", "nomad {\n  address = \"http://elsewhere:4646\"\n}\n")
	if _, err := loadCandidatePolicy(inForce, local); err == nil || !strings.Contains(err.Error(), local+":1:1: nomad block is a local setting") {
		t.Errorf("a candidate with a nomad block: %v", err)
	}
	good := write("good.hcl", "group \"web\" {\n  filter = \"NodePool == \\\"web\\\"\"\n  concurrency = 3\n}\ndrain {\n  deadline = \"7m\"\n}\n")
	cand, err := loadCandidatePolicy(inForce, good)
	if err != nil {
		t.Fatal(err)
	}
	if len(cand.Policy.Groups) != 1 || cand.Policy.Groups[0].Name != "web" || cand.Policy.Groups[0].Concurrency != 3 ||
		cand.Drain.Deadline.String() != "7m0s" {
		t.Errorf("candidate policy not taken: groups %+v, drain %+v", cand.Policy.Groups, cand.Drain)
	}
	if cand.Nomad.Address != "http://nomad.example:4646" {
		t.Errorf("connection %q, want the one in force", cand.Nomad.Address)
	}
	if len(inForce.Policy.Groups) != 0 {
		t.Error("the configuration in force was changed")
	}
}
