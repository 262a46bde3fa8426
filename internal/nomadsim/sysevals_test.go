package nomadsim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// evalsOf lists the evaluations of job, oldest first.
func evalsOf(t *testing.T, c *api.Client, job string) []*api.Evaluation {
	t.Helper()
	evals, _, err := c.Evaluations().List(&api.QueryOptions{Namespace: "*", Filter: fmt.Sprintf("JobID == %q", job)})
	if err != nil {
		t.Fatal(err)
	}
	// The API client sorts the newest first (CreateIndex descending).
	for i, j := 0, len(evals)-1; i < j; i, j = i+1, j-1 {
		evals[i], evals[j] = evals[j], evals[i]
	}
	return evals
}

// blockedOf is job's blocked evaluations.
func blockedOf(t *testing.T, c *api.Client, job string) []*api.Evaluation {
	t.Helper()
	var out []*api.Evaluation
	for _, e := range evalsOf(t, c, job) {
		if e.Status == "blocked" {
			out = append(out, e)
		}
	}
	return out
}

// waitEvals waits until cond holds of job's evaluations (oldest first).
func waitEvals(t *testing.T, c *api.Client, job, what string, cond func([]*api.Evaluation) bool) []*api.Evaluation {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		evals := evalsOf(t, c, job)
		if cond(evals) {
			return evals
		}
		if ctx.Err() != nil {
			for _, e := range evals {
				t.Logf("eval %s %s node %s: %s", e.ID[:8], e.Status, e.NodeID, e.StatusDescription)
			}
			t.Fatalf("job %s: timed out waiting for %s", job, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func nodeIDOf(t *testing.T, s *Sim, host string) string {
	t.Helper()
	n, err := s.Node(host)
	if err != nil {
		t.Fatal(err)
	}
	return n.ID
}

// liveHosts are the hosts where job has a live allocation, sorted.
func liveHosts(t *testing.T, s *Sim, c *api.Client, job string) string {
	t.Helper()
	names := map[string]string{}
	for _, h := range s.Hosts() {
		names[h.NodeID] = h.Name
	}
	var out []string
	for _, a := range mustAllocs(t, c, job) {
		if a.DesiredStatus == api.AllocDesiredStatusRun && !allocClientTerminal(&api.Allocation{ClientStatus: a.ClientStatus}) {
			out = append(out, names[a.NodeID])
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// A system job's allocation that does not fit a node its constraints accept
// gets a blocked evaluation about that node, with the fields the system
// scheduler gives it (scheduler_system.go addBlocked); a node the constraints
// filter out gets none. The evaluation ends as Nomad ends it: run again when
// its node changes (complete, and blocked anew while it lacks room), cancelled
// by the evaluation of a node update that took it out of the candidates or
// replaced by the job's registration, complete once the node has room; and
// blocked as long as nothing runs it, its node cordoned or not.
func TestSystemBlockedEvalAboutItsNode(t *testing.T) {
	// A reboot longer than the heartbeat TTL: the node goes down.
	s, c := newTestSim(t, Config{Clients: 3, MigrateTime: 20 * time.Millisecond, HeartbeatTTL: 50 * time.Millisecond, BootTime: 400 * time.Millisecond,
		ClientResources: map[string]NodeResources{"client-2": {CPU: 8000, MemoryMB: 1000}}})
	small := nodeIDOf(t, s, "client-2")
	if err := s.AddJob(JobSpec{ID: "daemon", Type: api.JobTypeSystem, Groups: []GroupSpec{{Name: "agent", MemoryMB: 2000}}}); err != nil {
		t.Fatal(err)
	}
	// The same allocation with a constraint that leaves the small node out:
	// filtered, not blocked.
	if err := s.AddJob(JobSpec{ID: "filtered", Type: api.JobTypeSystem, Groups: []GroupSpec{{Name: "agent", MemoryMB: 2000,
		Constraints: []ConstraintSpec{{Attribute: "${node.unique.name}", Operator: "!=", Value: "client-2"}}}}}); err != nil {
		t.Fatal(err)
	}
	if got := liveHosts(t, s, c, "daemon"); got != "client-1 client-3" {
		t.Fatalf("daemon runs on %q, want client-1 client-3", got)
	}
	if ev := evalsOf(t, c, "filtered"); len(ev) != 0 {
		t.Errorf("a system job filtered out of a node got evaluations: %+v", ev[0])
	}
	ev := blockedOf(t, c, "daemon")
	if len(ev) != 1 {
		t.Fatalf("%d blocked evaluations, want 1", len(ev))
	}
	b := ev[0]
	jobs, _, _ := c.Jobs().List(nil)
	var jobModify uint64
	for _, j := range jobs {
		if j.ID == "daemon" {
			jobModify = j.JobModifyIndex
		}
	}
	m := b.FailedTGAllocs["agent"]
	switch {
	case b.Type != api.JobTypeSystem, b.NodeID != small, b.TriggeredBy != "queued-allocs", b.Namespace != "default",
		b.StatusDescription != "created to place remaining allocations", b.Priority != 50, b.JobModifyIndex != jobModify,
		b.PreviousEval == "", b.CreateIndex == 0, b.QueuedAllocations != nil:
		t.Errorf("blocked evaluation = %+v", b)
	case m == nil || m.NodesEvaluated != 1 || m.NodesExhausted != 1 || m.DimensionExhausted["memory"] != 1 ||
		m.NodesInPool != 3 || m.NodePool != "all" || *m.ResourcesExhausted["agent"].MemoryMB != 2000 || m.CoalescedFailures != 0:
		t.Errorf("FailedTGAllocs = %+v", m)
	}

	// Cordoned, the node is no longer a candidate, but nothing runs the
	// evaluation again (UpdateEligibility to ineligible creates none): it
	// stays blocked.
	if _, err := c.Nodes().ToggleEligibility(small, false, nil); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.cluster.tickLocked(s, time.Now())
	s.mu.Unlock()
	if ev := evalsOf(t, c, "daemon"); len(ev) != 1 || ev[0].Status != "blocked" {
		t.Fatalf("after the node was cordoned: %+v", ev)
	}
	// Eligible again, the node unblocks it (UnblockNode): it runs, finds no
	// room still, completes with its failed placement and blocks a new one.
	if _, err := c.Nodes().ToggleEligibility(small, true, nil); err != nil {
		t.Fatal(err)
	}
	ev = waitEvals(t, c, "daemon", "the evaluation run again", func(ev []*api.Evaluation) bool { return len(ev) == 2 })
	if ev[0].Status != "complete" || ev[0].FailedTGAllocs["agent"] == nil || ev[1].Status != "blocked" ||
		ev[1].NodeID != small || ev[1].PreviousEval != ev[0].ID {
		t.Errorf("after the node came back: %+v, then %+v", ev[0], ev[1])
	}

	// The node goes down: the node update's evaluation of the job places
	// nothing there and succeeds, which cancels the blocked one. Back, the
	// node is evaluated again and still lacks room.
	if err := s.Reboot("client-2"); err != nil {
		t.Fatal(err)
	}
	ev = waitEvals(t, c, "daemon", "the evaluation cancelled", func(ev []*api.Evaluation) bool { return ev[1].Status == "canceled" })
	if d := ev[1].StatusDescription; !strings.HasPrefix(d, "evaluation ") || !strings.HasSuffix(d, " successful") || ev[1].ModifyIndex <= ev[1].CreateIndex {
		t.Errorf("the evaluation cancelled by the node's: %+v", ev[1])
	}
	ev = waitEvals(t, c, "daemon", "a new blocked evaluation", func(ev []*api.Evaluation) bool { return len(ev) == 3 && ev[2].Status == "blocked" })
	if ev[2].NodeID != small {
		t.Errorf("after the node came back: %+v", ev[2])
	}

	// A new version of the job: its registration's evaluation fails on the
	// node again and blocks a new evaluation; the tracker keeps the newer.
	if err := s.UpdateJob(JobSpec{ID: "daemon", Type: api.JobTypeSystem, Meta: map[string]string{"v": "2"}}); err != nil {
		t.Fatal(err)
	}
	ev = waitEvals(t, c, "daemon", "the evaluation replaced", func(ev []*api.Evaluation) bool { return len(ev) == 4 })
	if ev[2].Status != "canceled" || ev[2].StatusDescription != `existing blocked evaluation exists for job "daemon"` {
		t.Errorf("the older blocked evaluation: %s %q", ev[2].Status, ev[2].StatusDescription)
	}
	if ev[3].Status != "blocked" || ev[3].NodeID != small || ev[3].JobModifyIndex <= ev[2].JobModifyIndex {
		t.Errorf("the new blocked evaluation: %+v", ev[3])
	}

	// The node grows: the allocation is placed there and the evaluation
	// completes (it ran again: BlockedEvals.Unblock).
	if err := s.SetNodeResources("client-2", NodeResources{CPU: 8000, MemoryMB: 7900}); err != nil {
		t.Fatal(err)
	}
	ev = waitEvals(t, c, "daemon", "the evaluation complete", func(ev []*api.Evaluation) bool { return ev[3].Status == "complete" })
	if len(ev) != 4 || ev[3].StatusDescription != "" || len(ev[3].FailedTGAllocs) != 0 {
		t.Errorf("evaluations: %d, last %+v", len(ev), ev[3])
	}
	if got := liveHosts(t, s, c, "daemon"); got != "client-1 client-2 client-3" {
		t.Errorf("daemon runs on %q, want every node", got)
	}
}

// One blocked evaluation per run of the scheduler: about the first node
// where the group lacks room, the others only counted. When that node gets
// room, the evaluation completes with the failures left, and blocks a new one
// about the next node.
func TestSystemBlockedEvalNextNode(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 3, MigrateTime: 20 * time.Millisecond,
		ClientResources: map[string]NodeResources{"client-2": {CPU: 500, MemoryMB: 7900}, "client-3": {CPU: 500, MemoryMB: 7900}}})
	if err := s.AddJob(JobSpec{ID: "daemon", Type: api.JobTypeSystem, Groups: []GroupSpec{{Name: "agent", CPU: 1000}}}); err != nil {
		t.Fatal(err)
	}
	ev := blockedOf(t, c, "daemon")
	if len(ev) != 1 || ev[0].NodeID != nodeIDOf(t, s, "client-2") || ev[0].FailedTGAllocs["agent"].DimensionExhausted["cpu"] != 1 ||
		*ev[0].FailedTGAllocs["agent"].ResourcesExhausted["agent"].CPU != 1000 {
		t.Fatalf("blocked evaluations = %+v, want one about client-2 for lack of cpu", ev)
	}
	first := ev[0].ID
	if err := s.SetNodeResources("client-2", NodeResources{CPU: 8000, MemoryMB: 7900}); err != nil {
		t.Fatal(err)
	}
	all := waitEvals(t, c, "daemon", "the next node's evaluation", func(ev []*api.Evaluation) bool { return len(ev) == 2 })
	if all[0].ID != first || all[0].Status != "complete" || all[0].FailedTGAllocs["agent"] == nil {
		t.Errorf("the first evaluation: %+v, want complete with the failure left", all[0])
	}
	if all[1].Status != "blocked" || all[1].NodeID != nodeIDOf(t, s, "client-3") || all[1].PreviousEval != first {
		t.Errorf("the next evaluation: %+v, want blocked about client-3 after %s", all[1], first)
	}
}

// A blocked evaluation is run again when its node frees room (an allocation
// there completes: BlockedEvals.UnblockNode), and completes. Stopping a job
// stops its allocations, lists it as stopped and cancels its blocked
// evaluation, a service job's as a system job's.
func TestBlockedEvalsAndStoppedJobs(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2, MigrateTime: 20 * time.Millisecond,
		ClientResources: map[string]NodeResources{"client-1": {CPU: 8000, MemoryMB: 3000}}})
	if err := s.AddJob(JobSpec{ID: "hog", Groups: []GroupSpec{{Name: "hog", MemoryMB: 2000,
		Constraints: []ConstraintSpec{{Attribute: "${node.unique.name}", Value: "client-1"}}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddJob(JobSpec{ID: "daemon", Type: api.JobTypeSystem, Groups: []GroupSpec{{Name: "agent", MemoryMB: 1500}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddJob(JobSpec{ID: "train", NodePool: "gpu"}); err != nil {
		t.Fatal(err)
	}
	if ev := blockedOf(t, c, "daemon"); len(ev) != 1 || ev[0].NodeID != nodeIDOf(t, s, "client-1") {
		t.Fatalf("daemon's blocked evaluations: %+v", ev)
	}
	if ev := blockedOf(t, c, "train"); len(ev) != 1 || ev[0].NodeID != "" || ev[0].Type != api.JobTypeService {
		t.Fatalf("train's blocked evaluations: %+v", ev)
	}

	if err := s.StopJob("", "hog"); err != nil {
		t.Fatal(err)
	}
	ev := waitEvals(t, c, "daemon", "the evaluation complete", func(ev []*api.Evaluation) bool { return ev[0].Status == "complete" })
	if len(ev) != 1 {
		t.Errorf("%d evaluations, want the one complete", len(ev))
	}
	if got := liveHosts(t, s, c, "daemon"); got != "client-1 client-2" {
		t.Errorf("daemon runs on %q", got)
	}
	if got := liveHosts(t, s, c, "hog"); got != "" {
		t.Errorf("a stopped job runs on %q", got)
	}
	jobs, _, err := c.Jobs().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if stopped := j.ID == "hog"; j.Stop != stopped || (j.Status == "dead") != stopped {
			t.Errorf("job %s: Stop %v, status %s", j.ID, j.Stop, j.Status)
		}
	}

	if err := s.StopJob("", "train"); err != nil {
		t.Fatal(err)
	}
	ev = evalsOf(t, c, "train")
	if len(ev) != 1 || ev[0].Status != "canceled" || !strings.HasSuffix(ev[0].StatusDescription, " successful") {
		t.Errorf("train's evaluation after the stop: %+v", ev)
	}
	// A stopped job places nothing, so nothing blocks again; run again, it does.
	if _, err := s.AddHost("gpu-1", false, true, "gpu"); err != nil {
		t.Fatal(err)
	}
	if got := liveHosts(t, s, c, "train"); got != "" {
		t.Errorf("a stopped job was placed on %q", got)
	}
	if err := s.UpdateJob(JobSpec{ID: "train"}); err != nil {
		t.Fatal(err)
	}
	if got := liveHosts(t, s, c, "train"); got != "gpu-1" {
		t.Errorf("the job run again is on %q, want gpu-1", got)
	}
	if err := s.StopJob("", "nope"); err == nil {
		t.Error("stopping a job that does not exist passed")
	}
}

// A drain cancelled with MarkEligible runs the node's blocked evaluation as
// the Nomad version the emulator follows does (nomad/fsm.go
// applyDrainUpdate): before 1.11.2 the drain update only evaluates the node's
// jobs, which cancels the blocked evaluation as a duplicate; from 1.11.2 and
// in 2.0 it also unblocks it, so it runs and completes with its failure.
func TestUndrainUnblocksByVersion(t *testing.T) {
	for _, tc := range []struct {
		version, status string
	}{
		{"1.10.5", evalCancelled},
		{"1.11.0", evalCancelled},
		{"1.11.2", "complete"},
		{"2.0.0", "complete"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			s, c := newTestSim(t, Config{Clients: 2, MigrateTime: 20 * time.Millisecond, NomadVersion: tc.version,
				ClientResources: map[string]NodeResources{"client-2": {CPU: 8000, MemoryMB: 1000}}})
			small := nodeIDOf(t, s, "client-2")
			if err := s.AddJob(JobSpec{ID: "daemon", Type: api.JobTypeSystem, Groups: []GroupSpec{{Name: "agent", MemoryMB: 2000}}}); err != nil {
				t.Fatal(err)
			}
			first := blockedOf(t, c, "daemon")
			if len(first) != 1 || first[0].NodeID != small {
				t.Fatalf("blocked evaluations = %+v, want one about client-2", first)
			}
			if _, err := c.Nodes().UpdateDrain(small, &api.DrainSpec{Deadline: time.Minute}, false, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Nodes().UpdateDrain(small, nil, true, nil); err != nil {
				t.Fatal(err)
			}
			ev := waitEvals(t, c, "daemon", "the evaluation run again", func(ev []*api.Evaluation) bool { return len(ev) == 2 })
			if ev[0].ID != first[0].ID || ev[0].Status != tc.status || ev[1].Status != "blocked" || ev[1].NodeID != small {
				t.Errorf("after the undrain: %s %q, then %s about %s; want %s, then blocked about client-2",
					ev[0].Status, ev[0].StatusDescription, ev[1].Status, ev[1].NodeID, tc.status)
			}
		})
	}
}
