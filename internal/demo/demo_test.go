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
	if len(sum.Hosts) != 11 {
		t.Errorf("%d hosts in the summary, want 8 clients and 3 servers", len(sum.Hosts))
	}
	// Each server cluster lost one server at a time: its tolerance went from 1
	// to 0 once per server reboot, and was 1 again at the end.
	for _, p := range []string{"nomad", "consul", "vault"} {
		pts := sum.Tolerance[p]
		if len(pts) == 0 || pts[len(pts)-1].Value != 1 {
			t.Errorf("%s tolerance series %v does not end at 1", p, pts)
		}
		drops := 0
		for _, pt := range pts {
			if pt.Value == 0 {
				drops++
			}
			if pt.Value < 0 {
				t.Errorf("%s had no leader during the rollout: %v", p, pts)
			}
		}
		if drops != 3 {
			t.Errorf("%s tolerance dropped %d times, want 3 (one per server): %v", p, drops, pts)
		}
	}
	if sum.Makespan < sum.LowerBound/2 || sum.LowerBound <= 0 {
		t.Errorf("makespan %s vs lower bound %s", sum.Makespan, sum.LowerBound)
	}
	for _, want := range []string{"Summary", "Makespan", "[ok  ] every host rebooted exactly once", "[ok  ] concurrency never exceeded",
		"[ok  ] no server rebooted unless", "Failure tolerance of each server cluster"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
