package nomadsim

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/go-bexpr"
)

// The node list's caches. In Nomad every change to a node is a Raft apply that
// gives it a new ModifyIndex (nomad/state/state_store.go upsertNodeTxn,
// updateNodeStatusTxn, updateNodeDrainImpl, updateNodeEligibilityImpl), and the
// emulator does the same (touchNodeLocked). So what is computed from a node is
// computed again only when its ModifyIndex moved: whether it matches a filter,
// and its list stub's wire form. Nomad evaluates the filter over every node of
// each page (nomad/state/paginator/paginator.go); the answer is the same, the
// emulator only spares its own CPU, so that at thousands of nodes it is not the
// benchmark's bottleneck.

// maxCachedFilters bounds the filters kept compiled; past it the cache starts over.
const maxCachedFilters = 256

type nodeFilter struct {
	// name: the filter is `Name == "<name>"` (byName); nil otherwise.
	name    *string
	eval    *bexpr.Evaluator
	results map[string]filterResult // by node ID
	// of and ids: the filter is `(F) and (ID == "a" or ID == "b" ...)`, F's
	// filter and the IDs (byIDs).
	of  *nodeFilter
	ids map[string]bool
}

// The filter a coordinator sends to ask a group's filter F of the nodes that
// changed: (F) and (ID == "a" or ...). Each is asked once, with other IDs each
// time, so compiled and kept as a whole it would be evaluated over every node
// each time and push the groups' own filters out of the cache. It is evaluated
// as bexpr does, left to right: F (kept, so evaluated again only for the nodes
// that changed), then the IDs.
var byIDs = regexp.MustCompile(`^ID == "[^"\\]*"( or ID == "[^"\\]*")*$`)

// An agent asks for its own node by name as it starts (`Name == "<host>"`):
// when thousands start together (a bench's cluster) that is thousands of
// filters, each evaluated over every node and each used once. Such a filter
// is answered by comparing the name, which is what bexpr's == on a string
// field does (go-bexpr evaluate.go, doMatchEqual), without its reflection.
var byName = regexp.MustCompile(`^Name == "([^"\\]*)"$`)

// splitByIDs returns F and the IDs of a filter (F) and (ID == ...), if f is one.
func splitByIDs(f string) (string, map[string]bool, bool) {
	i := strings.LastIndex(f, ") and (")
	if i < 0 || !strings.HasPrefix(f, "(") || !strings.HasSuffix(f, ")") {
		return "", nil, false
	}
	left, right := f[1:i], f[i+len(") and ("):len(f)-1]
	if !byIDs.MatchString(right) {
		return "", nil, false
	}
	ids := map[string]bool{}
	for _, part := range strings.Split(right, " or ") {
		ids[strings.Trim(strings.TrimPrefix(part, "ID == "), `"`)] = true
	}
	return left, ids, true
}

type filterResult struct {
	index uint64 // the node's ModifyIndex when evaluated
	ok    bool
}

type stubKey struct {
	id              string
	withOS, withRes bool
}

type stubEntry struct {
	index uint64
	raw   json.RawMessage
}

type nodeCache struct {
	filters map[string]*nodeFilter
	stubs   map[stubKey]stubEntry
	ids     []string // node IDs in order; nil after a node registered
}

// filterLocked returns the compiled filter f (bexpr.CreateEvaluator's error as is).
func (c *nodeCache) filterLocked(f string) (*nodeFilter, error) {
	if m := byName.FindStringSubmatch(f); m != nil {
		return &nodeFilter{name: &m[1]}, nil
	}
	if nf, ok := c.filters[f]; ok {
		return nf, nil
	}
	if left, ids, ok := splitByIDs(f); ok {
		// F on its own must be a filter: (F) then groups as written.
		if of, err := c.filterLocked(left); err == nil {
			return &nodeFilter{of: of, ids: ids}, nil
		}
	}
	e, err := bexpr.CreateEvaluator(f)
	if err != nil {
		return nil, err
	}
	if c.filters == nil || len(c.filters) >= maxCachedFilters {
		c.filters = map[string]*nodeFilter{}
	}
	nf := &nodeFilter{eval: e, results: map[string]filterResult{}}
	c.filters[f] = nf
	return nf, nil
}

// matchLocked reports whether sn matches the filter, evaluating it only when the
// node changed since it was last evaluated.
func (nf *nodeFilter) matchLocked(sn *simNode) (bool, error) {
	n := sn.node
	if nf.name != nil {
		return n.Name == *nf.name, nil
	}
	if nf.of != nil {
		ok, err := nf.of.matchLocked(sn)
		if err != nil || !ok {
			return false, err
		}
		return nf.ids[n.ID], nil
	}
	if r, ok := nf.results[n.ID]; ok && r.index == n.ModifyIndex {
		return r.ok, nil
	}
	ok, err := nf.eval.Evaluate(n)
	if err != nil {
		return false, err
	}
	nf.results[n.ID] = filterResult{index: n.ModifyIndex, ok: ok}
	return ok, nil
}

// stubLocked is the wire form of the node's list stub (nodeStub).
func (c *nodeCache) stubLocked(sn *simNode, withOS, withRes bool) json.RawMessage {
	k := stubKey{sn.node.ID, withOS, withRes}
	if e, ok := c.stubs[k]; ok && e.index == sn.node.ModifyIndex {
		return e.raw
	}
	raw, err := json.Marshal(nodeStub(sn.node, withOS, withRes))
	if err != nil {
		panic(err)
	}
	if c.stubs == nil {
		c.stubs = map[stubKey]stubEntry{}
	}
	c.stubs[k] = stubEntry{index: sn.node.ModifyIndex, raw: raw}
	return raw
}

// idsLocked are the node IDs in order.
func (c *nodeCache) idsLocked(nodes map[string]*simNode) []string {
	if c.ids == nil || len(c.ids) != len(nodes) {
		c.ids = slices.Sorted(maps.Keys(nodes))
	}
	return c.ids
}
