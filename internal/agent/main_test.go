package agent

import (
	"context"
	"sync"
	"testing"

	"github.com/hashicorp/nomad/api"
	"go.uber.org/goleak"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

// Every goroutine a test starts, the agent's own included, has ended when the
// tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// run runs a until stop is called or the test ends, and waits for Run to return
// either way, so that no test (not even a failed one) leaves an agent running.
// Run must return nil. exited is closed when Run has returned.
func run(t *testing.T, a *Agent) (stop func(), exited <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = a.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			if err != nil {
				t.Errorf("agent ended with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop, done
}

// simHost starts an emulator of clients hosts and returns it with its first
// host and a client of that host's agent, as an agent on it talks to Nomad.
func simHost(t *testing.T, clients int) (*nomadsim.Sim, nomadsim.Host, *api.Client) {
	t.Helper()
	sim, err := nomadsim.New(nomadsim.Config{Clients: clients})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	h := sim.Hosts()[0]
	client, err := api.NewClient(&api.Config{Address: "http://" + h.Addr})
	if err != nil {
		t.Fatal(err)
	}
	return sim, h, client
}
