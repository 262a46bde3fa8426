package nomadsim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	iradix "github.com/hashicorp/go-immutable-radix"
)

// TestRadixWatchPrefixIsIradix holds radixWatchPrefix to go-immutable-radix
// itself, the tree go-memdb keeps Nomad's variables in: for random trees of
// variable keys, a missing key's GetWatch channel (or a prefix's
// SeekPrefixWatch channel) closes at a write exactly when the written key has
// the prefix radixWatchPrefix gives, or the write is a delete that merges away
// the node that prefix names (radixMergedOnDelete).
func TestRadixWatchPrefixIsIradix(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	// Paths like rollboot's, few enough letters that keys share long prefixes.
	path := func() string {
		dirs := []string{"rollboot/hosts/", "rollboot/plan/", "rollboot/history/", "rollboot/policy", "rollboot/control",
			"rollboot/halts", "rollboot/requests/", "rollboot/copies/", "app/", "rollbootx/"}
		d := dirs[rng.IntN(len(dirs))]
		if !strings.HasSuffix(d, "/") {
			return d
		}
		name := "h"
		for range rng.IntN(4) {
			name += string(rune('0' + rng.IntN(3)))
		}
		return d + name
	}
	ns := func() string { return []string{"default", "default", "default", "dev", "d"}[rng.IntN(5)] }
	checked := 0
	for trial := range 3000 {
		tree := iradix.New()
		var keys []string
		for range rng.IntN(12) {
			k := idKey(ns(), path())
			if tree, _, _ = tree.Insert([]byte(k), true); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		prefix := rng.IntN(3) == 0
		var key string
		if prefix {
			p := path()
			key = idPrefix("default", p[:rng.IntN(len(p)+1)])
		} else {
			key = idKey(ns(), path())
			if _, ok := tree.Get([]byte(key)); ok {
				continue // a variable that exists watches its own leaf
			}
		}
		var ch <-chan struct{}
		if prefix {
			ch = tree.Root().Iterator().SeekPrefixWatch([]byte(key))
		} else {
			ch, _, _ = tree.Root().GetWatch([]byte(key))
		}
		want := radixWatchPrefix(len(keys), func(i int) string { return keys[i] }, key, prefix)

		// A write: a new or existing key set, or an existing key deleted.
		written := idKey(ns(), path())
		txn := tree.Txn()
		txn.TrackMutate(true)
		merged, mergedOK := "", false
		if len(keys) > 0 && rng.IntN(3) == 0 {
			i := rng.IntN(len(keys))
			written = keys[i]
			merged, mergedOK = radixMergedOnDelete(len(keys), func(i int) string { return keys[i] }, i)
			txn.Delete([]byte(written))
		} else {
			txn.Insert([]byte(written), false)
		}
		txn.Commit()
		closed := false
		select {
		case <-ch:
			closed = true
		default:
		}
		if closed != (strings.HasPrefix(written, want) || mergedOK && merged == want) {
			t.Fatalf("trial %d: keys %q, search %q (prefix %v): watches %q, write %q (merging %q) closed the channel: %v",
				trial, keys, key, prefix, want, written, merged, closed)
		}
		checked++
	}
	if checked < 2000 {
		t.Fatalf("only %d trials checked", checked)
	}
}

// TestMissingVariableWakesAtWritesNearIt: a blocking query on a variable that
// does not exist sleeps through writes outside the radix node its search ended
// in, and answers (404, with the variables table's index) at a write inside it,
// though the write is of another variable.
func TestMissingVariableWakesAtWritesNearIt(t *testing.T) {
	s := vtSim(t, Config{Servers: 1})
	mgmt := s.ManagementToken()
	put := func(p string) uint64 {
		if r := vtDo(t, s, "PUT", "/v1/var/"+p, mgmt, fmt.Sprintf(`{"Items":{"k":"%d"}}`, s.Index())); r.code != 200 {
			t.Fatalf("put %s: %d %s", p, r.code, r.body)
		}
		return s.Index()
	}
	// The id index holds .../hosts/a1, .../plan/a1, .../plan/b1: a search for
	// .../plan/a2 ends in the node of plan/a1, under the node .../plan/.
	put("rollboot/plan/a1")
	put("rollboot/plan/b1")
	start := put("rollboot/hosts/a1")
	done := make(chan vtResp, 1)
	go func() {
		done <- vtDo(t, s, "GET", fmt.Sprintf("/v1/var/rollboot/plan/a2?index=%d&wait=30s", start), mgmt, "")
	}()
	waitWatch(t, s, func(sleeping int, _ uint64) bool { return sleeping == 1 }, "the query to sleep")

	put("rollboot/hosts/a1")
	out := put("rollboot/plan/b1")
	waitWatch(t, s, func(_ int, checked uint64) bool { return checked >= out }, "the query to re-check after the outside writes")
	select {
	case r := <-done:
		t.Fatalf("the query answered after writes outside the node it watches: %d %v", r.code, r.header)
	default:
	}

	in := put("rollboot/plan/a1")
	select {
	case r := <-done:
		if r.code != 404 || r.header.Get("X-Nomad-Index") != fmt.Sprint(in) {
			t.Fatalf("answer after the write beside it: %d %q, index %s (write %d)", r.code, r.body, r.header.Get("X-Nomad-Index"), in)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the query did not answer after the write of a variable beside it")
	}
}
