package nomadsim

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test of the package leaks a goroutine: every Sim must be
// closed and every api.Client's idle connections released.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
