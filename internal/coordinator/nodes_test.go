package coordinator

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

// nodeLists records the node lists sent (their filter, "" for the whole list).
type nodeLists struct {
	base http.RoundTripper
	mu   sync.Mutex
	sent []string
}

func (n *nodeLists) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/v1/nodes" && r.URL.Query().Get("index") == "" {
		n.mu.Lock()
		n.sent = append(n.sent, r.URL.Query().Get("filter"))
		n.mu.Unlock()
	}
	return n.base.RoundTrip(r)
}

func (n *nodeLists) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := n.sent
	n.sent = nil
	return out
}

// groupsFixture starts an emulator of clients nodes and a coordinator of
// groups over it, whose node lists lists records; groups reads the nodes as a
// pass does and returns each node's group by name.
func groupsFixture(t *testing.T, clients int, specs []rules.GroupSpec) (*nomadsim.Sim, *Coordinator, *nodeLists, func() map[string]string) {
	t.Helper()
	lists := &nodeLists{base: http.DefaultTransport}
	sim, client := simtest.Start(t, nomadsim.Config{Clients: clients, HeartbeatTTL: time.Hour}, lists)
	co := New(Options{
		Deps: Deps{Nodes: client.Nodes(), Store: store.New(client.Variables(), "rollboot", "")},
		Rules: rules.Rules{
			Groups: specs,
			Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
		},
		Runtime: Runtime{Resync: time.Hour},
	})
	groups := func() map[string]string {
		t.Helper()
		co.takeMail() // a pass
		nodes, groupOf, err := co.readNodes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for id, g := range groupOf {
			out[nodes[id].Name] = g
		}
		return out
	}
	return sim, co, lists, groups
}

// A pass takes the node list the watch read, unless it is older than the
// coordinator's own last node write; group members are asked of Nomad again
// only for the nodes that changed, with their IDs added to each group's
// filter, and a change of meta moves a node to the group whose filter now
// matches it, as Nomad evaluates it.
func TestOneNodeListPerPass(t *testing.T) {
	sim, co, lists, groups := groupsFixture(t, 4, []rules.GroupSpec{
		{Group: policy.Group{Name: "db", Concurrency: 1}, Filter: `Meta.tier == "db"`},
		{Group: policy.Group{Name: "rest", Concurrency: 1}},
	})
	ctx := t.Context()
	if err := sim.SetNodeMeta("client-1", map[string]string{"tier": "db"}); err != nil {
		t.Fatal(err)
	}
	h1, _ := sim.Host("client-1")
	h2, _ := sim.Host("client-2")

	// First pass, no watch yet: the whole list and each filtered group.
	if g := groups(); g["client-1"] != "db" || g["client-2"] != "rest" || len(g) != 4 {
		t.Fatalf("groups %v", g)
	}
	if got := lists.take(); len(got) != 2 || got[0] != "" || got[1] != `Meta.tier == "db"` {
		t.Fatalf("first pass listed %q, want the list and the db group's", got)
	}
	// The watch reads the list: the next pass takes it, and since nothing
	// changed asks nothing of the groups.
	if _, err := co.watchNodes(ctx, 0); err != nil {
		t.Fatal(err)
	}
	lists.take()
	groups()
	if got := lists.take(); len(got) != 0 {
		t.Fatalf("a pass with nothing changed listed %q", got)
	}
	// A write of ours makes the list it has too old: read again; one node
	// changed, so only it is asked for, by ID.
	if _, err := co.opt.Nodes.ToggleEligibility(h2.NodeID, false, nil); err != nil {
		t.Fatal(err)
	}
	groups()
	want := `(Meta.tier == "db") and (ID == "` + h2.NodeID + `")`
	if got := lists.take(); len(got) != 2 || got[0] != "" || got[1] != want {
		t.Fatalf("after a write listed %q, want the list and %q", got, want)
	}
	// A change of meta moves nodes (no watch ran since: the pass lists).
	if err := sim.SetNodeMeta("client-2", map[string]string{"tier": "db"}); err != nil {
		t.Fatal(err)
	}
	if err := sim.SetNodeMeta("client-1", map[string]string{"tier": ""}); err != nil {
		t.Fatal(err)
	}
	g := groups()
	if g["client-1"] != "rest" || g["client-2"] != "db" || g["client-3"] != "rest" {
		t.Fatalf("after meta changes: groups %v", g)
	}
	got := lists.take()
	if len(got) != 2 || !strings.Contains(got[1], h1.NodeID) || !strings.Contains(got[1], h2.NodeID) || strings.Count(got[1], "ID ==") != 2 {
		t.Fatalf("after meta changes listed %q, want the list and the two changed nodes", got)
	}
}

// When every group's filter selects on what the node list shows of a node's
// identity, a node whose drain, eligibility or status changed keeps its group
// without a question to Nomad; one whose identity changed is asked for.
func TestGroupsAskedOnlyWhenIdentityChanges(t *testing.T) {
	sim, co, lists, groups := groupsFixture(t, 3, []rules.GroupSpec{
		{Group: policy.Group{Name: "gpu", Concurrency: 1}, Filter: `NodeClass == "gpu"`},
		{Group: policy.Group{Name: "rest", Concurrency: 1}},
	})
	if err := sim.SetNodeClass("client-1", "gpu"); err != nil {
		t.Fatal(err)
	}
	if g := groups(); g["client-1"] != "gpu" || g["client-2"] != "rest" {
		t.Fatalf("groups %v", g)
	}
	lists.take()
	h1, _ := sim.Host("client-1")
	if _, err := co.opt.Nodes.ToggleEligibility(h1.NodeID, false, nil); err != nil {
		t.Fatal(err)
	}
	if g := groups(); g["client-1"] != "gpu" || g["client-2"] != "rest" {
		t.Fatalf("after an eligibility change: groups %v", g)
	}
	if got := lists.take(); len(got) != 1 || got[0] != "" {
		t.Fatalf("after an eligibility change listed %q, want the list alone", got)
	}
	if err := sim.SetNodeClass("client-2", "gpu"); err != nil {
		t.Fatal(err)
	}
	if g := groups(); g["client-1"] != "gpu" || g["client-2"] != "gpu" || g["client-3"] != "rest" {
		t.Fatalf("after a class change: groups %v", g)
	}
	h2, _ := sim.Host("client-2")
	want := `(NodeClass == "gpu") and (ID == "` + h2.NodeID + `")`
	if got := lists.take(); len(got) != 2 || got[1] != want {
		t.Fatalf("after a class change listed %q, want the list and %q", got, want)
	}
}

// The nodes and groups a pass takes are, over a randomly changing world, the
// node list and each node's first matching group as Nomad says them now,
// whenever the node watch has answered every change of others (the
// coordinator's own writes need no answer: a pass waits for the watch to show
// them, or lists the nodes itself); no pass sees a node older than the pass
// before saw it, even when the watch's answer was read before a pass listed
// the nodes itself and comes after it; and a pass after nothing changed sends
// no node list at all. The world: nodes' meta and class changed (what the
// groups' filters select on), their eligibility toggled by others and by the
// coordinator, the node watch answering (only with a change to show: it
// blocks otherwise), at once or late, failing and coming back; passes; groups
// whose filters select on the nodes' identity only, or also on their meta.
func TestNodeGroupsEqualFreshOnes(t *testing.T) {
	for seed := range uint64(16) {
		rng := rand.New(rand.NewPCG(seed, 53))
		specs := []rules.GroupSpec{{Group: policy.Group{Name: "gpu", Concurrency: 1}, Filter: `NodeClass == "gpu"`}}
		if seed%2 == 1 {
			specs = append([]rules.GroupSpec{{Group: policy.Group{Name: "db", Concurrency: 1}, Filter: `Meta.tier == "db"`}}, specs...)
		}
		specs = append(specs, rules.GroupSpec{Group: policy.Group{Name: "rest", Concurrency: 1}})
		sim, co, lists, _ := groupsFixture(t, 4, specs)
		plain, err := api.NewClient(&api.Config{Address: sim.Address()}) // its requests are not counted
		if err != nil {
			t.Fatal(err)
		}
		defer plain.Close()
		ctx := t.Context()
		current := func() ([]*api.NodeListStub, uint64) {
			t.Helper()
			list, meta, err := plain.Nodes().List(nil)
			if err != nil {
				t.Fatal(err)
			}
			return list, meta.LastIndex
		}
		freshGroups := func() map[string]string {
			t.Helper()
			out := map[string]string{}
			for _, g := range specs {
				members, _, err := plain.Nodes().List(&api.QueryOptions{Filter: g.Filter})
				if err != nil {
					t.Fatal(err)
				}
				for _, n := range members {
					if _, ok := out[n.ID]; !ok {
						out[n.ID] = g.Name
					}
				}
			}
			return out
		}
		host := func() (string, string) {
			name := fmt.Sprintf("client-%d", rng.IntN(4)+1)
			h, _ := sim.Host(name)
			return name, h.NodeID
		}
		var (
			idx    uint64 // the watch's last answer (0: none since it failed)
			live   bool
			others bool // a change by others the watch has not answered
			moved  = true
			late   []*api.NodeListStub // an answer read, not delivered yet
			lateAt uint64
			seen   = map[string]uint64{} // the ModifyIndex of each node the last pass saw
		)
		for step := range 40 {
			switch rng.IntN(10) {
			case 8: // the watch reads its answer, to deliver it later
				if late == nil {
					late, lateAt = current()
				}
			case 9: // the answer read earlier arrives (unless the watch kept a newer one)
				if late == nil {
					continue
				}
				co.mail.setNodes(late, lateAt)
				if !live || lateAt >= idx {
					idx, live = lateAt, true
				}
				_, n := current()
				late, others, moved = nil, others || n != idx, true
			case 0, 1: // others change a node
				name, id := host()
				switch rng.IntN(3) {
				case 0:
					err = sim.SetNodeMeta(name, map[string]string{"tier": []string{"db", ""}[rng.IntN(2)]})
				case 1:
					err = sim.SetNodeClass(name, []string{"gpu", ""}[rng.IntN(2)])
				default:
					_, err = plain.Nodes().ToggleEligibility(id, rng.IntN(2) == 0, nil)
				}
				if err != nil {
					t.Fatal(err)
				}
				others, moved = true, true
			case 2: // the coordinator changes a node's eligibility
				_, id := host()
				if _, err := co.opt.Nodes.ToggleEligibility(id, rng.IntN(2) == 0, nil); err != nil {
					t.Fatal(err)
				}
				moved = true
			case 3, 4: // the watch answers, if it has something to answer with
				if _, n := current(); live && n == idx {
					continue // it waits for a change
				}
				n, err := co.watchNodes(ctx, idx)
				if err != nil {
					t.Fatal(err)
				}
				idx, live, others = n, true, false
			case 5: // the watch fails
				co.mail.setNodes(nil, 0)
				idx, live = 0, false
			default: // a pass
				co.takeMail()
				lists.take()
				nodes, groupOf, err := co.readNodes(ctx)
				if err != nil {
					t.Fatal(err)
				}
				sent := lists.take()
				for id, m := range seen {
					if nodes[id].ModifyIndex < m {
						t.Fatalf("seed %d step %d: node %s at %d, the pass before saw it at %d", seed, step, id, nodes[id].ModifyIndex, m)
					}
				}
				for id, n := range nodes {
					seen[id] = n.ModifyIndex
				}
				if !live || !others {
					list, _ := current()
					want := map[string]*api.NodeListStub{}
					for _, n := range list {
						want[n.ID] = n
					}
					a, _ := json.Marshal(nodes)
					b, _ := json.Marshal(want)
					if string(a) != string(b) {
						t.Fatalf("seed %d step %d: nodes\n%s\nwant\n%s", seed, step, a, b)
					}
					if g := freshGroups(); !maps.Equal(groupOf, g) {
						t.Fatalf("seed %d step %d: groups %v, want %v", seed, step, groupOf, g)
					}
				}
				if live && !others && !moved && len(sent) > 0 {
					t.Fatalf("seed %d step %d: nothing changed, yet the pass listed %q", seed, step, sent)
				}
				_, n := current()
				moved = live && n != idx // what the watch did not answer yet, the pass may not have seen
			}
		}
	}
}

// A node list older than one a pass read itself is not used: the watch's
// first answer, read before the pass listed the nodes and coming after it,
// would show a node as it was before.
func TestNodeListNeverOlderThanAPassSaw(t *testing.T) {
	sim, co, _, _ := groupsFixture(t, 2, []rules.GroupSpec{{Group: policy.Group{Name: "all", Concurrency: 1}}})
	ctx := t.Context()
	old, meta, err := co.opt.Nodes.List(nil) // the watch's first answer, read now
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetNodeMeta("client-1", map[string]string{"tier": "db"}); err != nil {
		t.Fatal(err)
	}
	h, _ := sim.Host("client-1")
	pass := func() uint64 {
		t.Helper()
		co.takeMail()
		nodes, _, err := co.readNodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return nodes[h.NodeID].ModifyIndex
	}
	seen := pass() // no watch: the pass lists the nodes itself
	co.mail.setNodes(old, meta.LastIndex)
	if got := pass(); got < seen {
		t.Fatalf("the pass after the late answer saw client-1 at %d, the pass before at %d", got, seen)
	}
}
