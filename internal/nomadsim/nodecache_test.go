package nomadsim

import (
	"slices"
	"strconv"
	"testing"

	"github.com/hashicorp/go-bexpr"
	"github.com/hashicorp/nomad/api"
)

// A group's filter narrowed to some node IDs, as the coordinator asks it,
// and an agent's filter by its node's name answer what bexpr answers on the
// whole expression, before and after the nodes change.
func TestNodeFilterByIDs(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 4})
	if err := s.SetNodeMeta("client-1", map[string]string{"tier": "db"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetNodeMeta("client-2", map[string]string{"tier": "db"}); err != nil {
		t.Fatal(err)
	}
	id := func(h string) string { hh, _ := s.Host(h); return strconv.Quote(hh.NodeID) }
	filters := []string{
		`(Meta.tier == "db") and (ID == ` + id("client-1") + `)`,
		`(Meta.tier == "db") and (ID == ` + id("client-1") + ` or ID == ` + id("client-3") + `)`,
		`(Meta.tier != "db") and (ID == ` + id("client-2") + ` or ID == ` + id("client-3") + ` or ID == ` + id("client-4") + `)`,
		`(NodePool == "default") and (ID == "no-such-node")`,
		`(Meta.tier == "db") or (Meta.tier == "web") and (ID == ` + id("client-2") + `)`,
		`Name == "client-2"`,
		`Name == "client"`,
		`Name == "client-2" or Name == "client-3"`,
	}
	check := func(when string) {
		t.Helper()
		for _, f := range filters {
			got, _, err := c.Nodes().List(&api.QueryOptions{Filter: f})
			if err != nil {
				t.Fatalf("%s: %s: %v", when, f, err)
			}
			e, err := bexpr.CreateEvaluator(f)
			if err != nil {
				t.Fatal(err)
			}
			var want, ids []string
			s.mu.Lock()
			for _, nid := range s.cluster.cache.idsLocked(s.cluster.nodes) {
				if ok, err := e.Evaluate(s.cluster.nodes[nid].node); err == nil && ok {
					want = append(want, nid)
				}
			}
			s.mu.Unlock()
			for _, n := range got {
				ids = append(ids, n.ID)
			}
			slices.Sort(ids) // nomad/api sorts the list by CreateIndex
			if !slices.Equal(ids, want) {
				t.Errorf("%s: %s: got %v, want %v", when, f, ids, want)
			}
		}
	}
	check("at first")
	if err := s.SetNodeMeta("client-1", map[string]string{"tier": "web"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetNodeMeta("client-3", map[string]string{"tier": "db"}); err != nil {
		t.Fatal(err)
	}
	check("after meta changes")
}
