package setup

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/deploy"
)

// ServerHostToken returns the token of a server host's agent, the one host
// that runs rollboot outside Nomad and so has no workload identity: a client
// token with the rollboot-agent-server policy named ServerTokenPrefix+host. A
// second call returns the same token (a management token reads its secret),
// so setup stays idempotent; created says whether it was minted now.
func ServerHostToken(ctx context.Context, c *api.Client, host string) (tok *api.ACLToken, created bool, err error) {
	if host == "" || strings.ContainsAny(host, " \t\n/") {
		return nil, false, fmt.Errorf("-server-host-token %q: want the server host's name (its Nomad node or hostname)", host)
	}
	name := ServerTokenPrefix + host
	stubs, _, err := c.ACLTokens().List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, false, fmt.Errorf("list ACL tokens: %w", err)
	}
	for _, s := range stubs {
		if s.Name == name {
			t, _, err := c.ACLTokens().Info(s.AccessorID, (&api.QueryOptions{}).WithContext(ctx))
			if err != nil {
				return nil, false, fmt.Errorf("read token %q: %w", name, err)
			}
			return t, false, nil
		}
	}
	t, _, err := c.ACLTokens().Create(&api.ACLToken{Name: name, Type: "client", Policies: []string{"rollboot-agent-server"}},
		(&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return nil, false, fmt.Errorf("create token %q: %w", name, err)
	}
	return t, true, nil
}

// WriteServerHostSteps prints the exact steps that install the agent as a
// systemd service on host with tok (docs/deploy.md, "Server-only hosts"): the
// unit and configuration are the embedded deploy/systemd files.
func WriteServerHostSteps(w io.Writer, host string, tok *api.ACLToken, release string) error {
	unit, err := deploy.Read("systemd/rollboot-agent.service")
	if err != nil {
		return err
	}
	cfg, err := deploy.Read("systemd/config.hcl")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nServer host %s: token %q (accessor %s, policy rollboot-agent-server).\n", host, tok.Name, tok.AccessorID)
	fmt.Fprintf(w, "On %s, as root, with the verified rollboot binary of %s (docs/install.md):\n\n", host, release)
	fmt.Fprintln(w, "install -m 0755 rollboot /usr/local/bin/rollboot")
	fmt.Fprintln(w, "install -d -m 0755 /etc/rollboot")
	fmt.Fprintf(w, "cat > /etc/rollboot/config.hcl <<'EOF'\n%sEOF\n", cfg)
	fmt.Fprintln(w, "install -m 0600 /dev/null /etc/rollboot/env")
	fmt.Fprintf(w, "echo 'NOMAD_TOKEN=%s' > /etc/rollboot/env\n", tok.SecretID)
	fmt.Fprintf(w, "cat > /etc/systemd/system/rollboot-agent.service <<'EOF'\n%sEOF\n", unit)
	fmt.Fprintln(w, "systemctl daemon-reload")
	fmt.Fprintln(w, "systemctl enable --now rollboot-agent")
	fmt.Fprintln(w, "\nKeep the token secret: it can publish any host record and take the servers' reboot locks.")
	return nil
}
