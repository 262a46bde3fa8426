package nodestream

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/watch"
)

// Without the stream. A blocking query of the node list answers every node
// write with the whole list: for each drain, its end, each node down and back
// and each eligibility change of a rollout, every node read and decoded. So
// while the stream cannot be had the follower reads the whole list once at
// first and then every Relist (the resync interval: as often as a pass would
// look at everything anyway), and follows one by one, with blocking queries of
// GET /v1/node/:id (which Nomad answers when that node changes, with the node
// alone: nomad/node_endpoint.go GetNode, forwarded to the leader), the nodes
// the coordinator waits on: those of the hosts in their cycle (Watch). A change
// to them is seen at once, as with the stream; a change to any other node
// (a pending host's node, a node added) at the next full list. What decides a
// grant is read from Nomad when it is made (the coordinator reads a pending
// host's node and allocations then), not from a list that may be a resync old.

// DefaultRelist is how often the whole node list is read while the stream
// cannot be had, unless Follower.Relist says otherwise.
const DefaultRelist = 30 * time.Second

// nodeAnswer is a blocking query's answer for one node.
type nodeAnswer struct {
	stub  *api.NodeListStub
	node  *api.Node // in full (NodeSink)
	index uint64
}

// Watch sets the nodes that blocking queries follow one by one while the
// stream cannot be had: the nodes of the hosts in their cycle. Safe to call
// from any goroutine; the follower takes the newest set.
func (f *Follower) Watch(ids []string) {
	f.init()
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	f.mu.Lock()
	same := len(want) == len(f.watched)
	for id := range want {
		same = same && f.watched[id]
	}
	f.watched = want
	f.mu.Unlock()
	if !same {
		select {
		case f.kick <- struct{}{}:
		default:
		}
	}
}

// Adopt offers the follower a whole node list, at index, that a pass read
// itself because the follower had none to give (its own read failed: Nomad
// refused it or could not be reached). Without the stream the follower keeps
// it as if its own relist had read it, so that the passes that follow do not
// each read every node again until its retry comes. Otherwise it is ignored:
// the stream applies its items from its own list's index on. Safe from any
// goroutine; only the newest offer waiting is kept.
func (f *Follower) Adopt(list []*api.NodeListStub, index uint64) {
	f.init()
	a := adopted{list, index}
	for {
		select {
		case f.adopt <- a:
			return
		default:
		}
		select {
		case <-f.adopt: // an older offer not taken yet
		default:
		}
	}
}

type adopted struct {
	list  []*api.NodeListStub
	index uint64
}

func (f *Follower) init() {
	f.once.Do(func() {
		f.kick, f.suspect, f.adopt = make(chan struct{}, 1), make(chan struct{}, 1), make(chan adopted, 1)
	})
}

// watchedIDs returns the nodes to follow one by one, sorted.
func (f *Follower) watchedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, 0, len(f.watched))
	for id := range f.watched {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// block follows the nodes without the stream for d.
func (f *Follower) block(parent context.Context, d time.Duration) {
	f.init()
	ctx, cancel := context.WithTimeout(parent, d)
	defer cancel()
	every := f.Relist
	if every <= 0 {
		every = DefaultRelist
	}
	answers := make(chan nodeAnswer)
	nodes := nodeWatches{ctx: ctx, f: f, out: answers}
	defer nodes.stop()
	var list []*api.NodeListStub
	var index uint64 // of the list kept
	relist := time.NewTimer(0)
	defer relist.Stop()
	fails := 0
	select {
	case <-f.adopt: // offered while the stream ran: older than the list read now
	default:
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-relist.C:
			l, idx, err := f.readAll(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				f.Sink.SetNodes(nil, 0) // not known to be current: passes read it
				list, index = nil, 0
				fails++
				// A refusal (an ACL change) or an unreachable leader tends
				// to last: tried again from 1 s, doubling to the relist
				// interval. A pass that reads the list meanwhile hands it
				// over (Adopt).
				relist.Reset(policy.Backoff(time.Second, every, fails))
				f.Log.Debug("cannot list the nodes: the passes read the node list until it answers", "err", err, "failures", fails)
				continue
			}
			fails = 0
			changed := !f.Sink.NodesAt(idx)
			list, index = l, idx
			f.Sink.SetNodes(list, index)
			if changed {
				f.Poke()
			}
			relist.Reset(every)
			nodes.set(list, f.watchedIDs())
		case a := <-f.adopt:
			if list != nil {
				continue // its own list, kept current by the relist and the node answers
			}
			list, index, fails = a.list, a.index, 0
			f.Sink.SetNodes(list, index)
			relist.Reset(every)
			nodes.set(list, f.watchedIDs())
		case <-f.kick:
			if list != nil {
				nodes.set(list, f.watchedIDs())
			}
		case a := <-answers:
			if list == nil || !newer(list, a.stub) {
				continue // the list kept shows it, or a later write of it
			}
			list = Apply(list, []*api.NodeListStub{a.stub}, nil)
			index = max(index, a.index)
			f.written([]*api.Node{a.node})
			f.Sink.SetNodes(list, index)
			f.Poke()
		}
	}
}

// readAll reads the whole node list.
func (f *Follower) readAll(ctx context.Context) ([]*api.NodeListStub, uint64, error) {
	list, meta, err := f.Nodes.List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, 0, err
	}
	return list, meta.LastIndex, nil
}

// newer reports whether n is a later write of its node than list shows (or a
// node list lacks).
func newer(list []*api.NodeListStub, n *api.NodeListStub) bool {
	for _, s := range list {
		if s.ID == n.ID {
			return n.ModifyIndex > s.ModifyIndex
		}
	}
	return true
}

// nodeWatches are the blocking queries of single nodes, by node ID.
type nodeWatches struct {
	ctx     context.Context
	f       *Follower
	out     chan<- nodeAnswer
	wg      sync.WaitGroup
	running map[string]context.CancelFunc
}

// set follows the nodes of ids that list shows (from the ModifyIndex it shows:
// the first answer comes with their next change) and ends the other watches.
func (w *nodeWatches) set(list []*api.NodeListStub, ids []string) {
	if w.running == nil {
		w.running = map[string]context.CancelFunc{}
	}
	from := map[string]uint64{}
	for _, id := range ids {
		from[id] = 0
	}
	for _, n := range list {
		if _, ok := from[n.ID]; ok {
			from[n.ID] = n.ModifyIndex
		}
	}
	for id, cancel := range w.running {
		if _, ok := from[id]; !ok {
			cancel()
			delete(w.running, id)
		}
	}
	for id, idx := range from {
		if _, ok := w.running[id]; ok || idx == 0 {
			continue // followed already, or not in the list: the next full list shows it
		}
		ctx, cancel := context.WithCancel(w.ctx)
		w.running[id] = cancel
		w.wg.Go(func() { w.follow(ctx, id, idx) })
	}
}

// follow answers every change of node id after index until ctx ends.
func (w *nodeWatches) follow(ctx context.Context, id string, index uint64) {
	watch.Loop{Index: index, Query: func(ctx context.Context, idx uint64) (uint64, error) {
		q := (&api.QueryOptions{WaitIndex: idx, WaitTime: watch.MaxWait}).WithContext(ctx)
		n, meta, err := w.f.Nodes.Info(id, q)
		if err != nil {
			return 0, err // a node gone (404) too: the next full list drops it
		}
		if meta.LastIndex != idx {
			select {
			case w.out <- nodeAnswer{stub: listStub(n), node: n, index: meta.LastIndex}:
			case <-ctx.Done():
			}
		}
		return meta.LastIndex, nil
	}, OnError: func(err error, fails int, retry time.Duration) {
		w.f.Log.Debug("node watch failed", "node_id", id, "err", err, "retry_in", retry, "failures", fails)
	}}.Run(ctx)
}

// stop ends every watch and waits for them.
func (w *nodeWatches) stop() {
	for _, cancel := range w.running {
		cancel()
	}
	w.wg.Wait()
}
