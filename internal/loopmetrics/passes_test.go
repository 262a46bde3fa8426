package loopmetrics

import (
	"testing"
	"time"
)

// A pass longer than the resync interval is an overrun, counted by the
// coordinator's own Passes; one no longer is not.
func TestPassesCountOverruns(t *testing.T) {
	p := NewPasses(New(nil))
	end := time.Unix(100, 0)
	if n := p.Observe(time.Second, 30*time.Second, end); n != 0 {
		t.Fatalf("a short pass counted as overrun %d", n)
	}
	if n := p.Observe(31*time.Second, 30*time.Second, end); n != 1 {
		t.Fatalf("a long pass: overruns %d, want 1", n)
	}
	if o := p.Overruns(); o.Count != 1 || !o.Last.Equal(end) || o.Took != 31*time.Second {
		t.Errorf("overruns %+v", o)
	}
	if o := NewPasses(p.m).Overruns(); o.Count != 0 {
		t.Errorf("a coordinator built again on the same metrics starts with %d overruns", o.Count)
	}
}
