package nomadsim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// nextNodeEvent returns the next event of the stream, failing after a while.
func nextNodeEvent(t *testing.T, ch <-chan *api.Events) (uint64, api.Event, *api.Node) {
	t.Helper()
	select {
	case evs, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		if evs.Err != nil {
			t.Fatalf("stream: %v", evs.Err)
		}
		if len(evs.Events) != 1 {
			t.Fatalf("%d events in one item, want 1", len(evs.Events))
		}
		ev := evs.Events[0]
		n, err := ev.Node()
		if err != nil || n == nil {
			t.Fatalf("the payload of %s is no node: %v", ev.Type, err)
		}
		return evs.Index, ev, n
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	panic("unreachable")
}

// The Node topic carries each node write with the node as written, its index
// and its event type; a subscription at an index starts there (the buffer
// replays it); a key narrows it to one node; other topics are refused.
func TestEventStreamNodeTopic(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2})
	n1, _ := s.Node("client-1")
	n2, _ := s.Node("client-2")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	all, err := c.EventStream().Stream(ctx, map[api.Topic][]string{api.TopicNode: {"*"}}, s.Index()+1, nil)
	if err != nil {
		t.Fatal(err)
	}
	one, err := c.EventStream().Stream(ctx, map[api.Topic][]string{api.TopicNode: {n2.ID}}, s.Index()+1, nil)
	if err != nil {
		t.Fatal(err)
	}

	r1, err := c.Nodes().ToggleEligibility(n1.ID, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	idx, ev, n := nextNodeEvent(t, all)
	if idx != r1.NodeModifyIndex || ev.Index != idx || ev.Topic != api.TopicNode || ev.Type != "NodeEligibility" ||
		ev.Key != n1.ID || n.ID != n1.ID || n.SchedulingEligibility != "ineligible" || n.ModifyIndex != idx {
		t.Errorf("eligibility event: index %d, %+v, node %s %s at %d; want index %d", idx, ev, n.ID, n.SchedulingEligibility, n.ModifyIndex, r1.NodeModifyIndex)
	}
	r2, err := c.Nodes().UpdateDrainOpts(n2.ID, &api.DrainOptions{DrainSpec: &api.DrainSpec{Deadline: time.Minute}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan *api.Events{all, one} {
		idx, ev, n := nextNodeEvent(t, ch)
		if idx != r2.NodeModifyIndex || ev.Type != "NodeDrain" || n.ID != n2.ID || n.DrainStrategy == nil {
			t.Errorf("drain event: index %d, type %s, node %s draining %t; want index %d", idx, ev.Type, n.ID, n.DrainStrategy != nil, r2.NodeModifyIndex)
		}
	}

	// A new subscription at the first write's index replays both.
	again, err := c.EventStream().Stream(ctx, map[api.Topic][]string{api.TopicNode: nil}, r1.NodeModifyIndex, nil)
	if err != nil {
		t.Fatal(err)
	}
	if idx, _, _ := nextNodeEvent(t, again); idx != r1.NodeModifyIndex {
		t.Errorf("replay starts at %d, want %d", idx, r1.NodeModifyIndex)
	}
	if idx, _, _ := nextNodeEvent(t, again); idx < r2.NodeModifyIndex {
		t.Errorf("replay's second item at %d, want %d or later", idx, r2.NodeModifyIndex)
	}

	_, err = c.EventStream().Stream(ctx, map[api.Topic][]string{api.TopicJob: {"*"}}, 0, nil)
	if err == nil || !strings.Contains(err.Error(), "Node topic only") {
		t.Errorf("Job topic: %v, want a 400 saying only Node is modelled", err)
	}
}

// Servers run with enable_event_broker = false refuse a subscription with a
// 500 up to Nomad 1.11.1, and from 1.11.2 open it (200) and close it at once.
func TestEventStreamBrokerDisabled(t *testing.T) {
	topics := map[api.Topic][]string{api.TopicNode: {"*"}}
	t.Run("1.11.1", func(t *testing.T) {
		_, c := newTestSim(t, Config{Clients: 1, NomadVersion: "1.11.1", EventBrokerDisabled: true})
		_, err := c.EventStream().Stream(t.Context(), topics, 0, nil)
		if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "EventBroker not configured") {
			t.Fatalf("err = %v, want a 500 saying the broker is not configured", err)
		}
	})
	t.Run("1.11.2", func(t *testing.T) {
		_, c := newTestSim(t, Config{Clients: 1, NomadVersion: "1.11.2", EventBrokerDisabled: true})
		ch, err := c.EventStream().Stream(t.Context(), topics, 0, nil)
		if err != nil {
			t.Fatalf("subscribe: %v, want the 200 of 1.11.2", err)
		}
		select {
		case evs, ok := <-ch:
			if !ok || evs.Err == nil {
				t.Fatalf("first item %+v, want the end of the stream", evs)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the stream stayed open")
		}
	})
	t.Run("enabled", func(t *testing.T) {
		_, c := newTestSim(t, Config{Clients: 1, NomadVersion: "1.11.2"})
		ch, err := c.EventStream().Stream(t.Context(), topics, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case evs := <-ch:
			if evs.Err != nil {
				t.Fatalf("stream: %v", evs.Err)
			}
		case <-time.After(200 * time.Millisecond): // open and quiet: the heartbeat is skipped
		}
	})
	if _, err := New(Config{NomadVersion: "one.eleven"}); err == nil || !strings.Contains(err.Error(), `nomad version "one.eleven"`) {
		t.Fatalf("New with a bad version: %v, want an error naming it", err)
	}
}
