package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/watch"
)

// Watching what is not there.
//
// Nomad cannot wake a blocking query precisely for a variable that does not
// exist, nor for a prefix no variable is under. The query watches the deepest
// node of the variables' radix tree its search reached
// (nomad/state/state_store_variables.go GetVariable, a FirstWatch;
// GetVariablesByNamespaceAndPrefix; go-immutable-radix Node.GetWatch,
// Iterator.SeekPrefixWatch), which the writes of other variables near its path
// close too; and its answer carries the variables table's index
// (nomad/variables_endpoint.go Read and List, setReplyQueryMeta), which each of
// those writes moved, so it answers at each of them. The policy variable shares
// its node with the plans (rollboot/p...), the halt state with the host records
// and the history (rollboot/h...), and the requests' empty folder with every
// variable of the namespace: unguarded, those watches answered at nearly every
// write of a rollout, about as many requests as the rollout's own.
//
// Two watches make what they watch exist instead: the coordinator's passes
// trust them to see a pause, a request or a cancel as it is written, and a wait
// would hide one for its length. WatchControl creates the control variable,
// unpaused, when it finds none; WatchRequests keeps a marker under the
// requests' folder (requestsMarker), which is empty between manual requests.
// Each is created once in a cluster's life.
//
// The other watches of what may be absent (WatchHalts, WatchPolicy,
// WatchLeader) report no change while it stays absent, whatever
// index Nomad answered with, and after such an answer waits before it asks
// again: absentMinWait, doubling at each answer in a row that found it still
// absent, up to absentMaxWait; a query that ran its whole wait without a wake
// starts the waits over. A query asked after the wait still answers at
// once when the thing appeared meanwhile (its index is past the one asked
// with), and one blocked when it appears answers then. The cost is bounded: at
// most one request per absentMaxWait for each absent thing while writes land
// near it, and a blocking query's usual one per wait when none do. What it
// delays is only the sight of a first write made while such a wait runs, by
// absentMaxWait at most: the first stored policy ever (the configuration's rules
// hold meanwhile), a first halt (which the coordinator writes itself, and
// keeps), a first leader.

// Bounds of the wait between two blocking queries of something absent that
// Nomad woke for a write near it.
const (
	absentMinWait = time.Second
	absentMaxWait = 30 * time.Second
)

// absence is what the store's watches know of the variables they found
// absent, by path.
type absence struct {
	mu sync.Mutex
	by map[string]absentAt
}

// absentAt is one absent thing: the index reported to the watch's caller
// (unchanged while it stays absent), the index Nomad last answered with, and
// how many answers in a row found it absent after a wake.
type absentAt struct {
	reported, nomad uint64
	woken           int
}

// before returns the index to ask Nomad with for a watch the caller asks with
// index, and waits first when the last answers found the thing absent after a
// wake. It reports false when ctx ended during the wait.
func (a *absence) before(ctx context.Context, path string, index uint64) (uint64, bool) {
	a.mu.Lock()
	at, ok := a.by[path]
	a.mu.Unlock()
	if !ok || index == 0 || at.reported != index {
		return index, true
	}
	if at.woken > 0 && !watch.Sleep(ctx, policy.Backoff(absentMinWait, absentMaxWait, at.woken)) {
		return index, false
	}
	return at.nomad, true
}

// after notes Nomad's answer to a watch the caller asked with index (the
// index Nomad was asked with: asked): absent or not, with Nomad's index n. It
// returns the index to report to the caller.
func (a *absence) after(path string, index, asked, n uint64, absent bool) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !absent {
		delete(a.by, path)
		return n
	}
	at, known := a.by[path]
	switch {
	case !known || index == 0 || at.reported != index:
		at = absentAt{reported: n}
	case n != asked:
		at.woken++ // an answer for a write near it
	default:
		at.woken = 0 // a whole wait without one: the writes near it stopped
	}
	at.nomad = n
	if a.by == nil {
		a.by = map[string]absentAt{}
	}
	a.by[path] = at
	return at.reported
}

// watchOne is a watch of the variable at path: its index, that of its last
// write, past index (see "Watching what is not there" for one that is absent).
func (s *Store) watchOne(ctx context.Context, path string, index uint64, wait time.Duration) (uint64, error) {
	asked, ok := s.absent.before(ctx, path, index)
	if !ok {
		return index, ctx.Err()
	}
	_, n, err := s.read(ctx, path, asked, wait)
	missing := errors.Is(err, ErrNotFound)
	if err != nil && !missing {
		return n, err
	}
	return s.absent.after(path, index, asked, n, missing), nil
}

// requestsMarker is the path of the variable that keeps the requests' folder
// from being empty (see "Watching what is not there"). A host's request
// variable is the folder's name and the host's: never a path under a folder.
func (s *Store) requestsMarker() string { return s.requestsPrefix() + "-/watched" }

// isRequestsMarker reports whether path, listed under the requests' folder, is
// not a host's request variable.
func (s *Store) isRequestsMarker(path string) bool {
	return strings.Contains(strings.TrimPrefix(path, s.requestsPrefix()), "/")
}

// createMissing creates the variable at path with items, check-and-set on its
// absence, and returns the index of the watch's answer: the creation's, past
// idx (the index Nomad answered with), so that the watch's caller reads what
// was created; idx when another writer created it first, which is as good.
func (s *Store) createMissing(ctx context.Context, path string, items map[string]string, idx uint64) (uint64, error) {
	n, err := s.write(ctx, path, items, 0)
	switch {
	case errors.Is(err, ErrConflict):
		return idx, nil
	case err != nil:
		return idx, err
	}
	return n, nil
}
