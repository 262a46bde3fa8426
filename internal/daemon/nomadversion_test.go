package daemon

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
)

// rollboot refuses to start against a Nomad older than 1.7 (no Variable
// locks), says so when it cannot tell, and starts against a newer one.
func TestCheckNomadVersion(t *testing.T) {
	for _, tt := range []struct {
		version string
		err     string
	}{
		{"1.6.5", "nomad 1.6.5 (the version of the agent at the configured address) is too old: rollboot needs Nomad 1.7.0 or newer"},
		{"1.7.0-beta.1", ""}, // 1.7's pre-releases had the locks
		{"1.7.0", ""},
		{"1.11.2", ""},
		{"2.0.5", ""},
	} {
		t.Run(tt.version, func(t *testing.T) {
			_, c := simtest.Start(t, nomadsim.Config{Clients: 1, NomadVersion: tt.version}, nil)
			err := CheckNomadVersion(c.Agent(), slog.New(slog.DiscardHandler))
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("err = %v, want %q", err, tt.err)
			}
		})
	}
}

type selfFunc func() (*api.AgentSelf, error)

func (f selfFunc) Self() (*api.AgentSelf, error) { return f() }

// An agent that does not say its version, or cannot be asked, is not refused:
// rollboot says it could not check.
func TestCheckNomadVersionUnknown(t *testing.T) {
	for name, self := range map[string]selfFunc{
		"no version": func() (*api.AgentSelf, error) { return &api.AgentSelf{Config: map[string]any{}}, nil },
		"refused":    func() (*api.AgentSelf, error) { return nil, &api.UnexpectedResponseError{} },
		"server build": func() (*api.AgentSelf, error) {
			return &api.AgentSelf{Member: api.AgentMember{Tags: map[string]string{"build": "1.8.4"}}}, nil
		},
		"not a version": func() (*api.AgentSelf, error) {
			return &api.AgentSelf{Config: map[string]any{"Version": map[string]any{"Version": "dev"}}}, nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			if err := CheckNomadVersion(self, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
				t.Fatalf("err = %v, want none", err)
			}
			if warned := strings.Contains(logs.String(), "level=WARN"); warned == (name == "server build") {
				t.Errorf("logs %q: want a warning exactly when the version is unknown", logs.String())
			}
		})
	}
	old := selfFunc(func() (*api.AgentSelf, error) {
		return &api.AgentSelf{Member: api.AgentMember{Tags: map[string]string{"build": "1.6.0"}}}, nil
	})
	if err := CheckNomadVersion(old, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "server build") {
		t.Fatalf("an old server build: err = %v, want it refused", err)
	}
}

// An agent on a client host checks the version its node lists, and does not
// ask its local agent's self (agent:read, which its token lacks); a host
// without a client asks it.
func TestAgentNomadVersion(t *testing.T) {
	asked := 0
	self := selfFunc(func() (*api.AgentSelf, error) {
		asked++
		return &api.AgentSelf{Config: map[string]any{"Version": map[string]any{"Version": "1.6.2"}}}, nil
	})
	var logs bytes.Buffer
	check := AgentNomadVersion(self, "web-1", slog.New(slog.NewTextHandler(&logs, nil)))
	for _, tt := range []struct {
		client, err string
		warns       bool
	}{
		{client: "1.9.4"},
		{client: "1.7.0-rc.1"},
		{client: "1.6.5", err: "nomad 1.6.5 (the client version of node web-1) is too old: rollboot needs Nomad 1.7.0 or newer"},
		{client: "dev", warns: true},
	} {
		logs.Reset()
		err := check(tt.client)
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || err.Error() != tt.err+" (Variable locks)") {
			t.Errorf("client %s: err = %v, want %q", tt.client, err, tt.err)
		}
		if warned := strings.Contains(logs.String(), "level=WARN"); warned != tt.warns {
			t.Errorf("client %s: logs %q, want a warning: %v", tt.client, logs.String(), tt.warns)
		}
	}
	if asked != 0 {
		t.Fatalf("the agent's self was read %d times on a client host", asked)
	}
	if err := check(""); err == nil || !strings.Contains(err.Error(), "the version of the agent at the configured address") {
		t.Errorf("no client: err = %v, want the agent's self checked", err)
	}
	if asked != 1 {
		t.Errorf("no client: the agent's self was read %d times, want once", asked)
	}
}
