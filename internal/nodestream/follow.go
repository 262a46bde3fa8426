package nodestream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/watch"
)

// The node list, kept current from the event stream, and from blocking queries
// while the stream cannot be had.
//
// Watching the node list with a blocking query reads every node again at each
// change: the whole list decoded for every drain, status and eligibility change
// of a rollout. The event stream's Node topic carries the node written, alone.
// So the follower subscribes first, then reads the whole list once, and applies
// to it every node event after the list's index: a write before the
// subscription is in the list, one after it is in the stream, and the events
// the stream replays from its buffer (a subscription at index 0 starts at the
// oldest event kept) are older than the list and skipped. The list it keeps is
// the node list as a blocking query would have answered it at the last event's
// index.
//
// It subscribes again with a fresh list every Period (watch.MaxWait): as often
// as a blocking query asks again. And a stream can be open and silent: it is
// served from the state of the server the request landed on, never forwarded
// to the leader, and its heartbeats go on whatever that state does, so a
// follower cut off from the leader serves a stale stream (nomad/stream
// ndjson.go; command/agent/event_endpoint.go). So every CheckEvery, and at
// once when the coordinator suspects it (Suspect: a write of its own the
// stream did not show), the follower asks the leader for the node table's
// index, with a node list that matches no node (a read forwarded to the
// leader; its X-Nomad-Index is the "nodes" table's). A stream behind it is
// checked again CatchUp later, and given up as silent if it has still not
// reached that index: a healthy stream shows a write within milliseconds.
//
// The stream cannot always be had (docs/architecture.md, "Following the
// nodes"). Servers run with enable_event_broker = false answer 500 "EventBroker
// not configured" up to Nomad 1.11.1 and, from 1.11.2, 200 and an immediate
// close (command/agent/event_endpoint.go EventStream writes the status before
// the RPC runs); an ACL refusal has the same two shapes; a slow subscriber is
// cut off ("event dropped from buffer", nomad/stream/event_buffer.go); a
// snapshot restore ends every subscription, and an ACL change those whose
// token lost its rights (nomad/stream/event_broker.go). Then the follower
// follows the nodes without it (blocking.go) and tries the stream again after
// RetryAfter: rarely, since a retry of the 1.11.2 shape costs a full list. It
// says so once per change of state (Mode and reason), not at every retry.

// NodesAPI lists the nodes and reads one; with a WaitIndex each is Nomad's
// blocking query.
type NodesAPI interface {
	List(q *api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error)
	Info(nodeID string, q *api.QueryOptions) (*api.Node, *api.QueryMeta, error)
}

// Sink keeps the node list the follower reads.
type Sink interface {
	// SetNodes keeps list as Nomad's node list at index; a nil list says the
	// list kept is not known to be current.
	SetNodes(list []*api.NodeListStub, index uint64)
	// NodesAt reports whether the list kept was read at index.
	NodesAt(index uint64) bool
}

// NodeSink is a Sink that also takes the nodes the follower saw in full: the
// stream's payload is the whole node after the write, its events included
// (nomad/state/events.go eventFromChange, table nodes), as GET /v1/node/:id
// answers it. NodesWritten is called before the SetNodes that brings the list
// to them, so that what a reader takes with the list is there with it.
type NodeSink interface {
	Sink
	NodesWritten(nodes []*api.Node)
}

// written hands nodes to the sink when it takes them (NodeSink).
func (f *Follower) written(nodes []*api.Node) {
	if s, ok := f.Sink.(NodeSink); ok && len(nodes) > 0 {
		s.NodesWritten(nodes)
	}
}

// Mode is how the follower follows the nodes.
type Mode int

const (
	// Starting: the stream has not yet shown that it works.
	Starting Mode = iota
	// Streaming: the event stream delivers the node writes.
	Streaming
	// Blocking: the stream cannot be had; blocking queries follow the nodes.
	Blocking
)

func (m Mode) String() string {
	switch m {
	case Streaming:
		return "event stream"
	case Blocking:
		return "blocking queries"
	}
	return "starting"
}

// State is what the follower is doing, for status and metrics.
type State struct {
	Mode Mode
	// Reason: why the stream cannot be had (Blocking), and when it is tried
	// again.
	Reason  string
	RetryAt time.Time
}

// Follower keeps a Sink's node list current until its context ends.
type Follower struct {
	Events NodeEventsAPI
	Nodes  NodesAPI
	Sink   Sink
	// Poke is called after each change of the list.
	Poke func()
	Log  *slog.Logger
	// OnState, if set, is told of every change of State (and of every failed
	// try of the stream, which moves RetryAt).
	OnState func(State)
	// Period is how long one subscription is trusted (default watch.MaxWait).
	Period time.Duration
	// RetryAfter gives how long blocking queries follow the nodes after the
	// n-th failure of the stream in a row (default RetryAfter).
	RetryAfter func(n int) time.Duration
	// CheckEvery is how often the stream's index is compared with the
	// leader's (default DefaultCheckEvery).
	CheckEvery time.Duration
	// Relist is how often the whole list is read while the stream cannot be
	// had (default DefaultRelist; the coordinator gives its resync interval).
	Relist time.Duration

	mu      sync.Mutex
	state   State
	watched map[string]bool // the nodes followed one by one without the stream (Watch)
	kick    chan struct{}   // Watch changed watched
	suspect chan struct{}   // Suspect: check the stream now
	adopt   chan adopted    // Adopt: a list a pass read itself
	once    sync.Once
}

// Suspect asks for a check of the stream's index now: the coordinator waited
// for a write of its own that the stream did not show. Safe from any
// goroutine; a check already asked for is not asked twice.
func (f *Follower) Suspect() {
	f.init()
	select {
	case f.suspect <- struct{}{}:
	default:
	}
}

// DefaultCheckEvery is how often the follower compares the stream's index with
// the leader's, and CatchUp how long a stream behind the leader's index has to
// reach it: a silent stream is given up within their sum, or CatchUp after the
// coordinator suspects it.
const (
	DefaultCheckEvery = 30 * time.Second
	CatchUp           = 2 * time.Second
)

// RetryAfter is how long the follower uses blocking queries after the n-th
// failure of the stream in a row before it tries the stream again: 30 s,
// doubling to 5 minutes. A try costs a subscription and, when the server
// answers 200 before it fails, a full node list: at most one per 30 s.
func RetryAfter(n int) time.Duration {
	return policy.Backoff(30*time.Second, watch.MaxWait, n)
}

// State returns the follower's state.
func (f *Follower) State() State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

// Run follows the nodes until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	f.init()
	period, retryAfter := f.Period, f.RetryAfter
	if period <= 0 {
		period = watch.MaxWait
	}
	if retryAfter == nil {
		retryAfter = RetryAfter
	}
	fails := 0
	for ctx.Err() == nil {
		err := f.stream(ctx, period)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			fails = 0 // its period ended: subscribe again
			continue
		}
		fails++
		d := retryAfter(fails)
		f.setState(State{Mode: Blocking, Reason: err.Error(), RetryAt: time.Now().Add(d)})
		f.block(ctx, d)
	}
}

// stream follows the stream for one period: nil when the period ended.
func (f *Follower) stream(parent context.Context, period time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, period)
	defer cancel()
	events, err := f.Events.NodeEvents(ctx, 0)
	if err != nil {
		return fmt.Errorf("subscribe to the node events: %w", err)
	}
	list, meta, err := f.Nodes.List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		f.Sink.SetNodes(nil, 0)
		return fmt.Errorf("list nodes: %w", err)
	}
	// An item at or before the list's index is in the list. Items after it are
	// applied in the order they come (the emulator may send two at one index).
	listed := meta.LastIndex
	index := listed
	had := f.Sink.NodesAt(index)
	f.Sink.SetNodes(list, index)
	if !had {
		f.Poke()
	}
	every := f.CheckEvery
	if every <= 0 {
		every = DefaultCheckEvery
	}
	check := time.NewTimer(every)
	defer check.Stop()
	var behind uint64 // the leader's index at the last check, when the stream had not reached it
	for {
		var changed []*api.NodeListStub
		var full []*api.Node
		var gone []string
		var err error
		select {
		case <-ctx.Done():
			f.setState(State{Mode: Streaming}) // it lasted its period
			return nil
		case <-f.suspect:
			if behind != 0 {
				continue // checked already: its catch-up time runs
			}
			check.Reset(0)
			continue
		case <-check.C:
			if behind, err = f.checkIndex(ctx, index, behind); err != nil {
				return err
			}
			if behind != 0 {
				check.Reset(CatchUp)
			} else {
				check.Reset(every)
			}
			continue
		case evs, ok := <-events:
			changed, full, gone, index, err = take(evs, ok, events, listed, index)
		}
		if err != nil {
			if ctx.Err() != nil {
				f.setState(State{Mode: Streaming})
				return nil
			}
			return err
		}
		f.setState(State{Mode: Streaming}) // it delivers
		if len(changed) == 0 && len(gone) == 0 {
			continue
		}
		list = Apply(list, changed, gone)
		f.written(full)
		f.Sink.SetNodes(list, index)
		f.Poke()
	}
}

// checkIndex compares the stream's index with the leader's node table index:
// an error when the stream has not reached the index the leader had at the
// check before (behind, 0: none); else the leader's index if the stream is
// behind it now (0 if not). A failed read says nothing of the stream: the next
// check asks again.
func (f *Follower) checkIndex(ctx context.Context, index, behind uint64) (uint64, error) {
	if behind != 0 && index < behind {
		return 0, fmt.Errorf("the node event stream is silent: %s ago Nomad's leader had the nodes at index %d, and the stream is still at %d", CatchUp, behind, index)
	}
	_, meta, err := f.Nodes.List((&api.QueryOptions{Filter: `ID == ""`}).WithContext(ctx))
	if err != nil || meta == nil {
		f.Log.Debug("cannot read the leader's node index to check the node event stream", "err", err)
		return 0, nil
	}
	if meta.LastIndex > index {
		return meta.LastIndex, nil
	}
	return 0, nil
}

// take returns the node writes of evs and of every batch already received
// after it (one list and one poke for all), as stubs and in full, and the
// index they bring the list to. An error ends the stream: the stream's own,
// or its end.
func take(evs *api.Events, ok bool, events <-chan *api.Events, listed, index uint64) ([]*api.NodeListStub, []*api.Node, []string, uint64, error) {
	var changed []*api.NodeListStub
	var full []*api.Node
	var gone []string
	for {
		if !ok {
			return nil, nil, nil, index, errors.New("the node event stream ended")
		}
		if evs.Err != nil {
			return nil, nil, nil, index, streamErr(evs.Err)
		}
		if evs.Index > listed {
			ch, gn, err := Changes(evs)
			if err != nil {
				return nil, nil, nil, index, err
			}
			changed, gone = append(changed, ch...), append(gone, gn...)
			full = append(full, written(evs)...)
			index = max(index, evs.Index)
		}
		select {
		case evs, ok = <-events:
			continue
		default:
		}
		return changed, full, gone, index, nil
	}
}

// setState records s, saying so when the mode or the reason changed.
func (f *Follower) setState(s State) {
	f.mu.Lock()
	old := f.state
	f.state = s
	f.mu.Unlock()
	if old == s {
		return
	}
	if old.Mode != s.Mode || old.Reason != s.Reason {
		switch s.Mode {
		case Blocking:
			f.Log.Warn("the node event stream cannot be had: following the nodes without it (the whole list each resync, the nodes of hosts in their cycle one by one)",
				"err", s.Reason, "stream_retry_in", time.Until(s.RetryAt).Round(time.Second))
		case Streaming:
			if old.Mode == Blocking {
				f.Log.Info("the node event stream is back: following the nodes with it")
			}
		}
	}
	if f.OnState != nil {
		f.OnState(s)
	}
}

// streamErr says why the stream ended. Up to Nomad 1.11.1 a subscription the
// server ends (a slow subscriber dropped, a snapshot restore, an ACL change)
// gets its reason written as plain text after the last JSON item
// (nomad/event_endpoint.go Event.stream via command/agent/event_endpoint.go),
// which the API client fails to decode: said so rather than as a bare JSON
// syntax error.
func streamErr(err error) error {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return fmt.Errorf("node event stream: the server ended it with a text the client cannot decode "+
			"(a subscriber dropped, a snapshot restored or an ACL change, as Nomad up to 1.11.1 says it): %w", err)
	}
	return fmt.Errorf("node event stream: %w", err)
}
