package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The demo the README points at runs to completion and every check holds.
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	sum, err := Run(context.Background(), Options{Out: &out, Timeout: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.OK() {
		t.Fatalf("checks failed: %v %v\n%s", sum.Violations, sum.Problems, out.String())
	}
	if len(sum.Hosts) != 8 {
		t.Errorf("%d hosts in the summary, want 8", len(sum.Hosts))
	}
	if sum.Makespan < sum.LowerBound/2 || sum.LowerBound <= 0 {
		t.Errorf("makespan %s vs lower bound %s", sum.Makespan, sum.LowerBound)
	}
	for _, want := range []string{"Summary", "Makespan", "[ok  ] every host rebooted exactly once", "[ok  ] concurrency never exceeded"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
