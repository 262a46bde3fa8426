// Package simtest starts the Nomad emulator for a test, with a Nomad API client
// of it: the setup that tests of many packages share. Both end with the test.
package simtest

import (
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

// Start starts an emulator with cfg and returns it with a client whose
// requests go through rt (nil: the default transport), which a test may use
// to count them. A failure to start fails the test.
func Start(tb testing.TB, cfg nomadsim.Config, rt http.RoundTripper) (*nomadsim.Sim, *api.Client) {
	tb.Helper()
	sim, err := nomadsim.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(sim.Close)
	ac := &api.Config{Address: sim.Address()}
	if rt != nil {
		ac.HttpClient = &http.Client{Transport: rt}
	}
	c, err := api.NewClient(ac)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Close)
	return sim, c
}

// LeaderLock is the coordinator election's lock (rollboot/leader in the default
// namespace) with ttl as its TTL and lock delay, on a client of its own, as the
// daemon gives each candidate: api.Client.Locks rewrites its client's retry
// settings.
func LeaderLock(tb testing.TB, addr string, ttl time.Duration) *api.Locks {
	tb.Helper()
	c, err := api.NewClient(&api.Config{Address: addr})
	if err != nil {
		tb.Fatal(err)
	}
	l, err := c.Locks(api.WriteOptions{}, api.Variable{Path: "rollboot/leader",
		Lock: &api.VariableLock{TTL: ttl.String(), LockDelay: ttl.String()}})
	if err != nil {
		tb.Fatal(err)
	}
	return l
}
