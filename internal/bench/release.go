package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// releaseFlags are the build settings of scripts/release (its build function)
// that change what the binary holds, so how much of it a process maps: no cgo
// (a static binary, no C library), the release flavour without the emulator
// (-tags norollbootsim), no paths, no symbol table and no DWARF. The version
// stamps (-X) are left out: they change a few bytes, not the layout.
var releaseFlags = []string{"-trimpath", "-buildvcs=false", "-tags", "norollbootsim", "-ldflags", "-s -w -buildid="}

// releaseEnv is scripts/release's environment for a build for this machine:
// GOFLAGS cleared, no cgo, the baseline instruction sets.
func releaseEnv() []string {
	env := make([]string, 0, len(os.Environ())+3)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") && !strings.HasPrefix(kv, "CGO_ENABLED=") &&
			!strings.HasPrefix(kv, "GOAMD64=") && !strings.HasPrefix(kv, "GOARM64=") {
			env = append(env, kv)
		}
	}
	return append(env, "CGO_ENABLED=0", "GOAMD64=v1", "GOARM64=v8.0")
}

// buildRelease builds the release binary of the rollboot source tree the bench
// runs in (the working directory's module) into dir, with the Go toolchain on
// the PATH, and returns its path. Its error says why there is none: no
// toolchain, not in the source tree, a failed build.
func buildRelease(ctx context.Context, dir string) (string, error) {
	exe := filepath.Join(dir, "rollboot")
	args := append([]string{"build"}, releaseFlags...)
	args = append(args, "-o", exe, "github.com/rollboot/rollboot/cmd/rollboot")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = releaseEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if line, _, _ := strings.Cut(msg, "\n"); line != "" {
			msg = line
		} else {
			msg = err.Error()
		}
		return "", fmt.Errorf("go build: %s", msg)
	}
	return exe, nil
}

// agentBinary is the binary whose agent process is measured and what it is:
// o.AgentExe when given; else, with o.ReleaseAgent, a release build of the
// source tree in a temporary folder that cleanup removes, or o.Exe when it
// cannot be built, with why; else o.Exe.
func agentBinary(ctx context.Context, o *Options, progress func(string, ...any)) (exe, what string, cleanup func()) {
	cleanup = func() {}
	switch {
	case o.AgentExe != "":
		return o.AgentExe, "the -agent-exe binary", cleanup
	case !o.ReleaseAgent || o.Exe == "" || o.Only == "rollout": // no agent process measured
		return o.Exe, "this binary", cleanup
	}
	progress("agent process: building the release binary (as scripts/release)")
	dir, err := os.MkdirTemp("", "rollboot-bench-release-")
	if err != nil {
		return o.Exe, fmt.Sprintf("this binary, not a release build (%v)", err), cleanup
	}
	cleanup = func() { os.RemoveAll(dir) }
	exe, err = buildRelease(ctx, dir)
	if err != nil {
		return o.Exe, fmt.Sprintf("this binary, not a release build (%v)", err), cleanup
	}
	return exe, "a release build", cleanup
}
