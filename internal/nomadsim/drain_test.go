package nomadsim

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

func lastEvent(n *api.Node) *api.NodeEvent { return n.Events[len(n.Events)-1] }

func mgmtAccessor(t *testing.T, s *Sim) string {
	t.Helper()
	for _, tok := range s.Tokens() {
		if tok.SecretID == s.ManagementToken() {
			return tok.AccessorID
		}
	}
	t.Fatal("no management token")
	return ""
}

func TestDrainStartUpdateCancel(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2, ACL: true})
	// A batch alloc that runs until stopped keeps the drain open.
	if err := s.AddJob(JobSpec{ID: "forever", Type: "batch", Groups: []GroupSpec{{Name: "g", Count: 2}}}); err != nil {
		t.Fatal(err)
	}
	id := nodeID(t, s, "client-1")
	before := time.Now()

	resp, err := c.Nodes().UpdateDrainOpts(id, &api.DrainOptions{
		DrainSpec: &api.DrainSpec{Deadline: time.Hour},
		Meta:      map[string]string{"message": "reboot"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.NodeModifyIndex == 0 || resp.LastIndex != resp.NodeModifyIndex {
		t.Fatalf("response %+v", resp)
	}
	n, _, err := c.Nodes().Info(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds := n.DrainStrategy
	if ds == nil || ds.Deadline != time.Hour || ds.IgnoreSystemJobs || ds.StartedAt.Before(before.Add(-time.Second)) ||
		ds.ForceDeadline.Sub(before) < time.Hour-time.Second || ds.ForceDeadline.Sub(before) > time.Hour+5*time.Second {
		t.Fatalf("drain strategy %+v", ds)
	}
	if !n.Drain {
		t.Fatal("Drain not set while draining (nomad/structs/extensions.go nodeExt adds it to every encoded node)")
	}
	if n.SchedulingEligibility != api.NodeSchedulingIneligible || n.ModifyIndex != resp.NodeModifyIndex {
		t.Fatalf("eligibility %s, ModifyIndex %d", n.SchedulingEligibility, n.ModifyIndex)
	}
	ld := n.LastDrain
	if ld == nil || ld.Status != api.DrainStatusDraining || ld.AccessorID != "token:"+mgmtAccessor(t, s) ||
		ld.Meta["message"] != "reboot" || ld.StartedAt.IsZero() || !ld.StartedAt.Equal(ld.UpdatedAt) {
		t.Fatalf("LastDrain %+v", ld)
	}
	if e := lastEvent(n); e.Subsystem != "Drain" || e.Message != "Node drain strategy set" || e.CreateIndex != resp.NodeModifyIndex {
		t.Fatalf("event %+v", e)
	}
	// The list stub reports the drain.
	stubs, _, err := c.Nodes().List(&api.QueryOptions{Filter: `Name == "client-1"`})
	if err != nil || len(stubs) != 1 || !stubs[0].Drain || stubs[0].LastDrain == nil {
		t.Fatalf("stub %+v, %v", stubs, err)
	}

	// Update: StartedAt kept, meta replaced, event "updated".
	if _, err := c.Nodes().UpdateDrainOpts(id, &api.DrainOptions{
		DrainSpec: &api.DrainSpec{Deadline: 2 * time.Hour, IgnoreSystemJobs: true},
		Meta:      map[string]string{"message": "again"},
	}, nil); err != nil {
		t.Fatal(err)
	}
	n2, _, _ := c.Nodes().Info(id, nil)
	if !n2.DrainStrategy.StartedAt.Equal(ds.StartedAt) || n2.DrainStrategy.Deadline != 2*time.Hour || !n2.DrainStrategy.IgnoreSystemJobs {
		t.Fatalf("updated strategy %+v", n2.DrainStrategy)
	}
	if n2.LastDrain.Status != api.DrainStatusDraining || n2.LastDrain.Meta["message"] != "again" || lastEvent(n2).Message != "Node drain strategy updated" {
		t.Fatalf("after update: %+v, %+v", n2.LastDrain, lastEvent(n2))
	}

	// Cancel without MarkEligible: canceled, still ineligible.
	if _, err := c.Nodes().UpdateDrainOpts(id, &api.DrainOptions{Meta: map[string]string{"message": "again", "cancel_message": "no"}}, nil); err != nil {
		t.Fatal(err)
	}
	n3, _, _ := c.Nodes().Info(id, nil)
	if n3.DrainStrategy != nil || n3.Drain || n3.SchedulingEligibility != api.NodeSchedulingIneligible ||
		n3.LastDrain.Status != api.DrainStatusCanceled || n3.LastDrain.Meta["cancel_message"] != "no" ||
		lastEvent(n3).Message != "Node drain disabled" {
		t.Fatalf("after cancel: %+v %+v %+v", n3.DrainStrategy, n3.LastDrain, lastEvent(n3))
	}

	// null + MarkEligible on a node that is not draining: eligible, LastDrain and
	// events untouched.
	if _, err := c.Nodes().UpdateDrain(id, nil, true, nil); err != nil {
		t.Fatal(err)
	}
	n4, _, _ := c.Nodes().Info(id, nil)
	if n4.SchedulingEligibility != api.NodeSchedulingEligible || n4.LastDrain.Status != api.DrainStatusCanceled ||
		!n4.LastDrain.UpdatedAt.Equal(n3.LastDrain.UpdatedAt) || len(n4.Events) != len(n3.Events) {
		t.Fatalf("after mark eligible: %s %+v, %d events (was %d)", n4.SchedulingEligibility, n4.LastDrain, len(n4.Events), len(n3.Events))
	}

	// Only the last 10 events are kept.
	for i := 0; i < 12; i++ {
		if _, err := c.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: time.Duration(i+1) * time.Hour}, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	n5, _, _ := c.Nodes().Info(id, nil)
	if len(n5.Events) != 10 || lastEvent(n5).Message != "Node drain strategy updated" {
		t.Fatalf("%d events, last %+v", len(n5.Events), lastEvent(n5))
	}
	// The log records every drain write.
	var kinds []string
	for _, e := range s.Events(0) {
		if e.NodeID == id && (e.Type == EventDrainStart || e.Type == EventDrainUpdate || e.Type == EventDrainCancel) {
			kinds = append(kinds, e.Type)
		}
	}
	if len(kinds) < 3 || kinds[0] != EventDrainStart || kinds[1] != EventDrainUpdate || kinds[2] != EventDrainCancel {
		t.Fatalf("drain events %v", kinds)
	}
}

// runMonitorDrain runs api MonitorDrain to its end and returns its messages.
func runMonitorDrain(ctx context.Context, t *testing.T, c *api.Client, id string, index uint64, ignoreSys bool) []string {
	t.Helper()
	var msgs []string
	for m := range c.Nodes().MonitorDrain(ctx, id, index, ignoreSys) {
		if m.Level == api.MonitorMsgLevelError {
			t.Fatalf("MonitorDrain: %s", m.Message)
		}
		msgs = append(msgs, m.Message)
	}
	if ctx.Err() != nil {
		t.Fatalf("MonitorDrain did not finish: %v (messages %v)", ctx.Err(), msgs)
	}
	return msgs
}

func hasMsg(msgs []string, prefix string) bool {
	return slices.ContainsFunc(msgs, func(m string) bool { return len(m) >= len(prefix) && m[:len(prefix)] == prefix })
}

func TestDrainMigratesWithMaxParallelAcrossDrainingNodes(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 4, MigrateTime: 30 * time.Millisecond})
	if err := s.AddJob(JobSpec{ID: "web", Groups: []GroupSpec{{Name: "web", Count: 4, MigrateMaxParallel: 1}}}); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	ids := []string{nodeID(t, s, "client-1"), nodeID(t, s, "client-2")}
	for _, id := range ids {
		waitAllocs(ctx, t, c, id, func(as []*api.Allocation) bool { return len(as) == 1 && as[0].ClientStatus == "running" })
	}
	seq := len(s.Events(0))

	// Drain both nodes at once; with max_parallel = 1 only one alloc of the
	// group may be migrating at any time, across both nodes.
	var idx []uint64
	for _, id := range ids {
		resp, err := c.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: time.Minute}, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, resp.LastIndex)
	}
	done := make(chan []string, 2)
	for i, id := range ids {
		go func() {
			var msgs []string
			for m := range c.Nodes().MonitorDrain(ctx, id, idx[i], false) {
				msgs = append(msgs, m.Message)
			}
			done <- msgs
		}()
	}
	for range ids {
		msgs := <-done
		if !hasMsg(msgs, "Drain complete for node") || !hasMsg(msgs, "All allocations on node") {
			t.Fatalf("MonitorDrain messages %v", msgs)
		}
	}

	// Replay the event log: count allocs told to stop whose client has not yet
	// reported them stopped.
	stopping := map[string]bool{}
	migrations, most := 0, 0
	for _, e := range s.Events(seq) {
		if e.Details["job"] != "web" {
			continue
		}
		switch e.Type {
		case EventAllocStopping:
			stopping[e.Details["alloc_id"]] = true
			migrations++
		case EventAllocStop:
			delete(stopping, e.Details["alloc_id"])
		}
		most = max(most, len(stopping))
	}
	// At least the two original allocs migrate (a replacement may first land on
	// the second node before its drain starts, and then migrate again).
	if migrations < 2 || most != 1 {
		t.Fatalf("%d migrations, at most %d stopping at once; want >= 2 and 1", migrations, most)
	}

	for _, id := range ids {
		n, _, _ := c.Nodes().Info(id, nil)
		if n.DrainStrategy != nil || n.SchedulingEligibility != api.NodeSchedulingIneligible ||
			n.LastDrain.Status != api.DrainStatusComplete || lastEvent(n).Message != "Node drain complete" ||
			lastEvent(n).Details["deadline_reached"] != "" {
			t.Fatalf("node after drain: %+v %+v %+v", n.DrainStrategy, n.LastDrain, lastEvent(n))
		}
		as, _, _ := c.Nodes().Allocations(id, nil)
		for _, a := range as {
			if a.DesiredTransition.Migrate == nil || !*a.DesiredTransition.Migrate || a.DesiredStatus != "stop" || a.ClientStatus != "complete" || a.NextAllocation == "" {
				t.Fatalf("old alloc %+v", a)
			}
		}
	}
	// The replacements run on the other two nodes.
	err := s.WaitFor(ctx, func(v *View) bool {
		running := 0
		for _, a := range v.Allocs("") {
			if a.JobID == "web" && a.ClientStatus == "running" {
				if slices.Contains(ids, a.NodeID) {
					return false
				}
				running++
			}
		}
		return running == 4
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDrainDeadlineStopsBatch(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2})
	ctx := testCtx(t)
	if err := s.AddJob(JobSpec{ID: "report", Type: "batch", Groups: []GroupSpec{{Name: "g", Count: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddJob(JobSpec{ID: "agent", Type: "system"}); err != nil {
		t.Fatal(err)
	}
	id := nodeID(t, s, "client-1") // least loaded first: the batch alloc is here
	waitAllocs(ctx, t, c, id, func(as []*api.Allocation) bool {
		return len(as) == 2 && as[0].ClientStatus == "running" && as[1].ClientStatus == "running"
	})

	const deadline = 300 * time.Millisecond
	resp, err := c.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: deadline}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, _, _ := c.Nodes().Info(id, nil)
	forceAt := n.DrainStrategy.ForceDeadline
	msgs := runMonitorDrain(ctx, t, c, id, resp.LastIndex, false)
	if !hasMsg(msgs, "Drain complete for node") || !hasMsg(msgs, "All allocations on node") {
		t.Fatalf("messages %v", msgs)
	}
	n, _, _ = c.Nodes().Info(id, nil)
	if n.DrainStrategy != nil || n.LastDrain.Status != api.DrainStatusComplete || n.SchedulingEligibility != "ineligible" {
		t.Fatalf("after deadline: %+v %+v", n.DrainStrategy, n.LastDrain)
	}
	if e := lastEvent(n); e.Message != "Node drain complete" || e.Details["deadline_reached"] != "true" {
		t.Fatalf("event %+v", e)
	}
	// The batch alloc was left running until the deadline, then stopped.
	for _, e := range s.Events(0) {
		if e.Type == EventAllocStopping && e.Details["job"] == "report" && e.Time.Before(forceAt) {
			t.Fatalf("batch alloc stopped at %v, before the deadline %v", e.Time, forceAt)
		}
	}
	as, _, _ := c.Nodes().Allocations(id, nil)
	for _, a := range as {
		if a.ClientStatus != "complete" || a.DesiredStatus != "stop" {
			t.Fatalf("alloc %s of %s: %s/%s", a.ID, a.JobID, a.DesiredStatus, a.ClientStatus)
		}
	}
}

func TestDrainForceAndNothingToMove(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2})
	ctx := testCtx(t)
	for i, tc := range []struct {
		host     string
		deadline time.Duration
		forced   bool
	}{
		{"client-1", 0, false},           // nothing on it: completes at once
		{"client-2", -time.Second, true}, // force: deadline now
	} {
		id := nodeID(t, s, tc.host)
		resp, err := c.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: tc.deadline}, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		runMonitorDrain(ctx, t, c, id, resp.LastIndex, false)
		n, _, _ := c.Nodes().Info(id, nil)
		if n.DrainStrategy != nil || n.LastDrain.Status != api.DrainStatusComplete ||
			lastEvent(n).Details["deadline_reached"] != map[bool]string{true: "true"}[tc.forced] {
			t.Fatalf("case %d: %+v %+v", i, n.LastDrain, lastEvent(n))
		}
	}
}

func TestDrainIgnoreSystemJobs(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2})
	ctx := testCtx(t)
	if err := s.AddJob(JobSpec{ID: "agent", Type: "system"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddJob(JobSpec{ID: "web", Groups: []GroupSpec{{Name: "web", Count: 2}}}); err != nil {
		t.Fatal(err)
	}
	id := nodeID(t, s, "client-1")
	waitAllocs(ctx, t, c, id, func(as []*api.Allocation) bool {
		return len(as) == 2 && as[0].ClientStatus == "running" && as[1].ClientStatus == "running"
	})
	resp, err := c.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: time.Minute, IgnoreSystemJobs: true}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	runMonitorDrain(ctx, t, c, id, resp.LastIndex, true)
	n, _, _ := c.Nodes().Info(id, nil)
	if n.DrainStrategy != nil || lastEvent(n).Details["deadline_reached"] != "" {
		t.Fatalf("node %+v %+v", n.DrainStrategy, lastEvent(n))
	}
	as, _, _ := c.Nodes().Allocations(id, nil)
	for _, a := range as {
		isSys := *a.Job.Type == api.JobTypeSystem
		if isSys != (a.ClientStatus == "running" && a.DesiredStatus == "run") {
			t.Fatalf("%s alloc %s/%s", *a.Job.Type, a.DesiredStatus, a.ClientStatus)
		}
	}

	// Without IgnoreSystemJobs the system alloc is stopped at the end of the drain.
	// (client-1 is made eligible again so that web has somewhere to go.)
	if _, err := c.Nodes().ToggleEligibility(id, true, nil); err != nil {
		t.Fatal(err)
	}
	id2 := nodeID(t, s, "client-2")
	resp, err = c.Nodes().UpdateDrain(id2, &api.DrainSpec{Deadline: time.Minute}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	runMonitorDrain(ctx, t, c, id2, resp.LastIndex, false)
	as, _, _ = c.Nodes().Allocations(id2, nil)
	for _, a := range as {
		if a.ClientStatus == "running" {
			t.Fatalf("%s alloc still running after drain", *a.Job.Type)
		}
	}
}

func TestEligibility(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1})
	id := nodeID(t, s, "client-1")

	// Bad value (raw: the api client only sends the two valid values).
	req, _ := newJSONRequest("PUT", s.Address()+"/v1/node/"+id+"/eligibility", `{"NodeID":"`+id+`","Eligibility":"maybe"}`)
	code, body := doRaw(t, req)
	if code != 500 || body != `invalid scheduling eligibility "maybe"` {
		t.Fatalf("bad value: %d %q", code, body)
	}

	// Unchanged: 200 with index 0.
	resp, err := c.Nodes().ToggleEligibility(id, true, nil)
	if err != nil || resp.LastIndex != 0 || resp.NodeModifyIndex != 0 {
		t.Fatalf("unchanged: %+v, %v", resp, err)
	}
	resp, err = c.Nodes().ToggleEligibility(id, false, nil)
	if err != nil || resp.LastIndex == 0 {
		t.Fatalf("ineligible: %+v, %v", resp, err)
	}
	n, _, _ := c.Nodes().Info(id, nil)
	if n.SchedulingEligibility != "ineligible" || lastEvent(n).Message != "Node marked as ineligible for scheduling" || lastEvent(n).Subsystem != "Cluster" {
		t.Fatalf("node %s %+v", n.SchedulingEligibility, lastEvent(n))
	}

	// Eligible while draining is refused. The drain must still be running when
	// the toggle comes, so wait for the batch allocation that keeps it busy: it is
	// placed only once the node is eligible again.
	if err := s.AddJob(JobSpec{ID: "forever", Type: "batch"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nodes().ToggleEligibility(id, true, nil); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	waitAllocs(wctx, t, c, id, func(as []*api.Allocation) bool {
		for _, a := range as {
			if a.JobID == "forever" && a.ClientStatus == "running" {
				return true
			}
		}
		return false
	})
	if _, err := c.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: time.Hour}, false, nil); err != nil {
		t.Fatal(err)
	}
	_, err = c.Nodes().ToggleEligibility(id, true, nil)
	wantStatus(t, err, 500, "can not set node's scheduling eligibility to eligible while it is draining")

	// Cancel + mark eligible.
	if _, err := c.Nodes().UpdateDrain(id, nil, true, nil); err != nil {
		t.Fatal(err)
	}
	n, _, _ = c.Nodes().Info(id, nil)
	if n.SchedulingEligibility != "eligible" || n.LastDrain.Status != api.DrainStatusCanceled {
		t.Fatalf("after cancel: %s %+v", n.SchedulingEligibility, n.LastDrain)
	}
}

// The scheduler's round runs only when its inputs changed or a drainer's mark
// waits for it: on a settled cluster it is skipped, and a node write, a job
// update or a mark makes the next round due again, until it has run.
func TestScheduleDueOnlyAfterAChange(t *testing.T) {
	s, _ := newTestSim(t, Config{Clients: 2})
	if err := s.AddJob(JobSpec{ID: "web", Groups: []GroupSpec{{Name: "g", Count: 2}}}); err != nil {
		t.Fatal(err)
	}
	due := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.cluster.scheduleDue()
	}
	settled := func(why string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for due() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the scheduler's round stays due", why)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	settled("after the job was placed")
	s.mu.Lock()
	sn := s.cluster.byHost[0]
	s.cluster.touchNodeLocked(sn.node, s.bumpLocked(), eventNodeRegistration)
	nodeWrite := s.cluster.scheduleDue()
	var sa *simAlloc
	for _, id := range s.cluster.allocOrder {
		if a := s.cluster.allocs[id]; !allocTerminal(a.a) {
			sa = a
			break
		}
	}
	s.cluster.scheduleLocked(s, time.Now())
	s.cluster.markMigrateLocked(s, sa)
	s.cluster.scheduleLocked(s, time.Now()) // the mark waits for a later round
	marked := s.cluster.scheduleDue()
	s.mu.Unlock()
	if !nodeWrite || !marked {
		t.Fatalf("due after a node write: %v, with a mark waiting: %v; want both", nodeWrite, marked)
	}
	settled("after the mark")
	s.mu.Lock()
	stopped := sa.a.DesiredStatus == api.AllocDesiredStatusStop
	s.mu.Unlock()
	if !stopped {
		t.Error("the marked allocation was not stopped by a later round")
	}
	if err := s.UpdateJob(JobSpec{ID: "web", Meta: map[string]string{"v": "2"}}); err != nil {
		t.Fatal(err)
	}
	settled("after a job update")
}
