package deadline

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	vaultapi "github.com/hashicorp/vault/api"
)

// MaxIdleConnsPerHost is how many idle connections to the Nomad servers a
// client keeps: the reads a new leader runs at once (16), its watches and a
// margin.
const MaxIdleConnsPerHost = 32

// NomadClient builds a nomad/api client whose every request has a deadline. It
// builds the http.Client nomad/api would (api.go defaultHttpClient,
// defaultUDSClient, ConfigureTLS), with Transport around it; nomad/api ignores
// TLSConfig once HttpClient is set, so TLS is configured here.
func NomadClient(cfg *nomadapi.Config) (*nomadapi.Client, error) {
	if cfg.HttpClient == nil {
		u, err := url.Parse(cfg.Address)
		if err != nil {
			return nil, fmt.Errorf("invalid address %q: %w", cfg.Address, err)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		// Keep a connection for each request that may run at once (a new
		// leader's parallel reads, the watches' blocking queries): with the
		// default two, every burst opens and closes connections (and TLS
		// handshakes) by the dozen.
		tr.MaxIdleConnsPerHost = MaxIdleConnsPerHost
		if u.Scheme == "unix" {
			path := u.EscapedPath()
			tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", path)
			}
		}
		hc := &http.Client{Transport: tr}
		if err := nomadapi.ConfigureTLS(hc, cfg.TLSConfig); err != nil {
			return nil, err
		}
		hc.Transport = Wrap(tr)
		cfg.HttpClient = hc
	}
	return nomadapi.NewClient(cfg)
}

// ConsulClient builds a consul/api client whose every request has a deadline.
// consulapi.NewClient builds its http.Client into cfg (TLS and unix sockets
// included); the deadline is put around that client's transport.
func ConsulClient(cfg *consulapi.Config) (*consulapi.Client, error) {
	c, err := consulapi.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.HttpClient != nil {
		if _, ok := cfg.HttpClient.Transport.(*Transport); !ok {
			cfg.HttpClient.Transport = Wrap(cfg.HttpClient.Transport)
		}
	}
	return c, nil
}

// VaultConfig gives a vault/api configuration a per-request deadline. Vault's
// client has one of its own (Config.Timeout, applied to every request's context;
// 60s by default): it is set to DefaultTimeout unless VAULT_CLIENT_TIMEOUT says
// otherwise. rollboot sends Vault no blocking queries.
func VaultConfig(cfg *vaultapi.Config) *vaultapi.Config {
	if os.Getenv(vaultapi.EnvVaultClientTimeout) == "" {
		cfg.Timeout = DefaultTimeout
	}
	return cfg
}
