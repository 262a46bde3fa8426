package coordinator

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
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
func groupsFixture(t *testing.T, clients int, specs []GroupSpec) (*nomadsim.Sim, *Coordinator, *nodeLists, func() map[string]string) {
	t.Helper()
	lists := &nodeLists{base: http.DefaultTransport}
	sim, client := simtest.Start(t, nomadsim.Config{Clients: clients, HeartbeatTTL: time.Hour}, lists)
	co := New(Options{Nodes: client.Nodes(), Store: store.New(client.Variables(), "rollboot", ""), Resync: time.Hour,
		Groups: specs,
		Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute}})
	groups := func() map[string]string {
		t.Helper()
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
	sim, co, lists, groups := groupsFixture(t, 4, []GroupSpec{
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
	sim, co, lists, groups := groupsFixture(t, 3, []GroupSpec{
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
