package nomadsim

import (
	"context"
	"testing"
	"time"
)

// Placement respects each node's free resources: an allocation that fits
// nowhere stays unplaced until room appears (a node added, or resized), and the
// API shows the node's and the allocations' resources.
func TestPlacementRespectsResources(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// 7900 MB per node: one allocation of 5000 MB each, the third fits nowhere.
	if err := s.AddJob(JobSpec{ID: "big", Groups: []GroupSpec{{Name: "big", Count: 3, CPU: 500, MemoryMB: 5000}}}); err != nil {
		t.Fatal(err)
	}
	live := func(v *View, job, host string) int {
		n := 0
		for _, h := range []string{"client-1", "client-2", "client-3"} {
			hh, ok := v.Host(h)
			if !ok || (host != "" && h != host) {
				continue
			}
			for _, a := range v.Allocs(hh.NodeID) {
				if a.JobID == job && !allocTerminal(a) {
					n++
				}
			}
		}
		return n
	}
	// AddJob schedules at once: two placed, the third unplaced.
	if err := s.WaitFor(ctx, func(v *View) bool { return live(v, "big", "") == 2 }); err != nil {
		t.Fatal(err)
	}

	n1, _ := s.Node("client-1")
	node, _, err := c.Nodes().Info(n1.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if node.NodeResources == nil || node.NodeResources.Cpu.CpuShares != DefaultNodeCPU || node.NodeResources.Memory.MemoryMB != DefaultNodeMemoryMB ||
		node.ReservedResources == nil {
		t.Errorf("node resources = %+v, reserved %+v", node.NodeResources, node.ReservedResources)
	}
	allocs, _, err := c.Nodes().Allocations(n1.ID, nil)
	if err != nil || len(allocs) != 1 {
		t.Fatalf("allocations = %v, %v", allocs, err)
	}
	if tr := allocs[0].AllocatedResources.Tasks["big"]; tr == nil || tr.Cpu.CpuShares != 500 || tr.Memory.MemoryMB != 5000 {
		t.Errorf("allocated resources = %+v", allocs[0].AllocatedResources)
	}

	// A bigger node takes the third (its reserved memory is not free).
	if err := s.SetNodeResources("client-1", NodeResources{CPU: 4000, MemoryMB: 16000, ReservedMemoryMB: 1024}); err != nil {
		t.Fatal(err)
	}
	if node, _, _ = c.Nodes().Info(n1.ID, nil); node.NodeResources.Memory.MemoryMB != 16000 || node.ReservedResources.Memory.MemoryMB != 1024 {
		t.Errorf("after SetNodeResources: %+v, %+v", node.NodeResources, node.ReservedResources)
	}
	if err := s.WaitFor(ctx, func(v *View) bool { return live(v, "big", "client-1") == 2 && live(v, "big", "") == 3 }); err != nil {
		t.Fatal(err)
	}
	// 9000 MB fits on no node (4976 and 2900 free); a bigger node added takes
	// it.
	if err := s.AddJob(JobSpec{ID: "more", Groups: []GroupSpec{{Name: "more", MemoryMB: 9000, CPU: 100}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(ctx, func(v *View) bool { return live(v, "more", "") == 0 }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddHost("client-3", false, true, "default"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetNodeResources("client-3", NodeResources{CPU: 8000, MemoryMB: 16000}); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(ctx, func(v *View) bool { return live(v, "more", "client-3") == 1 }); err != nil {
		t.Fatal(err)
	}

	// A group without resources gets Nomad's defaults.
	if err := s.AddJob(JobSpec{ID: "small"}); err != nil {
		t.Fatal(err)
	}
	for _, j := range s.Jobs() {
		if j.ID == "small" && (j.Groups[0].CPU != DefaultGroupCPU || j.Groups[0].MemoryMB != DefaultGroupMemoryMB) {
			t.Errorf("default group resources = %d MHz, %d MB", j.Groups[0].CPU, j.Groups[0].MemoryMB)
		}
	}
	if err := s.AddJob(JobSpec{ID: "bad", Groups: []GroupSpec{{Name: "bad", MemoryMB: -1}}}); err == nil {
		t.Error("negative memory accepted")
	}
	if err := s.SetNodeResources("client-1", NodeResources{CPU: 0, MemoryMB: 1}); err == nil {
		t.Error("zero CPU accepted")
	}
}
