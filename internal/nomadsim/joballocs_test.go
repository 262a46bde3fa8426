package nomadsim

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

func TestJobAllocationsAndTaskDeath(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2})
	if err := s.AddJob(JobSpec{ID: "agent", Type: "system"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	running := func(v *View) bool {
		for _, h := range []string{"client-1", "client-2"} {
			hh, _ := v.Host(h)
			if _, ok := v.RunningAlloc(hh.NodeID, "agent"); !ok {
				return false
			}
		}
		return true
	}
	if err := s.WaitFor(ctx, running); err != nil {
		t.Fatal(err)
	}
	allocs, meta, err := c.Jobs().Allocations("agent", false, nil)
	if err != nil || len(allocs) != 2 || meta.LastIndex == 0 {
		t.Fatalf("allocations = %d, index %d, err %v", len(allocs), meta.LastIndex, err)
	}
	none, _, err := c.Jobs().Allocations("no-such-job", false, nil)
	if err != nil || none == nil || len(none) != 0 {
		t.Errorf("unknown job: %v, %v; want an empty list", none, err)
	}

	// The task dies: a blocking query wakes with the allocation pending, and the
	// client does not start it again by itself.
	done := make(chan []*api.AllocationListStub, 1)
	go func() {
		q := (&api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 5 * time.Second}).WithContext(ctx)
		a, _, _ := c.Jobs().Allocations("agent", false, q)
		done <- a
	}()
	if err := s.SetTaskRunning("client-1", "agent", false); err != nil {
		t.Fatal(err)
	}
	got := <-done
	n1, _ := s.Node("client-1")
	for _, a := range got {
		if a.NodeID == n1.ID && a.ClientStatus != api.AllocClientStatusPending {
			t.Errorf("client-1 allocation is %s, want pending", a.ClientStatus)
		}
	}
	if err := s.WaitFor(ctx, func(v *View) bool { return !running(v) }); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTaskRunning("client-1", "agent", true); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(ctx, running); err != nil {
		t.Fatal(err)
	}
}
