package nomadsim

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Placement respects the job's and the group's constraints: an allocation no
// node accepts stays unplaced until a node's meta or attributes change, and
// the allocations carry the constraints in their job.
func TestPlacementRespectsConstraints(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for h, rack := range map[string]string{"client-1": "r1", "client-2": "r2", "client-3": "r2"} {
		if err := s.SetNodeMeta(h, map[string]string{"rack": rack}); err != nil {
			t.Fatal(err)
		}
	}
	hostsOf := func(v *View, job string) []string {
		var out []string
		for _, h := range []string{"client-1", "client-2", "client-3"} {
			hh, _ := v.Host(h)
			for _, a := range v.Allocs(hh.NodeID) {
				if a.JobID == job && !allocTerminal(a) {
					out = append(out, h)
				}
			}
		}
		return out
	}
	// Job level: linux only (every node); group level: not rack r2.
	if err := s.AddJob(JobSpec{ID: "web", Constraints: []ConstraintSpec{{Attribute: "${attr.kernel.name}", Value: "linux"}},
		Groups: []GroupSpec{{Name: "web", Count: 2, Constraints: []ConstraintSpec{{Attribute: "${meta.rack}", Operator: "!=", Value: "r2"}}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(ctx, func(v *View) bool { return slices.Equal(hostsOf(v, "web"), []string{"client-1", "client-1"}) }); err != nil {
		t.Fatal(err)
	}
	n1, _ := s.Node("client-1")
	allocs, _, err := c.Nodes().Allocations(n1.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range allocs {
		if a.JobID != "web" {
			continue
		}
		want := api.NewConstraint("${meta.rack}", "!=", "r2")
		if len(a.Job.Constraints) != 1 || *a.Job.Constraints[0] != *api.NewConstraint("${attr.kernel.name}", "=", "linux") ||
			len(a.Job.TaskGroups) != 1 || len(a.Job.TaskGroups[0].Constraints) != 1 || *a.Job.TaskGroups[0].Constraints[0] != *want {
			t.Errorf("alloc's job constraints: %+v, group %+v", a.Job.Constraints, a.Job.TaskGroups[0].Constraints)
		}
	}

	// No node meets an attribute constraint: unplaced, until a node's
	// attributes change; a system job goes only to the nodes that meet it.
	if err := s.AddJob(JobSpec{ID: "arm", Groups: []GroupSpec{{Name: "arm", Constraints: []ConstraintSpec{
		{Attribute: "${attr.cpu.arch}", Operator: "regexp", Value: "^arm"}}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddJob(JobSpec{ID: "agent", Type: "system", Constraints: []ConstraintSpec{
		{Attribute: "${meta.rack}", Operator: "set_contains_any", Value: "r2,r9"}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(ctx, func(v *View) bool {
		return len(hostsOf(v, "arm")) == 0 && slices.Equal(hostsOf(v, "agent"), []string{"client-2", "client-3"})
	}); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Node("client-3")
	if err := s.SetNodeAttributes("client-3", map[string]string{"cpu.arch": "arm64"}); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Node("client-3")
	if after.ModifyIndex <= before.ModifyIndex || after.Attributes["cpu.arch"] != "arm64" || after.Attributes["kernel.name"] != "linux" {
		t.Errorf("after SetNodeAttributes: index %d → %d, attributes %v", before.ModifyIndex, after.ModifyIndex, after.Attributes)
	}
	if err := s.WaitFor(ctx, func(v *View) bool { return slices.Equal(hostsOf(v, "arm"), []string{"client-3"}) }); err != nil {
		t.Fatal(err)
	}
	if err := s.SetNodeAttributes("client-3", map[string]string{"cpu.arch": ""}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Node("client-3"); n.Attributes["cpu.arch"] != "" {
		t.Errorf("empty value did not delete the attribute: %v", n.Attributes)
	}
}

// A job with an invalid constraint is refused, as Nomad refuses it at submit.
func TestAddJobRejectsInvalidConstraints(t *testing.T) {
	s, _ := newTestSim(t, Config{Clients: 1})
	for _, tt := range []struct {
		spec JobSpec
		want string
	}{
		{JobSpec{ID: "a", Constraints: []ConstraintSpec{{Attribute: "${meta.rack}", Operator: "near", Value: "r1"}}},
			`job a: constraint 0: unknown constraint operator "near"`},
		{JobSpec{ID: "b", Groups: []GroupSpec{{Name: "g", Constraints: []ConstraintSpec{{Attribute: "${meta.rack}", Operator: "regexp", Value: "("}}}}},
			"job b: group g: constraint 0: regular expression failed to compile"},
		{JobSpec{ID: "c", Constraints: []ConstraintSpec{{Value: "r1"}}}, "no attribute provided"},
	} {
		err := s.AddJob(tt.spec)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("AddJob(%s) = %v, want %q", tt.spec.ID, err, tt.want)
		}
	}
	if len(s.Jobs()) != 0 {
		t.Errorf("a refused job was registered: %v", s.Jobs())
	}
}

// distinct_hosts keeps a group's (or with the job's, the job's) allocations on
// separate nodes, as the scheduler's DistinctHostsIterator does: one more than
// the nodes stays unplaced, with a blocked evaluation.
func TestPlacementDistinctHosts(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodesOf := func(v *View, job string) map[string]int {
		out := map[string]int{}
		for _, h := range []string{"client-1", "client-2", "client-3"} {
			hh, _ := v.Host(h)
			for _, a := range v.Allocs(hh.NodeID) {
				if a.JobID == job && !allocTerminal(a) {
					out[h]++
				}
			}
		}
		return out
	}
	distinct := []ConstraintSpec{{Operator: "distinct_hosts", Value: "true"}}
	if err := s.AddJob(JobSpec{ID: "web", Groups: []GroupSpec{{Name: "web", Count: 4, Constraints: distinct}}}); err != nil {
		t.Fatal(err)
	}
	// The job's distinct_hosts spans its groups: 2 + 1 on three nodes.
	if err := s.AddJob(JobSpec{ID: "db", Constraints: distinct,
		Groups: []GroupSpec{{Name: "a", Count: 2}, {Name: "b", Count: 1}}}); err != nil {
		t.Fatal(err)
	}
	one := func(m map[string]int) bool {
		return len(m) == 3 && m["client-1"] == 1 && m["client-2"] == 1 && m["client-3"] == 1
	}
	var web, db map[string]int
	if err := s.WaitFor(ctx, func(v *View) bool {
		web, db = nodesOf(v, "web"), nodesOf(v, "db")
		return one(web) && one(db)
	}); err != nil {
		t.Fatalf("%v: web on %v, db on %v, want one of each on every node", err, web, db)
	}
	evals, _, err := c.Evaluations().List(&api.QueryOptions{Filter: `Status == "blocked"`})
	if err != nil {
		t.Fatal(err)
	}
	if len(evals) != 1 || evals[0].JobID != "web" || evals[0].QueuedAllocations["web"] != 1 {
		t.Fatalf("blocked evaluations = %+v, want web's, one allocation queued", evals)
	}
	// A fourth node: the fourth allocation goes there.
	if _, err := s.AddHost("client-4", false, true, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(ctx, func(v *View) bool {
		hh, _ := v.Host("client-4")
		n := 0
		for _, a := range v.Allocs(hh.NodeID) {
			if a.JobID == "web" && !allocTerminal(a) {
				n++
			}
		}
		return n == 1
	}); err != nil {
		t.Fatal(err)
	}
}

// A job's distinct_hosts counts what its earlier groups placed in the same
// scheduling round: the least loaded node, taken by group a, is not taken by b.
func TestPlacementDistinctHostsAcrossGroups(t *testing.T) {
	s, _ := newTestSim(t, Config{Clients: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	count := func(v *View, host, job string) int {
		hh, _ := v.Host(host)
		n := 0
		for _, a := range v.Allocs(hh.NodeID) {
			if a.JobID == job && !allocTerminal(a) {
				n++
			}
		}
		return n
	}
	if err := s.AddJob(JobSpec{ID: "filler", Groups: []GroupSpec{{Name: "f", Count: 3,
		Constraints: []ConstraintSpec{{Attribute: "${node.unique.name}", Value: "client-2"}}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(ctx, func(v *View) bool { return count(v, "client-2", "filler") == 3 }); err != nil {
		t.Fatal(err)
	}
	if err := s.AddJob(JobSpec{ID: "pair", Constraints: []ConstraintSpec{{Operator: "distinct_hosts"}},
		Groups: []GroupSpec{{Name: "a", Count: 1}, {Name: "b", Count: 1}}}); err != nil {
		t.Fatal(err)
	}
	var on1, on2 int
	if err := s.WaitFor(ctx, func(v *View) bool {
		on1, on2 = count(v, "client-1", "pair"), count(v, "client-2", "pair")
		return on1+on2 == 2
	}); err != nil {
		t.Fatal(err)
	}
	if on1 != 1 || on2 != 1 {
		t.Errorf("pair: %d on client-1, %d on client-2; want one on each", on1, on2)
	}
}
