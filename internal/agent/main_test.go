package agent

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/goleak"
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
