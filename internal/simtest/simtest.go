// Package simtest starts the Nomad emulator for a test, with a Nomad API client
// of it: the setup that tests of many packages share. Both end with the test.
package simtest

import (
	"net/http"
	"testing"

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
