package discovery

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/health/healthtest"
	"github.com/rollboot/rollboot/internal/nomadsim"
)

// fakeResolver answers every lookup with ips, or fails with err; block makes it
// wait for the context to end (a DNS timeout).
type fakeResolver struct {
	ips   []string
	err   error
	block bool
	asked []string
}

func (f *fakeResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	f.asked = append(f.asked, host)
	if f.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if f.err != nil {
		return nil, &net.DNSError{Err: f.err.Error(), Name: host, IsTemporary: true}
	}
	var out []net.IPAddr
	for _, ip := range f.ips {
		out = append(out, net.IPAddr{IP: net.ParseIP(ip)})
	}
	return out, nil
}

// Role discovery fails closed: a DNS error or timeout while deciding whether the
// Consul or Vault address is this host is an error, never "no server here".
func TestDiscoverResolver(t *testing.T) {
	s, err := nomadsim.New(nomadsim.Config{Servers: 3, ConsulServers: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	h := s.Hosts()[0]
	_, port, _ := net.SplitHostPort(h.ConsulAddr)
	consulByName := "consul.service.example:" + port
	// The host's Consul agent, known by a name the resolver must look up.
	byName := func(r Resolver) Local {
		return Local{Consul: healthtest.ConsulClient(t, h.ConsulAddr), ConsulAddr: consulByName, Resolver: r}
	}
	tests := []struct {
		name     string
		local    func(r Resolver) Local
		resolver *fakeResolver
		timeout  time.Duration
		wantErr  string // "" = no error
		consul   bool   // a Consul server is found
	}{
		{name: "consul: lookup fails", resolver: &fakeResolver{err: errors.New("server misbehaving")},
			local:   byName,
			wantErr: "discover consul: is " + consulByName + " this host: look up consul.service.example"},
		{name: "consul: lookup times out", resolver: &fakeResolver{block: true}, timeout: 100 * time.Millisecond,
			local:   byName,
			wantErr: "deadline exceeded"},
		{name: "consul: no addresses", resolver: &fakeResolver{},
			local:   byName,
			wantErr: "no addresses"},
		{name: "consul: resolves to this host", resolver: &fakeResolver{ips: []string{"127.0.0.1"}},
			local:  byName,
			consul: true},
		{name: "consul: resolves elsewhere", resolver: &fakeResolver{ips: []string{"192.0.2.7"}},
			local: byName},
		{name: "vault: lookup fails", resolver: &fakeResolver{err: errors.New("no such host")},
			local: func(r Resolver) Local {
				return Local{Vault: healthtest.VaultClient(t, "http://vault.service.example:8200"), Resolver: r}
			},
			wantErr: "discover vault: is http://vault.service.example:8200 this host: look up vault.service.example"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := healthtest.Ctx(t)
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			roles, err := Discover(ctx, tc.local(tc.resolver))
			if len(tc.resolver.asked) == 0 {
				t.Fatal("the injected resolver was not asked")
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want ~%q (roles %+v)", err, tc.wantErr, roles)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (roles.Consul != nil) != tc.consul {
				t.Fatalf("consul role %+v, want found=%t", roles.Consul, tc.consul)
			}
		})
	}
}
