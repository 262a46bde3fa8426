package coordinator

import (
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/hostcheck"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

// What a pass derives from what it read, kept for the next pass: the nodes by
// ID, the records it may use, and each host's view (its record, node and
// group). A pass whose inputs did not change since the last one (the node
// watch's list, the host records the host watch kept, the node groups) takes
// them as they are instead of building them again over every host; after a
// change, a host's view is built again only when its record, its node or its
// group changed. At 5,000 hosts building them took about half of a pass over an
// idle cluster. When only records changed (the same hosts, in the same order,
// the same nodes and groups), the records that did are found by their
// ModifyIndex, and only they are checked and get a view built again.
//
// Nothing kept is changed by a pass: the per-pass findings of a host (its node's
// events and system jobs, a failed read) go to copies of its view in that pass's
// snapshot (snapshot.own).
type viewCache struct {
	mu sync.Mutex
	// list, and nodes built from it.
	list  []*api.NodeListStub
	nodes map[string]*api.NodeListStub
	// recsIn and nodesIn: the records and nodes valid and ignored were checked
	// against (ValidateRecords).
	recsIn  []store.HostRecord
	nodesIn map[string]*api.NodeListStub
	valid   []store.HostRecord
	ignored []store.BadRecord
	// views of the hosts of valid, and their sorted names, built from valid,
	// nodes and groupOf with the groups of key.
	views map[string]*hostView
	names []string
	// order: the views of names, by position (a new slice after every
	// change), for the walks over every host (snapshot.hostAt).
	order      []*hostView
	viewsRecs  []store.HostRecord
	viewsNodes map[string]*api.NodeListStub
	viewsGroup map[string]string
	viewsKey   string
	// nodeViews: the view of each node, as built from its list stub.
	nodeViews map[string]*phase.NodeView
}

// forgetViews drops the kept host views, so that the next pass builds every
// view again (the records' corrections changed: members.go).
func (v *viewCache) forgetViews() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.views, v.names, v.order, v.viewsRecs = nil, nil, nil, nil
}

// sameSlice reports whether a and b are the same slice (not equal ones).
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) && (a == nil) == (b == nil)
}

// sameMap reports whether a and b are the same map (not equal ones).
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// nodesByID returns list's nodes by ID: as built for the same list last time.
func (v *viewCache) nodesByID(list []*api.NodeListStub) map[string]*api.NodeListStub {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.nodes != nil && sameSlice(list, v.list) {
		return v.nodes
	}
	nodes := make(map[string]*api.NodeListStub, len(list))
	for _, n := range list {
		nodes[n.ID] = n
	}
	v.list, v.nodes = list, nodes
	return nodes
}

// validate is ValidateRecords, reused while the records and nodes are the same.
func (v *viewCache) validate(recs []store.HostRecord, nodes map[string]*api.NodeListStub) ([]store.HostRecord, []store.BadRecord) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case v.valid != nil && sameSlice(recs, v.recsIn) && sameMap(nodes, v.nodesIn):
	case v.valid != nil && sameSlice(v.valid, v.recsIn) && sameNodeNames(v.nodesIn, nodes) && v.onlyChangedValid(recs, nodes):
		// Every record was valid: so are those that did not change and
		// whose node has the same stub (a record is checked against its
		// node's alone); only the others are checked.
		v.valid, v.ignored, v.recsIn, v.nodesIn = slices.Clip(recs), nil, recs, nodes
	default:
		v.valid, v.ignored = hostcheck.ValidateRecords(recs, nodes)
		v.recsIn, v.nodesIn = recs, nodes
	}
	// Clipped: a caller's append must not write into the kept arrays.
	return slices.Clip(v.valid), slices.Clip(v.ignored)
}

// sameNodeNames reports whether old and nodes hold the same node IDs with the
// same names: a record is valid by its host's name's nodes, so a node that
// appeared, went or was renamed may change the validity of a record that did
// not change.
func sameNodeNames(old, nodes map[string]*api.NodeListStub) bool {
	if len(old) != len(nodes) {
		return false
	}
	for id, n := range nodes {
		if o := old[id]; o == nil || o.Name != n.Name {
			return false
		}
	}
	return true
}

// onlyChangedValid reports whether recs lists the hosts that recsIn did, and
// the records of recs that changed since (by ModifyIndex), or whose node's
// stub in nodes is not the one in nodesIn (sameStub), are valid.
func (v *viewCache) onlyChangedValid(recs []store.HostRecord, nodes map[string]*api.NodeListStub) bool {
	changed, ok := changedRecords(v.recsIn, recs)
	if !ok {
		return false
	}
	check := make([]store.HostRecord, 0, len(changed))
	k := 0
	for i := range recs {
		if k < len(changed) && changed[k] == i {
			k++
		} else if sameStub(v.nodesIn, nodes, recs[i].NodeID) {
			continue
		}
		check = append(check, recs[i])
	}
	_, ignored := hostcheck.ValidateRecords(check, nodes)
	return len(ignored) == 0
}

// changedRecords returns the indexes of the records of recs whose ModifyIndex
// differs from that of the record at the same place in old (every write of a
// variable changes it; a record without one counts as changed), when both
// list the same hosts in the same order (ok false: they do not).
func changedRecords(old, recs []store.HostRecord) (changed []int, ok bool) {
	if old == nil || len(old) != len(recs) {
		return nil, false
	}
	for i := range recs {
		if recs[i].Host != old[i].Host {
			return nil, false
		}
		if recs[i].ModifyIndex == 0 || recs[i].ModifyIndex != old[i].ModifyIndex {
			changed = append(changed, i)
		}
	}
	return changed, true
}

// hostViews returns a view of every host of recs (the records validate
// returned) and their sorted names, reused when nothing they are built from
// changed, else built again for the hosts whose record, node or group changed.
// The map returned is the kept one, not a copy (copying 5,000 entries was a
// pass's largest allocation): the pass copies it before it changes it
// (snapshot.setHost), and its views are shared: see snapshot.own. The views
// are also returned by the position of their names (order): kept too.
func (c *Coordinator) cachedHostViews(recs []store.HostRecord, nodes map[string]*api.NodeListStub, groupOf map[string]string) (views map[string]*hostView, names []string, order []*hostView) {
	v := &c.viewCache
	v.mu.Lock()
	defer v.mu.Unlock()
	key := c.opt.DefaultGroup.Name + "\x00" + groupsKey(c.opt.Groups)
	same := v.views != nil && sameMap(nodes, v.viewsNodes) && sameMap(groupOf, v.viewsGroup) && key == v.viewsKey
	if same && sameSlice(recs, v.viewsRecs) {
		return v.views, v.names, v.order
	}
	if v.views != nil && key == v.viewsKey {
		if changed, ok := changedRecords(v.viewsRecs, recs); ok {
			// The same hosts and groups: only the views of the records that
			// changed are built again, and, when the nodes changed, those of
			// the hosts whose node did (a rollout changes a few nodes per
			// pass, and building every view again took most of such a pass).
			if !same {
				changed = c.staleViews(recs, changed, nodes, groupOf)
			}
			c.rebuildViews(recs, changed, nodes, groupOf)
			return v.views, v.names, v.order
		}
	}
	nodeViews := make(map[string]*phase.NodeView, len(recs))
	views = make(map[string]*hostView, len(recs))
	for i := range recs {
		hv := c.buildView(&recs[i], nodes, groupOf, nodeViews)
		if old := v.views[hv.rec.Host]; old != nil && sameView(old, &hv) {
			views[hv.rec.Host] = old // the same record, node and group: keep the view
			continue
		}
		nv := hv // allocated here only: most views are kept
		views[hv.rec.Host] = &nv
	}
	names = v.names
	if !sameKeys(views, v.views) {
		names = sortedKeys(views)
	}
	order = inOrder(views, names)
	v.views, v.names, v.order, v.nodeViews = views, names, order, nodeViews
	v.viewsRecs, v.viewsNodes, v.viewsGroup, v.viewsKey = recs, nodes, groupOf, key
	return views, names, order
}

// rebuildViews builds again the views of the records of recs at the indexes
// changed (the same hosts as the kept views', in the same order), into a new
// kept map, and only if one differs (sideoutputs.go). Called with v.mu held.
func (c *Coordinator) rebuildViews(recs []store.HostRecord, changed []int, nodes map[string]*api.NodeListStub, groupOf map[string]string) {
	v := &c.viewCache
	views, order := v.views, v.order
	for _, i := range changed {
		hv := c.buildView(&recs[i], nodes, groupOf, v.nodeViews)
		old := views[hv.rec.Host]
		if old != nil && old.node != nil && (hv.node == nil || hv.node.ID != old.node.ID) {
			// The host's node is gone, or the host has another (it registered
			// again under a new ID): its view is not kept for ever, as only a
			// change of the hosts rebuilt the map.
			delete(v.nodeViews, old.node.ID)
		}
		if old == nil || !sameView(old, &hv) {
			if sameMap(views, v.views) {
				views, order = maps.Clone(v.views), slices.Clone(v.order)
			}
			views[hv.rec.Host] = &hv
			at, _ := slices.BinarySearch(v.names, hv.rec.Host) // the same hosts: there
			order[at] = &hv
		}
	}
	v.views, v.order, v.viewsRecs, v.viewsNodes, v.viewsGroup = views, order, recs, nodes, groupOf
}

// staleViews adds to changed (the indexes of the records of recs that changed,
// in order) those of the hosts whose view no longer shows their node or
// group: the node's stub says something else, the node is gone or new, or it
// is in another group. Called with v.mu held, when the nodes or the groups of
// the kept views are not these.
//
// With the same groups, only a host whose node has another stub than the one
// its view was built with is looked at: the node watch's list replaces the
// stubs of the nodes that changed and keeps the others (applyNodeChanges), and
// no stub is ever changed in place, so the very same stub still says what the
// view shows. A rollout changes a few nodes per pass; looking at every host's
// node after each of them was a tenth of a pass at 1,000 hosts.
func (c *Coordinator) staleViews(recs []store.HostRecord, changed []int, nodes map[string]*api.NodeListStub, groupOf map[string]string) []int {
	v := &c.viewCache
	sameGroups := sameMap(groupOf, v.viewsGroup)
	out := make([]int, 0, len(changed))
	k := 0
	for i := range recs {
		if k < len(changed) && changed[k] == i {
			out = append(out, i)
			k++
			continue
		}
		old := v.views[recs[i].Host]
		if sameGroups && old != nil && sameStub(v.viewsNodes, nodes, recs[i].NodeID) {
			continue
		}
		if !c.viewCurrent(old, &recs[i], nodes, groupOf) {
			out = append(out, i)
		}
	}
	return out
}

// sameStub reports whether old and nodes hold the very same stub for the node
// id (or neither holds one, or id is empty).
func sameStub(old, nodes map[string]*api.NodeListStub, id string) bool {
	return id == "" || old[id] == nodes[id]
}

// viewCurrent reports whether old, the kept view of the host of r (whose
// record did not change), shows its node as nodes list it and its group as
// groupOf says.
func (c *Coordinator) viewCurrent(old *hostView, r *store.HostRecord, nodes map[string]*api.NodeListStub, groupOf map[string]string) bool {
	var n *api.NodeListStub
	if r.NodeID != "" {
		n = nodes[r.NodeID]
	}
	if old == nil || (n == nil) != (old.node == nil) {
		return false
	}
	if n != nil {
		nv := nodeViewOf(n)
		if !sameNodeView(&nv, old.node) {
			return false
		}
	}
	return old.group == c.groupOfHost(r, groupOf)
}

// inOrder returns the views of names, by position.
func inOrder(views map[string]*hostView, names []string) []*hostView {
	order := make([]*hostView, len(names))
	for i, name := range names {
		order[i] = views[name]
	}
	return order
}

// buildView builds the view of the host of r: its node (the view kept for it
// when its stub says the same, noted in nodeViews) and group. Called with
// v.mu held.
func (c *Coordinator) buildView(r *store.HostRecord, nodes map[string]*api.NodeListStub, groupOf map[string]string, nodeViews map[string]*phase.NodeView) hostView {
	hv := hostView{rec: r, group: c.groupOfHost(r, groupOf)}
	if r.NodeID != "" {
		if n := nodes[r.NodeID]; n != nil {
			hv.node = c.viewCache.nodeView(n)
			nodeViews[n.ID] = hv.node
		}
	}
	return hv
}

// groupOfHost is the group of the host of r: its node's (groupOf), else the
// default group; a host without a node says its group (FleetLock).
func (c *Coordinator) groupOfHost(r *store.HostRecord, groupOf map[string]string) string {
	if r.NodeID != "" {
		if g, ok := groupOf[r.NodeID]; ok {
			return g
		}
	} else if r.Group != "" && c.knownGroup(r.Group) {
		return r.Group
	}
	return c.opt.DefaultGroup.Name
}

// kept returns the kept views (nil: none yet); a new map after every change.
func (v *viewCache) kept() map[string]*hostView {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.views
}

// nodeView returns the view of n: the one kept when its stub says the same.
func (v *viewCache) nodeView(n *api.NodeListStub) *phase.NodeView {
	nv := nodeViewOf(n)
	if old := v.nodeViews[n.ID]; old != nil && sameNodeView(&nv, old) {
		return old
	}
	p := nv // allocated here only: most nodes are unchanged
	return &p
}

// sameNodeView reports whether a and b say the same of their node's list stub
// (the fields nodeView sets).
func sameNodeView(a, b *phase.NodeView) bool {
	return a.ID == b.ID && a.Status == b.Status && a.Eligible == b.Eligible && a.Draining == b.Draining &&
		a.DrainStatus == b.DrainStatus && a.DrainGrant == b.DrainGrant && a.ModifyIndex == b.ModifyIndex &&
		a.SystemRunning == nil && b.SystemRunning == nil && a.ReregisteredIndex == b.ReregisteredIndex &&
		a.MissedHeartbeatIndex == b.MissedHeartbeatIndex && a.ClientStartedAt.Equal(b.ClientStartedAt) &&
		a.EligibilityIndex == b.EligibilityIndex && a.DrainDoneIndex == b.DrainDoneIndex
}

// sameView reports whether a and b are built from the same record (by its
// ModifyIndex: every write of a variable changes it), node view and group.
func sameView(a, b *hostView) bool {
	return a.rec != nil && b.rec != nil && a.rec.ModifyIndex != 0 && a.rec.ModifyIndex == b.rec.ModifyIndex &&
		a.rec.Host == b.rec.Host && a.node == b.node && a.group == b.group && a.err == nil && a.jobs == nil
}

// sameKeys reports whether a and b have the same keys.
func sameKeys[T any](a, b map[string]T) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// own returns the host's view to change in this pass: a copy of the kept one
// (with a copy of its node view), made once per pass.
func (s *snapshot) own(name string) *hostView {
	hv := s.hosts[name]
	if s.owned[name] {
		return hv
	}
	cp := *hv
	if hv.node != nil {
		n := *hv.node
		cp.node = &n
	}
	if s.owned == nil {
		s.owned = map[string]bool{}
	}
	s.owned[name] = true
	s.setHost(name, &cp)
	return &cp
}

// setHost makes hv the host's view in this pass. The first change copies the
// hosts map when it is the one kept for the next pass (hostsShared), and the
// views by position (viewsShared) likewise; a host not in names leaves the
// pass without views by position until they are listed again (hostViews).
func (s *snapshot) setHost(name string, hv *hostView) {
	if s.hostsShared {
		s.hosts, s.hostsShared = maps.Clone(s.hosts), false
	}
	s.hosts[name] = hv
	if s.views == nil {
		return
	}
	at, ok := slices.BinarySearch(s.names, name)
	if !ok || len(s.views) != len(s.names) {
		s.views = nil
		return
	}
	if s.viewsShared {
		s.views, s.viewsShared = slices.Clone(s.views), false
	}
	s.views[at] = hv
}

// hostAt returns the view of the host s.names[i]: by position when the pass
// has its views so (a walk over 5,000 hosts then looks none up), else from
// the hosts map.
func (s *snapshot) hostAt(i int) *hostView {
	if s.views != nil {
		return s.views[i]
	}
	return s.hosts[s.names[i]]
}
