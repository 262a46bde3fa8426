package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The agent process measured: the -agent-exe binary when given; else a release
// build of the source tree, or this binary when there is none, saying why.
func TestAgentBinary(t *testing.T) {
	progress := func(string, ...any) {}
	ctx := context.Background()
	tests := []struct {
		name       string
		o          Options
		outside    bool // run outside the source tree
		want, what string
	}{
		{name: "-agent-exe wins", o: Options{Exe: "/self", AgentExe: "/other", ReleaseAgent: true}, want: "/other", what: "the -agent-exe binary"},
		{name: "no release build asked", o: Options{Exe: "/self"}, want: "/self", what: "this binary"},
		{name: "no binary at all", o: Options{ReleaseAgent: true}, want: "", what: "this binary"},
		{name: "outside the source tree", o: Options{Exe: "/self", ReleaseAgent: true}, outside: true,
			want: "/self", what: "this binary, not a release build (go build: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.outside {
				if _, err := exec.LookPath("go"); err != nil {
					t.Skip("no go command")
				}
				t.Chdir(t.TempDir())
			}
			exe, what, cleanup := agentBinary(ctx, &tt.o, progress)
			defer cleanup()
			if exe != tt.want || !strings.HasPrefix(what, tt.what) {
				t.Errorf("agentBinary = %q, %q; want %q, %q...", exe, what, tt.want, tt.what)
			}
		})
	}
}

// In the source tree the release build is built, runs, and is the release
// flavour: without the emulator's commands.
func TestBuildRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the release binary")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	exe, err := buildRelease(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(exe, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", exe, err, out)
	}
	if !strings.Contains(string(out), "agent") || strings.Contains(string(out), "demo") {
		t.Errorf("not the release flavour (an agent command, no demo):\n%s", out)
	}
}

// The agent process runs with what the shipped agents' jobs and unit add to
// its environment, so that it measures what they run.
func TestAgentEnvIsTheShippedOne(t *testing.T) {
	for _, f := range []string{"nomad/rollboot.nomad.hcl", "nomad/rollboot-docker.nomad.hcl", "systemd/rollboot-agent.service"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range agentEnv {
			name, val, _ := strings.Cut(kv, "=")
			hcl := regexp.MustCompile(`(?m)^\s*` + name + `\s*=\s*"` + regexp.QuoteMeta(val) + `"\s*$`)
			unit := "Environment=" + kv + "\n"
			if !hcl.Match(b) && !strings.Contains(string(b), unit) {
				t.Errorf("deploy/%s does not set %s", f, kv)
			}
		}
	}
}
