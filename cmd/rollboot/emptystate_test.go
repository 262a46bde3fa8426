//go:build !norollbootsim

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
)

// runRoot runs the real command tree with args (through normalizeArgs) and
// returns what it printed on stdout and stderr, and its error.
func runRoot(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := newRootCmd()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(normalizeArgs(cmd, args))
	err = cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// A prefix or namespace holding no rollboot state at all is an error naming
// both, on every command that reads or changes the state; only the first
// `policy apply` may find it empty. Once anything is stored, the same
// commands run.
func TestEmptyStateIsAnError(t *testing.T) {
	sim, _ := simtest.Start(t, nomadsim.Config{Clients: 1}, nil)
	addr := sim.Address()
	for _, args := range [][]string{
		{"status"}, {"status", "-json"}, {"history"}, {"plan"}, {"pause"}, {"resume"}, {"policy", "show"},
		{"policy", "history"}, {"control", "reset"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, _, err := runRoot(t, append(args, "-address", addr, "-prefix", "nothing-here")...)
			if err == nil {
				t.Fatalf("no error on an empty prefix; printed:\n%s", out)
			}
			for _, w := range []string{`no rollboot state under prefix "nothing-here" in namespace "default" at ` + addr, "-prefix", "-namespace"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
		})
	}
	dir := t.TempDir()
	p := &policyCLI{t: t, sim: sim, dir: dir}
	file := p.file("p.hcl", "group \"all\" {\n  concurrency = 1\n}\n")
	if out, _, err := runRoot(t, "policy", "apply", file, "-address", addr, "-prefix", "fresh"); err != nil {
		t.Fatalf("the first policy apply on an empty prefix: %v\n%s", err, out)
	}
	if out, _, err := runRoot(t, "status", "-address", addr, "-prefix", "fresh"); err != nil {
		t.Fatalf("status once a policy is stored: %v\n%s", err, out)
	}
}
