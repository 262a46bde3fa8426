package agent

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// The commands the agent runs (hooks, the sentinel command, the reboot command)
// are the operator's, but they must not inherit the agent's credentials: a hook
// that logs its environment, or a compromised helper binary, would otherwise hold
// the Nomad token (and the Consul and Vault tokens) of a process that runs as
// root on every host. So they run with the agent's environment minus every
// secret-bearing variable, unless agent.pass_env names it, and what they print is
// capped, and stripped of the agent's secret values, before it is reported.

// maxCommandOutput caps the output of a command quoted in an error, and so in the
// host record and logs.
const maxCommandOutput = 512

// secretMarkers: a variable whose upper-cased name contains one of these is
// taken as secret-bearing (NOMAD_TOKEN, CONSUL_HTTP_TOKEN, VAULT_TOKEN,
// NOMAD_TOKEN_<identity>, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, *_PASSWORD...).
var secretMarkers = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE_KEY", "API_KEY", "ACCESS_KEY", "UNSEAL"}

// IsSecretEnv reports whether an environment variable name looks secret-bearing:
// it names a token, secret, password, credential or key, or is an HTTP basic-auth
// setting (NOMAD_HTTP_AUTH, CONSUL_HTTP_AUTH: user:password).
func IsSecretEnv(name string) bool {
	n := strings.ToUpper(name)
	for _, m := range secretMarkers {
		if strings.Contains(n, m) {
			return true
		}
	}
	return strings.HasSuffix(n, "_AUTH")
}

// CommandEnv is the environment for a command: environ (KEY=VALUE entries)
// without the secret-bearing variables, except those named in pass.
func CommandEnv(environ, pass []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if IsSecretEnv(name) && !slices.Contains(pass, name) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// command builds an exec.Cmd for argv with the scrubbed environment. Once ctx
// ends (a timeout) or the command exits, its output is waited for at most a
// second: a child it left in the background holding the output open does not
// outlast the timeout.
func command(ctx context.Context, argv, pass []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = CommandEnv(os.Environ(), pass)
	cmd.WaitDelay = time.Second
	return cmd
}

// CommandOutput is a command's output as quoted in an error: trimmed, each value
// of a secret-bearing variable of environ replaced by <redacted> (a passed-on
// token could be printed by the command), and capped at maxCommandOutput bytes.
func CommandOutput(out []byte, environ []string) string {
	s := strings.TrimSpace(string(out))
	for _, kv := range environ {
		name, val, _ := strings.Cut(kv, "=")
		if IsSecretEnv(name) && len(val) >= 4 {
			s = strings.ReplaceAll(s, val, "<redacted>")
		}
	}
	if len(s) > maxCommandOutput {
		s = strings.ToValidUTF8(s[:maxCommandOutput], "") + "... (truncated)"
	}
	return s
}

// commandOutput is CommandOutput over the agent's own environment.
func commandOutput(out []byte) string { return CommandOutput(out, os.Environ()) }
