package coordinator

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/nomad/api"
)

// The capacity gate's layout, kept from pass to pass, is after any sequence of
// node lists the layout sorted from nothing: nodes that change how they sort
// (drain, eligibility, status, pool), change nothing that matters (their
// metadata: a new ModifyIndex), come and go, and nodes on their way out for
// rollboot.
func TestKeptLayoutEqualsFreshOne(t *testing.T) {
	statuses := []string{api.NodeStatusReady, api.NodeStatusDown, api.NodeStatusInit}
	eligibility := []string{api.NodeSchedulingEligible, api.NodeSchedulingIneligible}
	pools := []string{"default", "a", "b"}
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var cc capacityCache
		nodes := map[string]*api.NodeListStub{}
		for i := range 8 {
			id := fmt.Sprintf("n%d", i)
			nodes[id] = &api.NodeListStub{ID: id, Status: api.NodeStatusReady, SchedulingEligibility: api.NodeSchedulingEligible,
				NodePool: "default", ModifyIndex: 1}
		}
		var leaving []string
		for step := range 60 {
			next := maps.Clone(nodes) // a new list: a new map, as the node watch's
			id := fmt.Sprintf("n%d", rng.IntN(10))
			switch k := rng.IntN(8); {
			case k == 0 && next[id] != nil:
				delete(next, id)
			case next[id] == nil:
				next[id] = &api.NodeListStub{ID: id, Status: api.NodeStatusReady, SchedulingEligibility: api.NodeSchedulingEligible,
					NodePool: pools[rng.IntN(len(pools))]}
			default:
				n := *next[id]
				switch k % 5 {
				case 0:
					n.Drain = !n.Drain
				case 1:
					n.Status = statuses[rng.IntN(len(statuses))]
				case 2:
					n.SchedulingEligibility = eligibility[rng.IntN(len(eligibility))]
				case 3:
					n.NodePool = pools[rng.IntN(len(pools))]
				}
				n.ModifyIndex++ // case 4: the metadata alone
				next[id] = &n
			}
			if rng.IntN(4) == 0 {
				leaving = nil
				for i := range 10 {
					if rng.IntN(4) == 0 {
						leaving = append(leaving, fmt.Sprintf("n%d", i))
					}
				}
				slices.Sort(leaving)
			}
			nodes = next
			if rng.IntN(3) == 0 {
				continue // a list no pass laid out
			}
			got, want := cc.layoutFor(nodes, leaving), sortNodes(nodes, leaving)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d step %d: layout %+v, want %+v", seed, step, got, want)
			}
		}
	}
}
