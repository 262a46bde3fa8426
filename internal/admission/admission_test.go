package admission

import (
	"errors"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/alertgate"
	"github.com/rollboot/rollboot/internal/capacity"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

var now = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// pending is a pending client host on its own node in the default group, in
// pool "default", asking at now-1h+at.
func pending(name string, at time.Duration) Pending {
	return Pending{Request: policy.Request{Host: name, Group: policy.DefaultGroupName, RequestedAt: now.Add(-time.Hour + at)},
		Rec:  &store.HostRecord{Host: name, NodeID: "node-" + name, Roles: []string{store.RoleNomadClient}},
		Node: &phase.NodeView{ID: "node-" + name, Status: "ready", Eligible: true}, Pool: "default"}
}

func input(slots int, queue ...Pending) Input {
	in := Input{Now: now, Rules: Rules{Groups: []policy.Group{{Name: policy.DefaultGroupName, Concurrency: slots}}, DrainDeadline: time.Hour},
		Queue: queue, Groups: map[string]GroupCount{policy.DefaultGroupName: {Size: 10}}, Jobs: map[string][]string{}}
	for _, p := range queue {
		in.Jobs[p.Host] = nil // read: no system job runs on its node
	}
	return in
}

// Admit asks for each read it lacks, in the order that spares reads: the
// alerts first (they hold every host), then the workload blockers of the hosts
// still queued, then what the capacity gate and the agent check lack for the
// hosts offered a slot; with everything read it decides.
func TestAdmitNeeds(t *testing.T) {
	firing := &alertgate.Verdict{Blocking: []string{"Down"}}
	tests := []struct {
		name      string
		in        func() Input
		needs     Needs
		admitted  []string
		waitKinds map[string]phase.WaitKind
	}{
		{name: "nothing queued: nothing read", in: func() Input {
			in := input(1)
			in.Rules.Alerts, in.Rules.Workloads, in.Rules.Capacity = true, true, true
			return in
		}},
		{name: "alerts on: read first", in: func() Input {
			in := input(1, pending("a", 0))
			in.Rules.Alerts, in.Rules.Workloads = true, true
			return in
		}, needs: Needs{Alerts: true}},
		{name: "alerts fire: every host held, nothing else read", in: func() Input {
			in := input(1, pending("a", 0), pending("b", time.Minute))
			in.Rules.Alerts, in.Rules.Workloads, in.Rules.Capacity = true, true, true
			in.Alerts = firing
			return in
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitAlerts, "b": phase.WaitAlerts}},
		{name: "workload blockers: read for the queued hosts", in: func() Input {
			in := input(1, pending("a", 0), pending("b", time.Minute))
			in.Rules.Workloads = true
			return in
		}, needs: Needs{Workloads: []string{"a", "b"}}},
		{name: "a workload hold gives the slot to the next host", in: func() Input {
			in := input(1, pending("a", 0), pending("b", time.Minute))
			in.Rules.Workloads = true
			in.WorkloadHolds = map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitBlockingJob, "job etl"), "b": {}}
			return in
		}, admitted: []string{"b"}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitBlockingJob}},
		{name: "workload blockers: not read for the hosts of a full group", in: func() Input {
			in := input(1, pending("a", 0), pending("b", time.Minute))
			in.Rules.Workloads = true
			in.Groups[policy.DefaultGroupName] = GroupCount{Size: 10, Active: 1}
			return in
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitQueued, "b": phase.WaitQueued}},
		{name: "workload blockers: read for a full group's hosts with cordon_next (the cordons skip a held host)", in: func() Input {
			in := input(1, pending("a", 0), pending("b", time.Minute))
			in.Rules.Workloads, in.Rules.CordonNext = true, 1
			in.Groups[policy.DefaultGroupName] = GroupCount{Size: 10, Active: 1}
			return in
		}, needs: Needs{Workloads: []string{"a", "b"}}},
		{name: "workload blockers: not read for a full group's hosts, read for those of one with a slot", in: func() Input {
			in := input(1, pending("a", 0), pending("b", time.Minute))
			in.Rules.Groups = append(in.Rules.Groups, policy.Group{Name: "web", Concurrency: 1})
			in.Queue[1].Group = "web"
			in.Rules.Workloads = true
			in.Groups[policy.DefaultGroupName] = GroupCount{Size: 10, Active: 1}
			in.Groups["web"] = GroupCount{Size: 10}
			return in
		}, needs: Needs{Workloads: []string{"b"}}},
		{name: "workload blockers: read for the hosts not read yet, once their group has a slot", in: func() Input {
			in := input(2, pending("a", 0), pending("b", time.Minute))
			in.Rules.Workloads = true
			in.WorkloadHolds = map[string]phase.WaitReason{"a": {}}
			return in
		}, needs: Needs{Workloads: []string{"b"}}},
		{name: "system jobs of a host offered a slot: read", in: func() Input {
			in := input(1, pending("a", 0))
			delete(in.Jobs, "a")
			return in
		}, needs: Needs{Jobs: []string{"a"}}, admitted: []string{"a"}},
		{name: "the agent's job missing from the node: held, the next host goes", in: func() Input {
			a := pending("a", 0)
			a.Rec.AgentJob = "default/rollboot"
			return input(1, a, pending("b", time.Minute))
		}, admitted: []string{"b"}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitAgentNotOnNode}},
		{name: "capacity: the node's allocations first", in: func() Input {
			in := input(1, pending("a", 0))
			in.Rules.Capacity = true
			return in
		}, needs: Needs{Capacity: CapacityNeeds{Allocs: []string{"node-a"}}}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitCapacity}},
		{name: "capacity: as many hosts' allocations at once as the group has slots free", in: func() Input {
			in := input(3, pending("a", 0), pending("b", time.Minute), pending("c", 2*time.Minute), pending("d", 3*time.Minute))
			in.Rules.Capacity = true
			return in
		}, needs: Needs{Capacity: CapacityNeeds{Allocs: []string{"node-a", "node-b", "node-c"}}},
			waitKinds: map[string]phase.WaitKind{"a": phase.WaitCapacity, "b": phase.WaitCapacity, "c": phase.WaitCapacity, "d": phase.WaitCapacity}},
		{name: "capacity: then candidates of the pool", in: func() Input {
			in := input(1, pending("a", 0))
			in.Rules.Capacity = true
			in.Capacity = &Capacity{Candidates: map[string][]string{"default": {"node-x", "node-y", "node-z"}},
				Movers: map[string][]capacity.Alloc{"node-a": {{Name: "web[0]", Pool: "default", Ask: capacity.Resources{MemoryMB: 512}}}},
				Nodes:  map[string]capacity.Node{}, Read: map[string]int{}}
			return in
		}, needs: Needs{Capacity: CapacityNeeds{Pools: []string{"default"}}}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitCapacity}},
		{name: "capacity: a failed read holds with it", in: func() Input {
			in := input(1, pending("a", 0))
			in.Rules.Capacity = true
			in.Capacity = &Capacity{Err: errors.New("read node x: 500")}
			return in
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitCapacity}},
		{name: "a stored policy that cannot be used holds every host, reads nothing", in: func() Input {
			in := input(1, pending("a", 0))
			in.Rules.Alerts, in.Rules.Hold = true, phase.WaitFor(phase.WaitPolicyInvalid, "bad")
			return in
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitPolicyInvalid}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, needs := Admit(tt.in())
			if got, want := needs, tt.needs; !equalNeeds(got, want) {
				t.Errorf("needs %+v, want %+v", got, want)
			}
			if !needs.None() {
				return
			}
			for _, h := range tt.admitted {
				if !res.Admitted[h] {
					t.Errorf("%s not admitted: %v", h, res.Wait[h])
				}
			}
			if len(res.Admitted) != len(tt.admitted) {
				t.Errorf("admitted %v, want %v", res.Admitted, tt.admitted)
			}
			for h, k := range tt.waitKinds {
				if res.Wait[h].Kind != k {
					t.Errorf("%s waits for %v, want kind %s", h, res.Wait[h], k.Name())
				}
			}
		})
	}
}

func equalNeeds(a, b Needs) bool {
	eq := func(x, y []string) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i] != y[i] {
				return false
			}
		}
		return true
	}
	return a.Alerts == b.Alerts && eq(a.Workloads, b.Workloads) && eq(a.Jobs, b.Jobs) &&
		eq(a.Capacity.Allocs, b.Capacity.Allocs) && eq(a.Capacity.Pools, b.Capacity.Pools)
}

// A group settling after a host came back holds its hosts until the settle
// time ends, which is when admission asks to be run again.
func TestAdmitSettle(t *testing.T) {
	in := input(2, pending("a", 0))
	in.Rules.Groups[0].Settle = 10 * time.Minute
	in.Groups[policy.DefaultGroupName] = GroupCount{Size: 10, LastBack: "z", LastBackAt: now.Add(-4 * time.Minute)}
	res, needs := Admit(in)
	if !needs.None() || res.Admitted["a"] || res.Wait["a"].Kind != phase.WaitSettle {
		t.Fatalf("a admitted %t, waits %v; needs %+v", res.Admitted["a"], res.Wait["a"], needs)
	}
	if want := now.Add(6 * time.Minute); !res.RecheckAt.Equal(want) {
		t.Errorf("RecheckAt %v, want %v", res.RecheckAt, want)
	}
}
