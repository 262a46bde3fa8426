package daemon

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the agent, its coordinator candidate and the FleetLock server
// start has an owner that waits for it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
