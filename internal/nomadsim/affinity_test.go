package nomadsim

import (
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

func TestAffinityScore(t *testing.T) {
	n := &api.Node{Name: "client-1", Meta: map[string]string{"next": "true", "rack": "r1"}, Attributes: map[string]string{}}
	aff := func(attr, op, val string, w int8) *api.Affinity { return api.NewAffinity(attr, op, val, w) }
	tests := []struct {
		name string
		affs []*api.Affinity
		want float64
	}{
		{name: "none", want: 0},
		{name: "a negative one matched", affs: []*api.Affinity{aff("${meta.next}", "=", "true", -100)}, want: -1},
		{name: "a negative one not matched", affs: []*api.Affinity{aff("${meta.next}", "=", "false", -100)}, want: 0},
		{name: "a key the node lacks matches nothing", affs: []*api.Affinity{aff("${meta.missing}", "=", "true", -100)}, want: 0},
		{name: "weights over their absolute sum", affs: []*api.Affinity{
			aff("${meta.next}", "=", "true", -50), aff("${meta.rack}", "=", "r1", 100), aff("${meta.rack}", "=", "r2", 50)},
			want: 50.0 / 200},
		{name: "the operators of constraints", affs: []*api.Affinity{aff("${meta.rack}", "regexp", "^r[0-9]$", 20)}, want: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := affinityScore(tc.affs, n); got != tc.want {
				t.Fatalf("score %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAffinityValidate(t *testing.T) {
	for _, tc := range []struct {
		a    AffinitySpec
		want string // "" valid
	}{
		{a: AffinitySpec{Attribute: "${meta.x}", Operator: "=", Value: "y", Weight: -100}},
		{a: AffinitySpec{Attribute: "${meta.x}", Operator: "=", Value: "y"}, want: "weight cannot be zero"},
		{a: AffinitySpec{Attribute: "${meta.x}", Operator: "=", Value: "y", Weight: 101}, want: "range [-100,100]"},
		{a: AffinitySpec{Operator: "=", Value: "y", Weight: 10}, want: "no attribute"},
		{a: AffinitySpec{Attribute: "${meta.x}", Operator: "distinct_hosts", Weight: 10}, want: "unknown affinity operator"},
		{a: AffinitySpec{Attribute: "${meta.x}", Operator: "regexp", Value: "(", Weight: 10}, want: "regular expression"},
	} {
		err := validateAffinity(tc.a)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.a, err, tc.want)
		}
	}
}

// A job parsed from HCL with an affinity away from nodes whose dynamic meta
// says next = "true" is placed on the other nodes, though they are the most
// loaded; without the meta it goes to the least loaded.
func TestAffinityPlacement(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 3})
	ctx := testCtx(t)
	// client-3 carries three allocations, client-1 and client-2 none.
	if err := s.AddJob(JobSpec{ID: "filler", Type: "service", Constraints: []ConstraintSpec{{Attribute: "${node.unique.name}", Value: "client-3"}},
		Groups: []GroupSpec{{Name: "g", Count: 3}}}); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"client-1", "client-2"} {
		if _, err := c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: nodeID(t, s, h), Meta: map[string]*string{"next": pointerOf("true")}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The client sends its dynamic meta to the servers with its next node
	// update: placement sees it then.
	if err := s.WaitFor(ctx, func(v *View) bool {
		for _, h := range []string{"client-1", "client-2"} {
			hv, _ := v.Host(h)
			if n, _ := v.Node(hv.NodeID); n.Meta["next"] != "true" {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	job, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: `job "steered" {
  group "web" {
    count = 1
    affinity {
      attribute = "${meta.next}"
      value     = "true"
      weight    = -100
    }
    task "web" {
      driver = "raw_exec"
    }
  }
}`})
	if err != nil {
		t.Fatal(err)
	}
	if len(job.TaskGroups) != 1 || len(job.TaskGroups[0].Affinities) != 1 {
		t.Fatalf("parsed %+v: want the group's affinity", job.TaskGroups)
	}
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	on := func(job string) string {
		var host string
		if err := s.WaitFor(ctx, func(v *View) bool {
			for _, h := range []string{"client-1", "client-2", "client-3"} {
				hv, _ := v.Host(h)
				for _, a := range v.Allocs(hv.NodeID) {
					if a.JobID == job && a.DesiredStatus == api.AllocDesiredStatusRun {
						host = h
						return true
					}
				}
			}
			return false
		}); err != nil {
			t.Fatal(err)
		}
		return host
	}
	if h := on("steered"); h != "client-3" {
		t.Fatalf("placed on %s: want client-3, the one node without next = \"true\"", h)
	}
	// The same job without its affinity goes to the least loaded node.
	job.ID, job.Name = pointerOf("plain"), pointerOf("plain")
	job.TaskGroups[0].Affinities = nil
	if _, _, err := c.Jobs().Register(job, nil); err != nil {
		t.Fatal(err)
	}
	if h := on("plain"); h == "client-3" {
		t.Fatalf("placed on %s without an affinity: want a less loaded node", h)
	}
}
