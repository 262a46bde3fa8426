package nomadsim

import (
	"slices"
	"sort"
	"strings"
)

// What a blocking query on something that is not there sleeps on.
//
// Nomad's variables table is a go-memdb table whose "id" index is a radix tree
// (go-immutable-radix) keyed by namespace and path, each ended by a zero byte
// (nomad/state/schema.go variablesTableSchema: a CompoundIndex of two
// StringFieldIndex; a prefix query ends the path without it). A read of one
// variable watches the channel go-immutable-radix Node.GetWatch returns, a list
// of a prefix the channel of Iterator.SeekPrefixWatch
// (nomad/state/state_store_variables.go GetVariable, a FirstWatch;
// GetVariablesByNamespaceAndPrefix). For a variable that exists that is its
// leaf's channel, which only a write of that variable closes (watchVar). For a
// variable that does not exist, and for a prefix no variable is under, it is the
// channel of the deepest node the search walked into: the search follows the
// edge of the key's next byte and takes that node's channel before it checks
// that the node's whole label matches. A write closes the channel of every node
// its insertion or deletion copies on its way (iradix Txn.writeNode), including
// a node whose label it splits. So the channel closes at the write of any key
// that enters that node's edge: any key sharing the key's bytes up to the
// depth of the node's parent, plus one.
//
// Both answers carry the variables table's index while the variable is missing
// (nomad/variables_endpoint.go Read and List, setReplyQueryMeta), which every
// write moves: such a query does not sleep again after the wake, it answers.
// So a query on a missing variable answers at every write near its path, not
// only at its creation.
//
// A delete closes one channel more: a node left with a single edge by the
// delete is merged with the child under it, whose channel closes though no key
// under it changed (iradix Txn.delete, mergeChild).

// idKey is the variable's key in the id index: namespace and path, each ended
// by a zero byte.
func idKey(ns, path string) string { return ns + "\x00" + path + "\x00" }

// idPrefix is a prefix query's key in the id index: the path's prefix is not
// ended (memdb CompoundIndex PrefixFromArgs).
func idPrefix(ns, prefix string) string { return ns + "\x00" + prefix }

// radixWatchPrefix returns the prefix of the id-index keys whose writes close
// the channel a search for key watches in the tree holding the n keys keyAt
// gives (sorted, as the id index orders them), when key reaches no leaf: a missing variable's
// key (prefix false) or a prefix query's (prefix true). "" is the root: every
// write. When prefix is set and some key is under it, the watched node is the
// one under which those keys are.
func radixWatchPrefix(n int, keyAt func(int) string, key string, prefix bool) string {
	from := func(p string) int { return sort.Search(n, func(j int) bool { return keyAt(j) >= p }) }
	i := from(key)
	depth := 0 // how deep the search goes: the longest prefix of key some key shares
	if prefix && i < n && strings.HasPrefix(keyAt(i), key) {
		depth = len(key)
	} else {
		if i > 0 {
			depth = commonPrefix(keyAt(i-1), key)
		}
		if i < n {
			depth = max(depth, commonPrefix(keyAt(i), key))
		}
	}
	if depth == 0 {
		return "" // no edge for its first byte: the root's channel
	}
	// The keys under key[:depth] are together in the order; the node the search
	// ends in holds them all, and its parent is where they part from the keys
	// around them (the root when none is around them).
	p := key[:depth]
	lo := from(p)
	hi := lo + sort.Search(n-lo, func(j int) bool { return !strings.HasPrefix(keyAt(lo+j), p) })
	parent := 0
	if lo > 0 {
		parent = commonPrefix(keyAt(lo-1), keyAt(lo))
	}
	if hi < n {
		parent = max(parent, commonPrefix(keyAt(hi-1), keyAt(hi)))
	}
	return key[:parent+1]
}

// radixMergedOnDelete returns the prefix that names the node whose channel a
// delete of the i-th of the n keys keyAt gives closes beside those on the
// key's own path (radixWatchPrefix's naming: the node's parent's key, plus
// the first byte of its edge), and whether there is one: the delete leaves the
// key's parent node, when it is not the root, with one edge, and the node at
// the end of that edge is merged into it.
func radixMergedOnDelete(n int, keyAt func(int) string, i int) (string, bool) {
	key := keyAt(i)
	parent := 0 // the depth of the node the key's leaf hangs from
	if i > 0 {
		parent = commonPrefix(keyAt(i-1), key)
	}
	if i+1 < n {
		parent = max(parent, commonPrefix(keyAt(i+1), key))
	}
	if parent == 0 {
		return "", false // the root is never merged
	}
	p := key[:parent]
	lo := sort.Search(n, func(j int) bool { return keyAt(j) >= p })
	var left []byte // the first bytes of the parent's edges the delete leaves
	for j := lo; j < n && strings.HasPrefix(keyAt(j), p); j++ {
		if k := keyAt(j); j != i && len(k) > parent && !slices.Contains(left, k[parent]) {
			left = append(left, k[parent])
		}
	}
	if len(left) != 1 {
		return "", false
	}
	return p + string(left[0]), true
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// radixWatch is radixWatchPrefix over the variables stored.
func (v *varState) radixWatch(key string, prefix bool) string {
	return radixWatchPrefix(len(v.sorted), func(i int) string { return idKey(v.sorted[i].ns, v.sorted[i].path) }, key, prefix)
}

// mergedByDelete is radixMergedOnDelete for the delete of k, still stored.
func (v *varState) mergedByDelete(k varKey) (string, bool) {
	i, found := slices.BinarySearchFunc(v.sorted, k, varCompare)
	if !found {
		return "", false
	}
	return radixMergedOnDelete(len(v.sorted), func(j int) string { return idKey(v.sorted[j].ns, v.sorted[j].path) }, i)
}
