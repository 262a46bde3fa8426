package coordinator

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/hostcheck"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// freshHostViews is the views of recs built from nothing, as every pass built
// them before they were kept (the reference for the kept ones).
func freshHostViews(c *Coordinator, recs []store.HostRecord, nodes map[string]*api.NodeListStub, groupOf map[string]string) map[string]*hostView {
	out := map[string]*hostView{}
	for i := range recs {
		r := &recs[i]
		hv := &hostView{rec: r, group: c.opt.DefaultGroup.Name}
		if r.NodeID != "" {
			if n := nodes[r.NodeID]; n != nil {
				hv.node = nodeView(n)
			}
			if g, ok := groupOf[r.NodeID]; ok {
				hv.group = g
			}
		} else if r.Group != "" && c.knownGroup(r.Group) {
			hv.group = r.Group
		}
		out[r.Host] = hv
	}
	return out
}

// viewWorld is a cluster that changes at random between passes: records
// written (each write a new ModifyIndex), hosts and nodes coming and going,
// nodes changing status, eligibility and drain, groups moving. Every change
// is read as a pass reads it: a new list, or the very same one when nothing
// changed.
type viewWorld struct {
	rng     *rand.Rand
	index   uint64
	recs    []store.HostRecord
	list    []*api.NodeListStub
	groupOf map[string]string
}

func (w *viewWorld) next() uint64 { w.index++; return w.index }

// changeNode changes one thing of n at random: its status, its eligibility,
// its drain, or (rename) its name, which makes its host's record invalid, or
// valid again; else it forgets its last drain.
func (w *viewWorld) changeNode(n *api.NodeListStub, rename bool) {
	switch w.rng.IntN(4) {
	case 0:
		n.Status = []string{"ready", "down", "initializing"}[w.rng.IntN(3)]
	case 1:
		n.SchedulingEligibility = []string{"eligible", "ineligible"}[w.rng.IntN(2)]
	case 2:
		n.Drain = !n.Drain
		status := []api.DrainStatus{api.DrainStatusDraining, api.DrainStatusComplete}[w.rng.IntN(2)]
		n.LastDrain = &api.DrainMetadata{Status: status, Meta: map[string]string{metaGrant: fmt.Sprintf("g%d", w.rng.IntN(3))}}
	case 3:
		if rename {
			n.Name = fmt.Sprintf("h%d", w.rng.IntN(12))
		} else {
			n.LastDrain = nil
		}
	}
}

func (w *viewWorld) step() {
	switch w.rng.IntN(11) {
	case 0: // a pass with nothing new: the same lists
	case 1, 2: // a record written
		recs := slices.Clone(w.recs)
		if len(recs) > 0 {
			r := &recs[w.rng.IntN(len(recs))]
			r.RebootRequired = !r.RebootRequired
			r.BootID = fmt.Sprintf("b%d", w.rng.IntN(3))
			if w.rng.IntN(4) == 0 {
				r.NodeID = fmt.Sprintf("n%d", w.rng.IntN(12)) // may name no node, or another host's
			}
			r.ModifyIndex = w.next()
		}
		w.recs = recs
	case 3: // a host comes or goes
		recs := slices.Clone(w.recs)
		if len(recs) > 0 && w.rng.IntN(2) == 0 {
			i := w.rng.IntN(len(recs))
			recs = slices.Delete(recs, i, i+1)
		} else {
			i := w.rng.IntN(12)
			name := fmt.Sprintf("h%d", i)
			if !slices.ContainsFunc(recs, func(r store.HostRecord) bool { return r.Host == name }) {
				r := store.HostRecord{Host: name, NodeID: fmt.Sprintf("n%d", i), ModifyIndex: w.next()}
				if w.rng.IntN(4) == 0 {
					r.NodeID, r.Group = "", []string{"a", "b", "nope"}[w.rng.IntN(3)] // FleetLock: says its group
				}
				recs = append(recs, r)
				slices.SortFunc(recs, func(a, b store.HostRecord) int { return cmpString(a.Host, b.Host) })
			}
		}
		w.recs = recs
	case 4, 5: // a node changes: a new list read
		list := make([]*api.NodeListStub, 0, len(w.list))
		for _, n := range w.list {
			cp := *n
			list = append(list, &cp)
		}
		if len(list) > 0 {
			n := list[w.rng.IntN(len(list))]
			w.changeNode(n, false)
			if w.rng.IntN(5) > 0 { // every change bumps it; some tests' fakes do not
				n.ModifyIndex = w.next()
			}
		}
		w.list = list
	case 9, 10: // a node changes as the node watch applies it: its stub
		// replaced, every other node's the very same (applyNodeChanges)
		if len(w.list) == 0 {
			return
		}
		cp := *w.list[w.rng.IntN(len(w.list))]
		w.changeNode(&cp, true)
		cp.ModifyIndex = w.next()
		w.list = applyNodeChanges(w.list, []*api.NodeListStub{&cp}, nil)
	case 6: // a node comes or goes
		list := slices.Clone(w.list)
		if len(list) > 0 && w.rng.IntN(2) == 0 {
			i := w.rng.IntN(len(list))
			list = slices.Delete(list, i, i+1)
		} else {
			i := w.rng.IntN(12)
			id := fmt.Sprintf("n%d", i)
			if !slices.ContainsFunc(list, func(n *api.NodeListStub) bool { return n.ID == id }) {
				list = append(list, &api.NodeListStub{ID: id, Name: fmt.Sprintf("h%d", i), Status: "ready",
					SchedulingEligibility: "eligible", ModifyIndex: w.next()})
			}
		}
		w.list = list
	case 7: // a node moves to another group: a new map
		g := make(map[string]string, len(w.groupOf))
		for k, v := range w.groupOf {
			g[k] = v
		}
		id := fmt.Sprintf("n%d", w.rng.IntN(12))
		if w.rng.IntN(3) == 0 {
			delete(g, id)
		} else {
			g[id] = []string{"a", "b"}[w.rng.IntN(2)]
		}
		w.groupOf = g
	case 8: // a host registers again under a new node ID; its old node is gone
		if len(w.recs) == 0 {
			return
		}
		recs := slices.Clone(w.recs)
		r := &recs[w.rng.IntN(len(recs))]
		if r.NodeID == "" {
			return
		}
		list := slices.DeleteFunc(slices.Clone(w.list), func(n *api.NodeListStub) bool { return n.ID == r.NodeID })
		r.NodeID, r.ModifyIndex = fmt.Sprintf("r%d", w.next()), w.next()
		w.list = append(list, &api.NodeListStub{ID: r.NodeID, Name: r.Host, Status: "ready",
			SchedulingEligibility: "eligible", ModifyIndex: w.next()})
		w.recs = recs
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// The views a pass takes from the cache are, after any sequence of changes,
// the views built from nothing (the same records, nodes and groups), with their
// names sorted; the node views kept are only those the views show; and what a
// pass changes in its own copies never reaches the next pass.
func TestKeptViewsEqualFreshOnes(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 13))
		c := New(Options{Groups: []GroupSpec{{Group: policy.Group{Name: "a"}}, {Group: policy.Group{Name: "b"}}}})
		w := &viewWorld{rng: rng, groupOf: map[string]string{}}
		for i := range 8 {
			w.recs = append(w.recs, store.HostRecord{Host: fmt.Sprintf("h%d", i), NodeID: fmt.Sprintf("n%d", i), ModifyIndex: w.next()})
			w.list = append(w.list, &api.NodeListStub{ID: fmt.Sprintf("n%d", i), Name: fmt.Sprintf("h%d", i), Status: "ready",
				SchedulingEligibility: "eligible", ModifyIndex: w.next()})
		}
		slices.SortFunc(w.recs, func(a, b store.HostRecord) int { return cmpString(a.Host, b.Host) })
		for pass := range 60 {
			w.step()
			nodes := c.viewCache.nodesByID(w.list)
			wantNodes := map[string]*api.NodeListStub{}
			for _, n := range w.list {
				wantNodes[n.ID] = n
			}
			if !reflect.DeepEqual(nodes, wantNodes) {
				t.Fatalf("seed %d pass %d: nodes differ", seed, pass)
			}
			valid, ignored := c.viewCache.validate(w.recs, nodes)
			wantValid, wantIgnored := hostcheck.ValidateRecords(w.recs, nodes)
			if !reflect.DeepEqual(valid, wantValid) || !reflect.DeepEqual(ignored, wantIgnored) {
				t.Fatalf("seed %d pass %d: checked records differ:\n%+v %+v\nwant %+v %+v", seed, pass, valid, ignored, wantValid, wantIgnored)
			}
			hosts, names, order := c.cachedHostViews(valid, nodes, w.groupOf)
			want := freshHostViews(c, wantValid, wantNodes, w.groupOf)
			if !reflect.DeepEqual(hosts, want) {
				t.Fatalf("seed %d pass %d: views differ:\n%s\nwant\n%s", seed, pass, dumpViews(hosts), dumpViews(want))
			}
			if !slices.Equal(names, sortedKeys(want)) {
				t.Fatalf("seed %d pass %d: names %v, want %v", seed, pass, names, sortedKeys(want))
			}
			for i, name := range names {
				if order[i] != hosts[name] {
					t.Fatalf("seed %d pass %d: view %d by position is not %s's", seed, pass, i, name)
				}
			}
			// The node views kept are only those of the hosts' nodes: a node
			// gone, or no longer named by its host, is forgotten.
			shown := map[string]bool{}
			for _, hv := range hosts {
				if hv.node != nil {
					shown[hv.node.ID] = true
				}
			}
			for id := range c.viewCache.nodeViews {
				if !shown[id] {
					t.Fatalf("seed %d pass %d: the view of node %s is kept, though no host's view shows it", seed, pass, id)
				}
			}
			// The pass records what it found in its own copies, and adds the
			// hosts with a plan and no record, to a copy of the kept map;
			// its views by position follow.
			s := &snapshot{hosts: hosts, hostsShared: true, names: names, views: order, viewsShared: true}
			if rng.IntN(3) == 0 {
				s.setHost("planned", &hostView{group: "a"})
				s.names = sortedKeys(s.hosts)
			}
			for _, name := range names {
				if rng.IntN(3) == 0 {
					hv := s.own(name)
					hv.err, hv.jobs = fmt.Errorf("read failed"), []string{"default/x"}
					if hv.node != nil {
						hv.node.ReregisteredIndex, hv.node.SystemRunning = 99, map[string]bool{"default/x": true}
					}
				}
			}
			for i, name := range s.names {
				if s.hostAt(i) != s.hosts[name] {
					t.Fatalf("seed %d pass %d: the pass's view %d by position is not %s's", seed, pass, i, name)
				}
			}
		}
	}
}

func dumpViews(m map[string]*hostView) string {
	out := ""
	for _, name := range sortedKeys(m) {
		hv := m[name]
		out += fmt.Sprintf("%s: rec %+v node %+v group %s err %v jobs %v\n", name, hv.rec, hv.node, hv.group, hv.err, hv.jobs)
	}
	return out
}
