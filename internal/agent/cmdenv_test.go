package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestIsSecretEnv(t *testing.T) {
	for _, tc := range []struct {
		name   string
		secret bool
	}{
		{"NOMAD_TOKEN", true},
		{"CONSUL_HTTP_TOKEN", true},
		{"VAULT_TOKEN", true},
		{"NOMAD_TOKEN_vault_default", true},
		{"CONSUL_HTTP_AUTH", true},
		{"NOMAD_HTTP_AUTH", true},
		{"AWS_SECRET_ACCESS_KEY", true},
		{"AWS_SESSION_TOKEN", true},
		{"DB_PASSWORD", true},
		{"vault_token", true},
		{"PATH", false},
		{"HOME", false},
		{"NOMAD_ADDR", false},
		{"NOMAD_CLIENT_KEY", false}, // a path, and mutual TLS helpers need it
		{"CONSUL_HTTP_ADDR", false},
		{"VAULT_ADDR", false},
		{"NOMAD_ALLOC_DIR", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsSecretEnv(tc.name); got != tc.secret {
				t.Errorf("IsSecretEnv(%q) = %v, want %v", tc.name, got, tc.secret)
			}
		})
	}
}

func TestCommandEnv(t *testing.T) {
	environ := []string{"PATH=/bin", "NOMAD_TOKEN=n", "CONSUL_HTTP_TOKEN=c", "VAULT_TOKEN=v", "NOMAD_ADDR=http://x", "EMPTY="}
	for _, tc := range []struct {
		name string
		pass []string
		want []string
	}{
		{"scrubbed", nil, []string{"PATH=/bin", "NOMAD_ADDR=http://x", "EMPTY="}},
		{"vault passed on", []string{"VAULT_TOKEN"}, []string{"PATH=/bin", "VAULT_TOKEN=v", "NOMAD_ADDR=http://x", "EMPTY="}},
		{"pass needs the exact name", []string{"vault_token", "VAULT"}, []string{"PATH=/bin", "NOMAD_ADDR=http://x", "EMPTY="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := CommandEnv(environ, tc.pass); !slices.Equal(got, tc.want) {
				t.Errorf("CommandEnv = %q, want %q", got, tc.want)
			}
		})
	}
}

// setSecrets gives the test process (the agent) the usual tokens.
func setSecrets(t *testing.T) {
	t.Setenv("NOMAD_TOKEN", "nomad-secret-1234")
	t.Setenv("CONSUL_HTTP_TOKEN", "consul-secret-1234")
	t.Setenv("VAULT_TOKEN", "vault-secret-1234")
	t.Setenv("ROLLBOOT_TEST_PLAIN", "plain")
}

// envOf reads an `env` dump and returns it as a set of NAME=VALUE lines.
func envOf(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func checkScrubbed(t *testing.T, what, env string, passed ...string) {
	t.Helper()
	for _, name := range []string{"NOMAD_TOKEN", "CONSUL_HTTP_TOKEN", "VAULT_TOKEN"} {
		has := strings.Contains(env, name+"=")
		if want := slices.Contains(passed, name); has != want {
			t.Errorf("%s: %s in the environment = %v, want %v", what, name, has, want)
		}
	}
	if !strings.Contains(env, "ROLLBOOT_TEST_PLAIN=plain") {
		t.Errorf("%s: ordinary variables were removed too", what)
	}
}

// Hooks, the reboot command and the sentinel command run without the agent's
// tokens, unless passed on by name.
func TestCommandsRunWithoutSecrets(t *testing.T) {
	setSecrets(t)
	dir := t.TempDir()
	dump := func(name string) []string {
		return []string{"/bin/sh", "-c", "env > " + filepath.Join(dir, name)}
	}
	ctx := context.Background()

	if err := RunHooks(ctx, [][]string{dump("hook")}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	checkScrubbed(t, "hook", envOf(t, filepath.Join(dir, "hook")))
	if err := RunHooks(ctx, [][]string{dump("hook-pass")}, 5*time.Second, "VAULT_TOKEN"); err != nil {
		t.Fatal(err)
	}
	checkScrubbed(t, "hook with pass_env", envOf(t, filepath.Join(dir, "hook-pass")), "VAULT_TOKEN")

	if err := (CommandRebooter{Argv: dump("reboot")}).Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	checkScrubbed(t, "reboot command", envOf(t, filepath.Join(dir, "reboot")))
	if err := (CommandRebooter{Argv: dump("reboot-pass"), PassEnv: []string{"CONSUL_HTTP_TOKEN"}}).Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	checkScrubbed(t, "reboot command with pass_env", envOf(t, filepath.Join(dir, "reboot-pass")), "CONSUL_HTTP_TOKEN")

	det := CommandDetector{Argv: []string{"/bin/sh", "-c", "env > " + filepath.Join(dir, "sentinel") + "; exit 1"}, Timeout: 5 * time.Second}
	if _, err := det.RebootRequired(ctx); err != nil {
		t.Fatal(err)
	}
	checkScrubbed(t, "sentinel command", envOf(t, filepath.Join(dir, "sentinel")))
}

// A failing command's output, quoted in the error that ends up in the host
// record, is capped and never shows a token, even one passed on to it.
func TestCommandOutputCappedAndRedacted(t *testing.T) {
	setSecrets(t)
	// Hooks and the reboot command quote stderr (its first line); the sentinel
	// command quotes its whole output: both are redacted and capped.
	loud := []string{"/bin/sh", "-c", `echo "token=$VAULT_TOKEN" >&2; env >&2; head -c 5000 /dev/zero | tr '\0' x >&2; exit 3`}
	check := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		msg := err.Error()
		for _, secret := range []string{"nomad-secret-1234", "consul-secret-1234", "vault-secret-1234"} {
			if strings.Contains(msg, secret) {
				t.Errorf("%s: error shows a token: %s", what, msg)
			}
		}
		if !strings.Contains(msg, "token=<redacted>") {
			t.Errorf("%s: the passed-on token is not redacted: %.200s", what, msg)
		}
		if len(msg) > maxCommandOutput+300 {
			t.Errorf("%s: error of %d bytes, want the output capped at %d", what, len(msg), maxCommandOutput)
		}
	}
	check("hook", RunHooks(context.Background(), [][]string{loud}, 5*time.Second, "VAULT_TOKEN"))
	check("reboot command", CommandRebooter{Argv: loud, PassEnv: []string{"VAULT_TOKEN"}}.Reboot(context.Background()))
	_, err := CommandDetector{Argv: loud, Timeout: 5 * time.Second, PassEnv: []string{"VAULT_TOKEN"}}.RebootRequired(context.Background())
	check("sentinel command", err)
}
