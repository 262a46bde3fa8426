package agent

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/discovery"
	"github.com/rollboot/rollboot/internal/store"
)

// failingProbe fails discovery (as a DNS error would) until ok is set.
type failingProbe struct{ ok atomic.Bool }

func (p *failingProbe) Discover(context.Context, discovery.NomadSelf) ([]string, []store.Server, error) {
	if !p.ok.Load() {
		return nil, nil, errors.New("discover consul: is consul.service.example:8500 this host: look up consul.service.example: server misbehaving")
	}
	return []string{store.RoleNomadClient, store.RoleConsulServer},
		[]store.Server{{Product: "consul", Cluster: "dc1", ID: "c1"}}, nil
}
func (p *failingProbe) VaultSealed(context.Context) (bool, error)             { return false, nil }
func (p *failingProbe) ConsulMaintenance(context.Context, bool, string) error { return nil }

// While the agent cannot tell which servers run on its host it publishes why (so
// the coordinator holds the host and status says it) and keeps retrying; once
// discovery succeeds the error is gone and the servers are published.
func TestDiscoveryErrorPublishedUntilItSucceeds(t *testing.T) {
	_, h, client := simHost(t, 1)
	st := store.New(client.Variables(), "rollboot", "")
	probe := &failingProbe{}
	ctx := context.Background()
	a := New(Options{Host: h.Name, Store: st, Local: client.Agent(), NodeList: client.Nodes(), BootIDFile: filepath.Join(h.Dir, "boot_id"),
		Servers: probe, PollEvery: 20 * time.Millisecond})
	stop, _ := run(t, a)

	waitRecord := func(what string, ok func(store.HostRecord) bool) store.HostRecord {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		var idx uint64
		for {
			rec, err := st.Host(ctx, h.Name)
			if err == nil && ok(rec) {
				return rec
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: last %+v, %v", what, rec, err)
			}
			// Block until the hosts prefix changes (or a second passes).
			if _, next, err := st.Hosts(ctx, idx, time.Second); err == nil {
				idx = next
			}
		}
	}
	rec := waitRecord("the discovery error", func(r store.HostRecord) bool { return r.DiscoverError != "" })
	if rec.NodeID != h.NodeID || rec.BootID == "" || len(rec.Servers) != 0 {
		t.Fatalf("record while discovery fails: %+v", rec)
	}
	probe.ok.Store(true)
	rec = waitRecord("discovery to succeed", func(r store.HostRecord) bool { return r.DiscoverError == "" })
	if len(rec.Servers) != 1 || rec.Servers[0].ID != "c1" {
		t.Fatalf("record after discovery: %+v", rec)
	}
	stop()
}
