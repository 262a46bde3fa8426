package nodestream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

// sink keeps the follower's list, as the coordinator's mailbox does.
type sink struct {
	mu    sync.Mutex
	list  []*api.NodeListStub
	index uint64
	pokes int
}

func (s *sink) SetNodes(list []*api.NodeListStub, index uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list, s.index = list, index
}

func (s *sink) NodesAt(index uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list != nil && s.index == index
}

// eligibility returns the eligibility of node id in the list kept ("" when
// none is kept).
func (s *sink) eligibility(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.list {
		if n.ID == id {
			return n.SchedulingEligibility
		}
	}
	return ""
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With the event broker off, in either version's shape, the follower follows
// the nodes with blocking queries, says so once however often it tries the
// stream again, and goes back to the stream once the broker is on.
func TestFollowerWithoutTheStream(t *testing.T) {
	for _, version := range []string{"1.11.1", "1.11.2"} {
		t.Run(version, func(t *testing.T) {
			sim, client := simtest.Start(t, nomadsim.Config{Clients: 2, NomadVersion: version, EventBrokerDisabled: true}, nil)
			var logs syncbuf.Buffer
			var states []State
			var statesMu sync.Mutex
			out := &sink{}
			f := &Follower{Events: NomadNodeEvents{Client: client}, Nodes: client.Nodes(), Sink: out,
				Poke: func() {}, Log: slog.New(slog.NewTextHandler(&logs, nil)),
				RetryAfter: func(int) time.Duration { return 100 * time.Millisecond },
				OnState: func(s State) {
					statesMu.Lock()
					states = append(states, s)
					statesMu.Unlock()
				}}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); f.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })

			waitUntil(t, "the blocking queries", func() bool { return f.State().Mode == Blocking })
			n, err := sim.Node("client-1")
			if err != nil {
				t.Fatal(err)
			}
			for _, eligible := range []bool{false, true, false} {
				if _, err := client.Nodes().ToggleEligibility(n.ID, eligible, nil); err != nil {
					t.Fatal(err)
				}
				want := api.NodeSchedulingIneligible
				if eligible {
					want = api.NodeSchedulingEligible
				}
				waitUntil(t, "the list to show "+want, func() bool { return out.eligibility(n.ID) == want })
				time.Sleep(150 * time.Millisecond) // a retry of the stream in between
			}
			if f.State().Mode != Blocking {
				t.Fatalf("mode %v with the broker off, want blocking queries", f.State().Mode)
			}
			statesMu.Lock()
			tries := len(states)
			statesMu.Unlock()
			if tries < 3 {
				t.Errorf("%d failed tries of the stream told, want one per retry (at least 3)", tries)
			}
			if got := strings.Count(logs.String(), "cannot be had"); got != 1 {
				t.Errorf("the fallback logged %d times over %d tries, want once:\n%s", got, tries, logs.String())
			}

			sim.SetEventBrokerDisabled(false)
			if _, err := client.Nodes().ToggleEligibility(n.ID, true, nil); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the stream's event", func() bool {
				return f.State().Mode == Streaming && out.eligibility(n.ID) == api.NodeSchedulingEligible
			})
			if got := strings.Count(logs.String(), "stream is back"); got != 1 {
				t.Errorf("the stream's return logged %d times, want once:\n%s", got, logs.String())
			}
		})
	}
}

// silentEvents subscribes (the server answers 200) and then delivers nothing:
// the stream of a follower cut off from the leader, whose heartbeats go on.
type silentEvents struct{}

func (silentEvents) NodeEvents(ctx context.Context, _ uint64) (<-chan *api.Events, error) {
	ch := make(chan *api.Events)
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

// A stream that stays open and silent while the leader's nodes change is
// given up within two checks: the follower compares the leader's node index
// with the stream's, and follows the nodes with blocking queries.
func TestFollowerGivesUpASilentStream(t *testing.T) {
	sim, client := simtest.Start(t, nomadsim.Config{Clients: 2}, nil)
	var logs syncbuf.Buffer
	out := &sink{}
	f := &Follower{Events: silentEvents{}, Nodes: client.Nodes(), Sink: out, Poke: func() {},
		Log: slog.New(slog.NewTextHandler(&logs, nil)), CheckEvery: 50 * time.Millisecond,
		RetryAfter: func(int) time.Duration { return time.Hour }}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	n, err := sim.Node("client-1")
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the first list", func() bool { return out.eligibility(n.ID) == api.NodeSchedulingEligible })
	time.Sleep(200 * time.Millisecond) // checks that find nothing behind: the quiet stream is trusted
	if f.State().Mode == Blocking {
		t.Fatalf("a quiet stream with nothing to tell was given up: %+v", f.State())
	}
	if _, err := client.Nodes().ToggleEligibility(n.ID, false, nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the silent stream given up", func() bool { return f.State().Mode == Blocking })
	if !strings.Contains(f.State().Reason, "silent") {
		t.Errorf("reason %q, want it to say the stream is silent", f.State().Reason)
	}
	waitUntil(t, "the blocking queries to show the change", func() bool {
		return out.eligibility(n.ID) == api.NodeSchedulingIneligible
	})
}

// countingNodes counts the whole-list reads (lists without a filter).
type countingNodes struct {
	NodesAPI
	mu    sync.Mutex
	lists int
}

func (c *countingNodes) List(q *api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error) {
	if q == nil || q.Filter == "" {
		c.mu.Lock()
		c.lists++
		c.mu.Unlock()
	}
	return c.NodesAPI.List(q)
}

func (c *countingNodes) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists
}

// Without the stream, the nodes the coordinator waits on (Watch) are followed
// one by one: their changes are seen without a whole list (the next one is an
// hour away here); any other node's change waits for the next whole list.
func TestFollowerWithoutTheStreamWatchesNodes(t *testing.T) {
	sim, client := simtest.Start(t, nomadsim.Config{Clients: 3, EventBrokerDisabled: true}, nil)
	nodes := &countingNodes{NodesAPI: client.Nodes()}
	out := &sink{}
	f := &Follower{Events: NomadNodeEvents{Client: client}, Nodes: nodes, Sink: out, Poke: func() {},
		Log: slog.New(slog.DiscardHandler), Relist: time.Hour,
		RetryAfter: func(int) time.Duration { return time.Hour }}
	n1, _ := sim.Node("client-1")
	n2, _ := sim.Node("client-2")
	f.Watch([]string{n1.ID})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitUntil(t, "the first list", func() bool { return out.eligibility(n1.ID) == api.NodeSchedulingEligible })
	before := nodes.count()

	for _, eligible := range []bool{false, true, false} {
		if _, err := client.Nodes().ToggleEligibility(n1.ID, eligible, nil); err != nil {
			t.Fatal(err)
		}
		want := api.NodeSchedulingIneligible
		if eligible {
			want = api.NodeSchedulingEligible
		}
		waitUntil(t, "the watched node's change", func() bool { return out.eligibility(n1.ID) == want })
	}
	if got := nodes.count() - before; got != 0 {
		t.Errorf("%d whole lists while the watched node changed three times, want none", got)
	}

	// A node not watched: its change waits for the next whole list.
	if _, err := client.Nodes().ToggleEligibility(n2.ID, false, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if out.eligibility(n2.ID) != api.NodeSchedulingEligible {
		t.Fatal("a node not watched was seen changed before the next whole list")
	}
	// Watched from now on: the watch starts from the list's ModifyIndex, so
	// the change it missed comes at once.
	f.Watch([]string{n1.ID, n2.ID})
	waitUntil(t, "the newly watched node's change", func() bool { return out.eligibility(n2.ID) == api.NodeSchedulingIneligible })
	if got := nodes.count() - before; got != 0 {
		t.Errorf("%d whole lists, want none", got)
	}
}

// The coordinator suspects the stream when it does not show a write of the
// coordinator's own: the follower checks at once, and gives a silent stream
// up a catch-up time later instead of at its next periodic check.
func TestFollowerChecksASuspectedStream(t *testing.T) {
	sim, client := simtest.Start(t, nomadsim.Config{Clients: 1}, nil)
	out := &sink{}
	f := &Follower{Events: silentEvents{}, Nodes: client.Nodes(), Sink: out, Poke: func() {},
		Log: slog.New(slog.DiscardHandler), CheckEvery: time.Hour, RetryAfter: func(int) time.Duration { return time.Hour }}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	n, _ := sim.Node("client-1")
	waitUntil(t, "the first list", func() bool { return out.eligibility(n.ID) == api.NodeSchedulingEligible })
	if _, err := client.Nodes().ToggleEligibility(n.ID, false, nil); err != nil {
		t.Fatal(err)
	}
	f.Suspect()
	waitUntil(t, "the suspected stream given up", func() bool { return f.State().Mode == Blocking })
}

// A reason Nomad (up to 1.11.1) writes as text after the stream reaches the
// client as a JSON syntax error: said as the server's end of the stream.
func TestStreamErr(t *testing.T) {
	var v any
	syntax := json.Unmarshal([]byte("subscription closed by server, client should resubscribe"), &v)
	for _, tc := range []struct {
		err  error
		want string
	}{
		{syntax, "node event stream: the server ended it with a text the client cannot decode"},
		{fmt.Errorf("wrapped: %w", syntax), "the server ended it"},
		{errors.New("Unexpected response code: 500 (EventBroker not configured)"), "node event stream: Unexpected response code: 500"},
	} {
		if got := streamErr(tc.err).Error(); !strings.Contains(got, tc.want) {
			t.Errorf("streamErr(%v) = %q, want it to say %q", tc.err, got, tc.want)
		}
	}
}

// refusingNodes refuses node lists until allowed, counting them; nodes are
// never changed (Info blocks until its context ends).
type refusingNodes struct {
	mu      sync.Mutex
	allowed bool
	lists   int
}

func (r *refusingNodes) List(q *api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lists++
	if !r.allowed {
		return nil, nil, errors.New("Unexpected response code: 403 (Permission denied)")
	}
	return []*api.NodeListStub{{ID: "n1", ModifyIndex: 3}}, &api.QueryMeta{LastIndex: 3}, nil
}

func (r *refusingNodes) Info(id string, q *api.QueryOptions) (*api.Node, *api.QueryMeta, error) {
	<-q.Context().Done()
	return nil, nil, q.Context().Err()
}

func (r *refusingNodes) listed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lists
}

type noStream struct{}

func (noStream) NodeEvents(context.Context, uint64) (<-chan *api.Events, error) {
	return nil, errors.New("Unexpected response code: 500 (EventBroker not configured)")
}

// Without the stream, a follower whose own node list was refused takes the
// list a pass read itself, and reads none again before its relist interval;
// once it has a list of its own, an offer is ignored.
func TestFollowerAdoptsAPassList(t *testing.T) {
	nodes := &refusingNodes{}
	out := &sink{}
	f := &Follower{Events: noStream{}, Nodes: nodes, Sink: out, Poke: func() {},
		Log: slog.New(slog.DiscardHandler), Relist: time.Hour}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	waitUntil(t, "the follower's list refused", func() bool { return nodes.listed() == 1 })
	offered := []*api.NodeListStub{{ID: "n1", ModifyIndex: 5}}
	f.Adopt(offered, 5)
	waitUntil(t, "the pass's list kept", func() bool { return out.NodesAt(5) })
	// Its retry after the refusal (1 s) is called off: the next read of every
	// node is the relist's, an hour on.
	time.Sleep(1500 * time.Millisecond)
	if n := nodes.listed(); n != 1 {
		t.Fatalf("the follower listed the nodes %d times, want once (the refused read)", n)
	}
	// A list of its own is not replaced by an offer.
	f.Adopt([]*api.NodeListStub{{ID: "n1", ModifyIndex: 9}}, 9)
	time.Sleep(100 * time.Millisecond)
	if !out.NodesAt(5) {
		t.Errorf("an offer replaced the list the follower kept")
	}
}

// nodeSink is a sink that also keeps the nodes the follower saw in full, and
// checks each came before the list that shows it.
type nodeSink struct {
	sink
	full map[string]*api.Node
	bad  []string
}

func (s *nodeSink) NodesWritten(nodes []*api.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.full == nil {
		s.full = map[string]*api.Node{}
	}
	for _, n := range nodes {
		s.full[n.ID] = n
	}
}

func (s *nodeSink) SetNodes(list []*api.NodeListStub, index uint64) {
	s.mu.Lock()
	for _, st := range list {
		if n, ok := s.full[st.ID]; ok && n.ModifyIndex < st.ModifyIndex && st.SchedulingEligibility == api.NodeSchedulingIneligible {
			s.bad = append(s.bad, fmt.Sprintf("%s listed at %d, seen in full at %d", st.ID, st.ModifyIndex, n.ModifyIndex))
		}
	}
	s.mu.Unlock()
	s.sink.SetNodes(list, index)
}

// fullAt returns the node seen in full, if at index.
func (s *nodeSink) fullAt(id string, index uint64) *api.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.full[id]; n != nil && n.ModifyIndex == index {
		return n
	}
	return nil
}

// A sink that takes nodes in full (NodeSink) gets each node the stream
// carries, or a node's own blocking query answers, with its events, before
// the list that shows that write.
func TestFollowerHandsNodesInFull(t *testing.T) {
	for _, tc := range []struct {
		name     string
		disabled bool
	}{{"stream", false}, {"blocking queries", true}} {
		t.Run(tc.name, func(t *testing.T) {
			sim, client := simtest.Start(t, nomadsim.Config{Clients: 2, EventBrokerDisabled: tc.disabled}, nil)
			out := &nodeSink{}
			f := &Follower{Events: NomadNodeEvents{Client: client}, Nodes: client.Nodes(), Sink: out, Poke: func() {},
				Log: slog.New(slog.DiscardHandler), Relist: time.Hour, RetryAfter: func(int) time.Duration { return time.Hour }}
			n1, _ := sim.Node("client-1")
			f.Watch([]string{n1.ID})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan struct{})
			go func() { defer close(done); f.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			waitUntil(t, "the first list", func() bool { return out.eligibility(n1.ID) == api.NodeSchedulingEligible })
			if _, err := client.Nodes().ToggleEligibility(n1.ID, false, nil); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the change listed", func() bool { return out.eligibility(n1.ID) == api.NodeSchedulingIneligible })
			out.mu.Lock()
			var index uint64
			for _, st := range out.list {
				if st.ID == n1.ID {
					index = st.ModifyIndex
				}
			}
			bad := out.bad
			out.mu.Unlock()
			n := out.fullAt(n1.ID, index)
			if n == nil || len(n.Events) == 0 || n.SchedulingEligibility != api.NodeSchedulingIneligible {
				t.Fatalf("node in full at the listed index %d: %+v", index, n)
			}
			if len(bad) > 0 {
				t.Errorf("listed before it was seen in full: %v", bad)
			}
		})
	}
}
