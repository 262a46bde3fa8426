package coordinator

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine the coordinator starts (its watches, the allocation watchers,
// the elected function) is waited for by its owner before Run or RunElected
// returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
