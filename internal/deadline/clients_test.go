package deadline

import (
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	vaultapi "github.com/hashicorp/vault/api"
)

// The clients rollboot builds send every request through Transport, over TCP and
// over a unix socket, and keep working.
func TestClientsUseTheDeadline(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`"10.0.0.1:4647"`))
	})
	tcp := httptest.NewServer(handler)
	defer tcp.Close()
	sock := filepath.Join(t.TempDir(), "nomad.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	unix := &httptest.Server{Listener: ln, Config: &http.Server{Handler: handler}}
	unix.Start()
	defer unix.Close()

	for _, tc := range []struct{ name, addr string }{{"nomad over tcp", tcp.URL}, {"nomad over a unix socket", "unix://" + sock}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &nomadapi.Config{Address: tc.addr}
			c, err := NomadClient(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, ok := cfg.HttpClient.Transport.(*Transport); !ok {
				t.Fatalf("transport %T, want *deadline.Transport", cfg.HttpClient.Transport)
			}
			if leader, err := c.Status().Leader(); err != nil || leader != "10.0.0.1:4647" {
				t.Errorf("leader %q, %v", leader, err)
			}
		})
	}
	t.Run("consul", func(t *testing.T) {
		cfg := consulapi.DefaultConfig()
		cfg.Address = tcp.URL
		c, err := ConsulClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := cfg.HttpClient.Transport.(*Transport); !ok {
			t.Fatalf("transport %T, want *deadline.Transport", cfg.HttpClient.Transport)
		}
		if leader, err := c.Status().Leader(); err != nil || leader != "10.0.0.1:4647" {
			t.Errorf("leader %q, %v", leader, err)
		}
	})
	t.Run("vault", func(t *testing.T) {
		t.Setenv(vaultapi.EnvVaultClientTimeout, "")
		if got := VaultConfig(vaultapi.DefaultConfig()).Timeout; got != DefaultTimeout {
			t.Errorf("vault timeout %s, want %s", got, DefaultTimeout)
		}
	})
}
