package main

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/nomadsim"
)

// The configuration is compiled (checked and typed) in exactly one place of the
// release binary: configFlags.load, called once per command. Everything else takes the
// compiled configuration as is. The emulator, the demo, the benchmark and the tests
// are left out: they load their own configurations.
func TestConfigCompiledInOnePlace(t *testing.T) {
	skip := []string{"internal/config", "internal/nomadsim", "internal/simhost", "internal/demo", "internal/invariants",
		"internal/e2e", "internal/deploytest", "internal/bench"}
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var calls, loads []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if slices.Contains(skip, rel) || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "load" && len(call.Args) == 0 {
					loads = append(loads, rel+": load()")
				}
			}
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "config" {
				switch sel.Sel.Name {
				case "Compile", "Load", "LoadBytes":
					calls = append(calls, rel+": config."+sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"cmd/rollboot/common.go: config.Compile"}; !slices.Equal(calls, want) {
		t.Errorf("configuration compiled at %q, want only %q", calls, want)
	}
	// One load per command: clientCommand's for the commands that talk to Nomad
	// (it hands their run what it loaded), setup's for the agent and the
	// coordinator, doctor's, which reports what clientCommand refuses (no
	// state at the prefix, Nomad not answering) as findings, and `rollboot
	// setup`'s, which runs before rollboot has any state.
	if want := []string{"cmd/rollboot/cli.go: load()", "cmd/rollboot/daemons.go: load()", "cmd/rollboot/doctor.go: load()", "cmd/rollboot/setup.go: load()"}; !slices.Equal(loads, want) {
		t.Errorf("configuration loaded at %q, want only %q", loads, want)
	}
}

func loadWith(t *testing.T, file string, env map[string]string, args ...string) (*configFlags, error) {
	t.Helper()
	for _, k := range []string{"NOMAD_ADDR", "NOMAD_TOKEN", "NOMAD_NAMESPACE", "NOMAD_REGION", "NOMAD_SKIP_VERIFY"} {
		t.Setenv(k, env[k])
	}
	var cf configFlags
	cmd := &cobra.Command{Use: "x"}
	cf.register(cmd.Flags())
	if file != "" {
		p := filepath.Join(t.TempDir(), "rollboot.hcl")
		if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", p)
	}
	return &cf, cmd.ParseFlags(args)
}

// load merges the file, the environment and the flags, then compiles once:
// flags win, and every problem of the result is reported at once with where
// its value was written.
func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		env     map[string]string
		args    []string
		address string
		prefix  string
		wantErr []string // lines, after the file name
	}{
		{name: "defaults", address: "http://127.0.0.1:4646", prefix: "rollboot"},
		{name: "file, then environment, then flags",
			file: "state {\n  prefix = \"file\"\n}\n", env: map[string]string{"NOMAD_ADDR": "http://env:4646"},
			args: []string{"--prefix", "flag"}, address: "http://env:4646", prefix: "flag"},
		{name: "the flag wins over the environment", env: map[string]string{"NOMAD_ADDR": "http://env:4646"},
			args: []string{"--address", "http://flag:4646"}, address: "http://flag:4646", prefix: "rollboot"},
		{name: "a file value wins over the environment", file: "nomad {\n  address = \"http://file:4646\"\n}\n",
			env: map[string]string{"NOMAD_ADDR": "http://env:4646"}, address: "http://file:4646", prefix: "rollboot"},
		{name: "decoding and checking problems together",
			file: "agent {\n  sentinel_command_interval = \"1x\"\n}\ngroup \"a\" {\n  concurrency = 0\n}\n",
			env:  map[string]string{"NOMAD_NAMESPACE": "*"},
			wantErr: []string{
				"$NOMAD_NAMESPACE: nomad.namespace: invalid namespace \"*\"",
				"rollboot.hcl:2:31: agent.sentinel_command_interval: invalid duration \"1x\"",
				"rollboot.hcl:4:1: group \"a\" block is a rollout policy setting, stored in the cluster: move it to a policy file and run `rollboot policy apply FILE`",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cf, err := loadWith(t, tt.file, tt.env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			cc, err := cf.load()
			if tt.wantErr != nil {
				if err == nil {
					t.Fatal("no error")
				}
				lines := strings.Split(err.Error(), "\n")
				if len(lines) != len(tt.wantErr) {
					t.Fatalf("errors:\n%v\nwant %d", err, len(tt.wantErr))
				}
				for i, w := range tt.wantErr {
					if !strings.Contains(lines[i], w) {
						t.Errorf("error %d = %q, want %q", i, lines[i], w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cc.Nomad.Address != tt.address || cc.State.Prefix != tt.prefix {
				t.Errorf("address %q, prefix %q; want %q, %q", cc.Nomad.Address, cc.State.Prefix, tt.address, tt.prefix)
			}
		})
	}
}

// The agent and the coordinator log their configuration once at start, never
// the token.
func TestSetupLogsConfigurationWithoutToken(t *testing.T) {
	const token = "s3cr3t-7f1c-token"
	cf, err := loadWith(t, "state {\n  prefix = \"web\"\n}\n", map[string]string{"NOMAD_TOKEN": token})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := &cobra.Command{Use: "agent"}
	cmd.SetErr(&out)
	cfg, logger, err := setup(cmd, cf, &logFlags{level: "info"}, "agent")
	if err != nil {
		t.Fatal(err)
	}
	// A refused token is logged once, naming the agent's policy file.
	for range 3 {
		logger.Warn("watch plan failed", "err", errors.New("Unexpected response code: 403 (Permission denied)"))
	}
	if cfg.Nomad.Token.Reveal() != token {
		t.Fatal("the token was not loaded")
	}
	log := out.String()
	if strings.Count(log, "msg=configuration") != 1 || !strings.Contains(log, "config.nomad.token=<redacted>") ||
		!strings.Contains(log, "config.state_prefix=web") {
		t.Errorf("log:\n%s", log)
	}
	if strings.Count(log, "403") != 1 || !strings.Contains(log, "deploy/acl/rollboot-agent.policy.hcl") {
		t.Errorf("a refusal repeated three times, logged as:\n%s", log)
	}
	if strings.Contains(log, token) || strings.Contains(log, "s3cr3t") {
		t.Errorf("the log shows the token:\n%s", log)
	}
	// The version check, which every shipped policy refuses (no agent rule)
	// and which goes on without it, stays a warning and names no policy.
	out.Reset()
	if err := daemon.CheckNomadVersion(refusedSelf{}, logger); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, versionUnchecked) || strings.Contains(got, "fix=") {
		t.Errorf("the version check refused, logged as:\n%s", got)
	}
	if got := aclPolicyFile(cfg, "coordinator"); got != "deploy/acl/rollboot-coordinator.policy.hcl" {
		t.Errorf("the coordinator's policy file: %q", got)
	}
	cfg.Coordinator.Enabled = true
	if got := aclPolicyFile(cfg, "agent"); got != "deploy/acl/rollboot-agent-candidate.policy.hcl" {
		t.Errorf("a candidate agent's policy file: %q", got)
	}
}

// refusedSelf is a Nomad agent that refuses the token /v1/agent/self.
type refusedSelf struct{}

func (refusedSelf) Self() (*api.AgentSelf, error) {
	return nil, errors.New("failed querying self endpoint: Unexpected response code: 403 (Permission denied)")
}

// A command that talks to Nomad gets the configuration and client clientCommand
// loaded for it, rather than loading (and checking) them again.
func TestClientCommandHandsOverItsConfiguration(t *testing.T) {
	sim, err := nomadsim.New(nomadsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	var got *config.Compiled
	var cf configFlags
	cmd := clientCommand(&cf, &cobra.Command{Use: "probe", Annotations: map[string]string{emptyStateOK: "yes"}}, func(_ *cobra.Command, _ []string, n nomadConn) error {
		if n.client == nil {
			t.Error("no client")
		}
		got = n.cfg
		return nil
	}, nil)
	cf.register(cmd.Flags())
	cmd.SetArgs([]string{"--address", sim.Address(), "--prefix", "probe"})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil || got.Nomad.Address != sim.Address() || got.State.Prefix != "probe" {
		t.Errorf("configuration handed over: %+v", got)
	}
}
