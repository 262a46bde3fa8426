package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The release flavour, built with -tags norollbootsim, compiles, holds neither the
// emulator nor the demo (nor anything that imports them), and has no demo, sim,
// sim-ctl or bench command.
func TestReleaseFlavourHasNoEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	const pkg = "github.com/rollboot/rollboot/cmd/rollboot"
	out, err := exec.Command("go", "list", "-deps", "-tags", "norollbootsim", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"/internal/nomadsim", "/internal/demo", "/internal/simhost", "/internal/invariants", "/internal/bench"} {
			if strings.HasSuffix(dep, banned) {
				t.Errorf("the norollbootsim build depends on %s", dep)
			}
		}
	}
	bin := filepath.Join(t.TempDir(), "rollboot")
	if out, err := exec.Command("go", "build", "-tags", "norollbootsim", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build -tags norollbootsim: %v\n%s", err, out)
	}
	for _, cmd := range []string{"demo", "sim", "sim-ctl", "bench"} {
		out, err := exec.Command(bin, cmd, "--help").CombinedOutput()
		if err == nil || !strings.Contains(string(out), "unknown command") {
			t.Errorf("rollboot %s in the release flavour: err %v, output:\n%s", cmd, err, out)
		}
	}
	if out, err := exec.Command(bin, "agent", "--help").CombinedOutput(); err != nil {
		t.Errorf("rollboot agent --help in the release flavour: %v\n%s", err, out)
	}
}
