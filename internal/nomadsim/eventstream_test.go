package nomadsim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// nextItem returns the next item of the stream, failing after a while.
func nextItem(t *testing.T, ch <-chan *api.Events) *api.Events {
	t.Helper()
	select {
	case evs, ok := <-ch:
		if !ok {
			t.Fatal("the stream ended")
		}
		if evs.Err != nil {
			t.Fatalf("stream: %v", evs.Err)
		}
		return evs
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	panic("unreachable")
}

// nextNodeEvent returns the next item of the stream, which must hold one node
// event.
func nextNodeEvent(t *testing.T, ch <-chan *api.Events) (uint64, api.Event, *api.Node) {
	t.Helper()
	evs := nextItem(t, ch)
	if len(evs.Events) != 1 {
		t.Fatalf("%d events in one item, want 1", len(evs.Events))
	}
	ev := evs.Events[0]
	n, err := ev.Node()
	if err != nil || n == nil {
		t.Fatalf("the payload of %s is no node: %v", ev.Type, err)
	}
	return evs.Index, ev, n
}

// noItem fails if the stream sends an item (or ends) within d.
func noItem(t *testing.T, ch <-chan *api.Events, d time.Duration) {
	t.Helper()
	select {
	case evs, ok := <-ch:
		t.Fatalf("got %+v (open %t), want nothing", evs, ok)
	case <-time.After(d):
	}
}

// streamEnd waits for the end of the stream and returns its last error.
func streamEnd(t *testing.T, ch <-chan *api.Events) error {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case evs, ok := <-ch:
			if !ok {
				return nil
			}
			if evs.Err != nil {
				return evs.Err
			}
		case <-deadline:
			t.Fatal("the stream did not end")
		}
	}
}

// rawStream opens the stream with a plain HTTP request: its status and a reader
// of its body.
func rawStream(t *testing.T, s *Sim, query, token string) (int, *bufio.Reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, s.Address()+"/v1/event/stream"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp.StatusCode, bufio.NewReader(resp.Body)
}

// readRest reads the body to its end (failing if it does not end).
func readRest(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	done := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	select {
	case b := <-done:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end")
	}
	panic("unreachable")
}

var nodeTopic = map[api.Topic][]string{api.TopicNode: {"*"}}

// toggle flips the eligibility of node id n times and returns the last write's
// index.
func toggle(t *testing.T, c *api.Client, id string, n int) uint64 {
	t.Helper()
	var idx uint64
	for i := range n {
		r, err := c.Nodes().ToggleEligibility(id, i%2 == 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		idx = r.NodeModifyIndex
	}
	return idx
}

// The Node topic carries each node write with the node as written (its Drain
// flag included), its index and its event type; a key narrows it to one node;
// other named topics are refused.
func TestEventStreamNodeTopic(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2})
	n1, _ := s.Node("client-1")
	n2, _ := s.Node("client-2")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// At an index newer than every item, the newest item (client-2's
	// registration) is sent again (StartAtClosest).
	all, err := c.EventStream().Stream(ctx, nodeTopic, s.Index()+1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ev, n := nextNodeEvent(t, all); ev.Type != "NodeRegistration" || n.ID != n2.ID {
		t.Fatalf("first item %s of %s, want the newest item again (client-2's registration)", ev.Type, n.ID)
	}
	one, err := c.EventStream().Stream(ctx, map[api.Topic][]string{api.TopicNode: {n2.ID}}, s.Index()+1, nil)
	if err != nil {
		t.Fatal(err)
	}
	nextNodeEvent(t, one) // the same item again

	r1, err := c.Nodes().ToggleEligibility(n1.ID, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	idx, ev, n := nextNodeEvent(t, all)
	// An eligibility write is typed NodeDrain up to Nomad 2.0.0.
	if idx != r1.NodeModifyIndex || ev.Index != idx || ev.Topic != api.TopicNode || ev.Type != "NodeDrain" ||
		ev.Key != n1.ID || n.ID != n1.ID || n.SchedulingEligibility != "ineligible" || n.ModifyIndex != idx || n.Drain {
		t.Errorf("eligibility event: index %d, %+v, node %s %s at %d; want index %d", idx, ev, n.ID, n.SchedulingEligibility, n.ModifyIndex, r1.NodeModifyIndex)
	}
	r2, err := c.Nodes().UpdateDrainOpts(n2.ID, &api.DrainOptions{DrainSpec: &api.DrainSpec{Deadline: time.Minute}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range []<-chan *api.Events{all, one} {
		idx, ev, n := nextNodeEvent(t, ch)
		if idx != r2.NodeModifyIndex || ev.Type != "NodeDrain" || n.ID != n2.ID || n.DrainStrategy == nil || !n.Drain {
			t.Errorf("drain event: index %d, type %s, node %s draining %t (Drain %t); want index %d", idx, ev.Type, n.ID, n.DrainStrategy != nil, n.Drain, r2.NodeModifyIndex)
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
	if code, _ := rawStream(t, s, "?topic=Node:a:b", ""); code != 400 {
		t.Errorf("topic with two colons: %d, want 400", code)
	}
	if code, _ := rawStream(t, s, "?index=x", ""); code != 400 {
		t.Errorf("bad index: %d, want 400", code)
	}
}

// Where a subscription starts (event_buffer.go StartAtClosest): the head at 0
// or an older index, the first item at or after N, the newest item when N is
// newer than all.
func TestEventStreamStartIndex(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1, EventBufferSize: 3})
	id := nodeID(t, s, "client-1")
	var idx []uint64
	for i := range 5 {
		r, err := c.Nodes().ToggleEligibility(id, i%2 == 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, r.NodeModifyIndex)
	}
	// A buffer of 3 keeps 4 items once it has wrapped: the head is counted
	// out (advanceHead keeps the size at most 3 after the sentinel went).
	for _, tc := range []struct {
		name  string
		index uint64
		want  uint64
	}{
		{"zero", 0, idx[1]},
		{"older than the head", 1, idx[1]},
		{"after an item", idx[1] + 1, idx[2]},
		{"at an item", idx[3], idx[3]},
		{"newer than all", idx[4] + 10, idx[4]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch, err := c.EventStream().Stream(t.Context(), nodeTopic, tc.index, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := nextItem(t, ch).Index; got != tc.want {
				t.Errorf("first item at %d, want %d", got, tc.want)
			}
		})
	}
}

// An eligibility write is typed NodeDrain up to Nomad 2.0.0 and NodeEligibility
// from 2.0.1 (nomad/state/events.go MsgTypeEvents, PR #27858).
func TestEventStreamEligibilityEventType(t *testing.T) {
	for version, want := range map[string]string{"1.9.7": "NodeDrain", "1.11.3": "NodeDrain", "2.0.0": "NodeDrain", "2.0.1": "NodeEligibility"} {
		t.Run(version, func(t *testing.T) {
			s, c := newTestSim(t, Config{Clients: 1, NomadVersion: version})
			ch, err := c.EventStream().Stream(t.Context(), nodeTopic, s.Index()+1, nil)
			if err != nil {
				t.Fatal(err)
			}
			nextNodeEvent(t, ch) // the registration, sent again
			toggle(t, c, nodeID(t, s, "client-1"), 1)
			if _, ev, _ := nextNodeEvent(t, ch); ev.Type != want {
				t.Errorf("type %s, want %s", ev.Type, want)
			}
		})
	}
}

// A subscriber that falls more than the buffer's length behind is cut off with
// "event dropped from buffer": written after the stream up to 1.11.1, a closed
// connection from 1.11.2.
func TestEventStreamSlowSubscriberCutOff(t *testing.T) {
	for _, version := range []string{"1.11.1", "1.11.2"} {
		t.Run(version, func(t *testing.T) {
			s, c := newTestSim(t, Config{Clients: 1, EventBufferSize: 2, NomadVersion: version})
			if err := s.SetEventSubscriberDelay(300 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			code, body := rawStream(t, s, "?topic=Node", "")
			if code != 200 {
				t.Fatalf("status %d", code)
			}
			if line, _ := body.ReadString('\n'); line != "{}\n" {
				t.Fatalf("first line %q, want the heartbeat", line)
			}
			// While the registration is on its way, the buffer moves past it.
			toggle(t, c, nodeID(t, s, "client-1"), 4)
			rest := readRest(t, body)
			lines := strings.SplitAfter(rest, "\n")
			// The registration, unless the writes pushed it out of the buffer
			// before the subscription took it (a loaded machine), then the end.
			if len(lines) == 2 && !strings.Contains(lines[0], `"Type":"NodeRegistration"`) || len(lines) > 2 {
				t.Fatalf("stream %q, want at most the registration and then the end", rest)
			}
			want := "event dropped from buffer"
			if version == "1.11.2" {
				want = ""
			}
			if last := lines[len(lines)-1]; last != want {
				t.Errorf("after the last item %q, want %q", last, want)
			}
		})
	}
	t.Run("api client", func(t *testing.T) {
		s, c := newTestSim(t, Config{Clients: 1, EventBufferSize: 2})
		if err := s.SetEventSubscriberDelay(300 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		ch, err := c.EventStream().Stream(t.Context(), nodeTopic, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		toggle(t, c, nodeID(t, s, "client-1"), 4)
		var syntax *json.SyntaxError
		if err := streamEnd(t, ch); !errors.As(err, &syntax) {
			t.Errorf("end %v, want the client's failure to decode the error text", err)
		}
	})
}

// A subscriber that keeps up loses nothing, however many writes pass through
// the buffer.
func TestEventStreamFastSubscriberKeepsUp(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1})
	ch, err := c.EventStream().Stream(t.Context(), nodeTopic, s.Index()+1, nil)
	if err != nil {
		t.Fatal(err)
	}
	nextItem(t, ch)
	last := toggle(t, c, nodeID(t, s, "client-1"), 3*DefaultEventBufferSize)
	n := 0
	for {
		evs := nextItem(t, ch)
		n++
		if evs.Index == last {
			break
		}
	}
	if n != 3*DefaultEventBufferSize {
		t.Errorf("%d items, want %d", n, 3*DefaultEventBufferSize)
	}
}

// A silent stream (a follower cut off from the leader) sends no newer item;
// new subscriptions see its old state; when it catches up, the items published
// meanwhile follow, unless the subscription's place left the buffer.
func TestEventStreamSilent(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1, EventBufferSize: 4})
	id := nodeID(t, s, "client-1")
	before, err := c.EventStream().Stream(t.Context(), nodeTopic, s.Index()+1, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := nextItem(t, before).Index
	s.SetEventStreamSilent(true)
	idx := toggle(t, c, id, 1)
	noItem(t, before, 200*time.Millisecond)
	// A new subscription lands on the same follower: its newest item is the
	// registration.
	during, err := c.EventStream().Stream(t.Context(), nodeTopic, idx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := nextItem(t, during).Index; got != reg {
		t.Errorf("a subscription while silent starts at %d, want the follower's newest item %d", got, reg)
	}
	noItem(t, during, 100*time.Millisecond)
	if st := s.EventStream(); !st.Silent || st.Subscriptions != 2 {
		t.Errorf("state %+v", st)
	}
	s.SetEventStreamSilent(false)
	for _, ch := range []<-chan *api.Events{before, during} {
		if got := nextItem(t, ch).Index; got != idx {
			t.Errorf("after the silence: item at %d, want %d", got, idx)
		}
	}

	// Silent for longer than the buffer: the subscription is cut off when the
	// follower catches up.
	s.SetEventStreamSilent(true)
	toggle(t, c, id, 6)
	s.SetEventStreamSilent(false)
	if err := streamEnd(t, before); err == nil {
		t.Error("the stream went on past the buffer")
	}
}

// Subscriptions end when their token is deleted, or when an ACL write leaves
// their token without the right to their topics; others go on.
func TestEventStreamACLChanges(t *testing.T) {
	for _, version := range []string{"1.11.1", "1.11.2"} {
		t.Run(version, func(t *testing.T) {
			s, mgmt := newTestSim(t, Config{Clients: 1, ACL: true, NomadVersion: version})
			id := nodeID(t, s, "client-1")
			nodeRead := `node { policy = "read" }`
			for name, rules := range map[string]string{"nodes": nodeRead, "anonymous": nodeRead, "other": `agent { policy = "read" }`} {
				if _, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Rules: rules}, nil); err != nil {
					t.Fatal(err)
				}
			}
			mint := func(name string) *api.ACLToken {
				tok, _, err := mgmt.ACLTokens().Create(&api.ACLToken{Name: name, Type: "client", Policies: []string{"nodes"}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return tok
			}
			reader, doomed := mint("reader"), mint("doomed")
			sub := func(secret string) <-chan *api.Events {
				ch, err := newClient(t, s.Address(), secret).EventStream().Stream(t.Context(), nodeTopic, s.Index()+1, nil)
				if err != nil {
					t.Fatal(err)
				}
				nextItem(t, ch)
				return ch
			}
			rch, dch, mch, ach := sub(reader.SecretID), sub(doomed.SecretID), sub(s.ManagementToken()), sub("")

			// A policy write that keeps the right ends nothing.
			if _, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: "other", Rules: `agent { policy = "write" }`}, nil); err != nil {
				t.Fatal(err)
			}
			toggle(t, mgmt, id, 1)
			for _, ch := range []<-chan *api.Events{rch, dch, mch, ach} {
				nextItem(t, ch)
			}
			// Deleting a token ends its subscriptions.
			if _, err := mgmt.ACLTokens().Delete(doomed.AccessorID, nil); err != nil {
				t.Fatal(err)
			}
			end := streamEnd(t, dch)
			if version == "1.11.2" && !errors.Is(end, io.EOF) {
				t.Errorf("deleted token: %v, want the connection closed", end)
			}
			var syntax *json.SyntaxError
			if version == "1.11.1" && !errors.As(end, &syntax) {
				t.Errorf("deleted token: %v, want the error text after the stream", end)
			}
			// Taking node:read away ends the reader's, not the management
			// token's, nor the anonymous one's (checkSubscriptionsAgainstACLChange
			// skips subscriptions made without a token).
			for _, name := range []string{"nodes", "anonymous"} {
				if _, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Rules: `agent { policy = "read" }`}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := streamEnd(t, rch); err == nil {
				t.Error("the reader's stream went on without node:read")
			}
			if _, err := mgmt.Nodes().ToggleEligibility(id, true, nil); err != nil {
				t.Fatal(err)
			}
			nextItem(t, mch)
			nextItem(t, ach)
		})
	}
}

// The streaming RPC's refusals (an unknown token, a missing right, "*" without
// a management token) are 403 up to 1.11.1 and a 200 that closes at once from
// 1.11.2; the HTTP layer's 400s are the same in both.
func TestEventStreamRefusals(t *testing.T) {
	for _, version := range []string{"1.11.1", "1.11.2"} {
		t.Run(version, func(t *testing.T) {
			s := vtSim(t, Config{Clients: 1, ACL: true, NomadVersion: version})
			reader := s.CreateToken("reader", vtParsePolicy(t, "node {\n  policy = \"read\"\n}\n"))
			for _, tc := range []struct {
				name, query, token string
			}{
				{"unknown token", "?topic=Node", "00000000-0000-4000-8000-000000000000"},
				{"no node:read", "?topic=Node", ""},
				{"every topic without management", "", reader.SecretID},
				{"* without management", "?topic=*", reader.SecretID},
			} {
				code, body := rawStream(t, s, tc.query, tc.token)
				rest := readRest(t, body)
				want, wantBody := 403, "Permission denied"
				if version == "1.11.2" {
					want, wantBody = 200, ""
				}
				if code != want || rest != wantBody {
					t.Errorf("%s: %d %q, want %d %q", tc.name, code, rest, want, wantBody)
				}
			}
			if code, _ := rawStream(t, s, "?index=-x", s.ManagementToken()); code != 400 {
				t.Errorf("bad index: %d, want 400", code)
			}
			// Allowed: node:read for Node, management for everything.
			for _, tc := range []struct{ query, token string }{{"?topic=Node", reader.SecretID}, {"", s.ManagementToken()}} {
				code, body := rawStream(t, s, tc.query, tc.token)
				if line, _ := body.ReadString('\n'); code != 200 || line != "{}\n" {
					t.Errorf("%q: %d %q, want an open stream", tc.query, code, line)
				}
			}
		})
	}
}

// No topic is every topic: the node events, the only ones the emulator
// publishes. The filter pools the keys of "*" and of the event's topic.
func TestEventStreamAllTopicsAndKeys(t *testing.T) {
	s, _ := newTestSim(t, Config{Clients: 2})
	n1, n2 := nodeID(t, s, "client-1"), nodeID(t, s, "client-2")
	for _, tc := range []struct {
		name, query string
		want        []string // the keys of the items' events, in order
	}{
		{"no topic", "", []string{n1, n2}},
		{"*", "?topic=*", []string{n1, n2}},
		{"*:key", "?topic=*:" + n2, []string{n2}},
		{"Node:* and Node:key: only the key", "?topic=Node:*&topic=Node:" + n2, []string{n2}},
		{"*:* wins", "?topic=*:*&topic=Node:" + n2, []string{n1, n2}},
		{"a key twice: the event twice", "?topic=Node:" + n1 + "&topic=Node:" + n1, []string{n1 + "," + n1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := rawStream(t, s, tc.query+sep(tc.query)+"index=1", "")
			if code != 200 {
				t.Fatalf("status %d", code)
			}
			body.ReadString('\n') // heartbeat
			for _, want := range tc.want {
				line, err := body.ReadString('\n')
				if err != nil {
					t.Fatal(err)
				}
				var evs api.Events
				if err := json.Unmarshal([]byte(line), &evs); err != nil {
					t.Fatal(err)
				}
				var keys []string
				for _, ev := range evs.Events {
					keys = append(keys, ev.Key)
				}
				if got := strings.Join(keys, ","); got != want {
					t.Errorf("keys %s, want %s", got, want)
				}
			}
		})
	}
}

func sep(query string) string {
	if query == "" {
		return "?"
	}
	return "&"
}

// A snapshot restore ends every subscription; the new buffer starts empty.
func TestEventStreamSnapshotRestore(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1, NomadVersion: "1.11.1"})
	code, body := rawStream(t, s, "?topic=Node", "")
	if code != 200 {
		t.Fatalf("status %d", code)
	}
	body.ReadString('\n')
	body.ReadString('\n') // the registration
	s.RestoreSnapshot()
	if rest := readRest(t, body); rest != "subscription closed by server, client should resubscribe" {
		t.Errorf("after the restore: %q", rest)
	}
	ch, err := c.EventStream().Stream(t.Context(), nodeTopic, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	noItem(t, ch, 100*time.Millisecond) // the registration is not in the new buffer
	idx := toggle(t, c, nodeID(t, s, "client-1"), 1)
	if got := nextItem(t, ch).Index; got != idx {
		t.Errorf("item at %d, want %d", got, idx)
	}
}

// The node writes of one Raft apply (one write batch, such as the drainer's
// batch of completed drains) are one item, as Nomad publishes one per apply.
func TestEventStreamBatchIsOneItem(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2})
	ch, err := c.EventStream().Stream(t.Context(), nodeTopic, s.Index()+1, nil)
	if err != nil {
		t.Fatal(err)
	}
	nextItem(t, ch)
	s.mu.Lock()
	idx := s.cluster.writeLocked(s)
	for _, h := range []string{"client-1", "client-2"} {
		sn, _ := s.cluster.nodeOfHostLocked(h)
		s.cluster.touchNodeLocked(sn.node, idx, eventNodeDrain)
	}
	s.cluster.endBatch()
	s.mu.Unlock()
	evs := nextItem(t, ch)
	if evs.Index != idx || len(evs.Events) != 2 || evs.Events[0].Key == evs.Events[1].Key {
		t.Errorf("item %d with %d events, want one item at %d with both nodes", evs.Index, len(evs.Events), idx)
	}
}

// Servers run with enable_event_broker = false refuse a subscription with a
// 500 up to Nomad 1.11.1, and from 1.11.2 open it (200) and close it at once.
func TestEventStreamBrokerDisabled(t *testing.T) {
	t.Run("1.11.1", func(t *testing.T) {
		_, c := newTestSim(t, Config{Clients: 1, NomadVersion: "1.11.1", EventBrokerDisabled: true})
		_, err := c.EventStream().Stream(t.Context(), nodeTopic, 0, nil)
		if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "EventBroker not configured") {
			t.Fatalf("err = %v, want a 500 saying the broker is not configured", err)
		}
	})
	t.Run("1.11.2", func(t *testing.T) {
		_, c := newTestSim(t, Config{Clients: 1, NomadVersion: "1.11.2", EventBrokerDisabled: true})
		ch, err := c.EventStream().Stream(t.Context(), nodeTopic, 0, nil)
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
		ch, err := c.EventStream().Stream(t.Context(), nodeTopic, 0, nil)
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
	if _, err := New(Config{EventBufferSize: -1}); err == nil {
		t.Fatal("New with a negative event buffer size succeeded")
	}
}

// The control API shows and sets the stream's knobs and restores a snapshot.
func TestEventStreamControlAPI(t *testing.T) {
	s := vtSim(t, Config{Clients: 1})
	r := vtDo(t, s, "PUT", "/sim/v1/event-stream", "", `{"silent":true,"subscriber_delay":"50ms"}`)
	var st EventStreamState
	if err := json.Unmarshal([]byte(r.body), &st); r.code != 200 || err != nil || !st.Silent || st.SubscriberDelay != "50ms" || st.BrokerDisabled || st.BufferSize != 100 {
		t.Fatalf("set: %d %s", r.code, r.body)
	}
	r = vtDo(t, s, "PUT", "/sim/v1/event-stream?broker_disabled=true&silent=false", "", "")
	if err := json.Unmarshal([]byte(r.body), &st); r.code != 200 || err != nil || st.Silent || !st.BrokerDisabled || st.SubscriberDelay != "50ms" {
		t.Fatalf("set by query: %d %s", r.code, r.body)
	}
	if r := vtDo(t, s, "PUT", "/sim/v1/event-stream?silent=maybe", "", ""); r.code != 400 {
		t.Errorf("bad bool: %d %s", r.code, r.body)
	}
	if r := vtDo(t, s, "PUT", "/sim/v1/event-stream", "", `{"subscriber_delay":"-1s"}`); r.code != 400 {
		t.Errorf("negative delay: %d %s", r.code, r.body)
	}
	if r := vtDo(t, s, "GET", "/sim/v1/event-stream", "", ""); r.code != 200 || !strings.Contains(r.body, `"broker_disabled":true`) {
		t.Errorf("get: %d %s", r.code, r.body)
	}
	if r := vtDo(t, s, "POST", "/sim/v1/snapshot/restore", "", ""); r.code != 200 {
		t.Errorf("restore: %d %s", r.code, r.body)
	}
	var restored bool
	for _, e := range s.Events(0) {
		restored = restored || e.Type == EventSnapshotRestore
	}
	if !restored {
		t.Error("no snapshot-restore event logged")
	}
}
