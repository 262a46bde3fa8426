package nomadsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// The event stream, for the Node topic: GET /v1/event/stream.
//
// Nomad publishes, for each Raft apply whose message type has an event type
// (nomad/state/events.go MsgTypeEvents), one event per changed row; a node row
// gives an event of topic Node, keyed by the node ID, whose payload is the node
// after the write (eventFromChange, "nodes" table; Node.Sanitize drops the secret
// ID, which api.Node does not carry). The broker appends them to a buffer of
// event_buffer_size items (default 100; nomad/stream/event_buffer.go): a linked
// list whose head is dropped as it grows, while a subscriber that holds an
// older item still follows it to the newest, so a slow subscriber loses nothing.
// A subscription at index 0 starts at the buffer's head, at index N at the
// first item at or after N, or at the head when N is older than it
// (event_broker.go Subscribe, event_buffer.go StartAtClosest). The HTTP endpoint
// (command/agent/event_endpoint.go EventStream, nomad/stream/ndjson.go) answers
// 200 at once and writes newline-delimited JSON: a heartbeat {} first and every
// 30 s, and {"Index":N,"Events":[...]} for each item with an event of a topic
// asked for ("topic=Node" or "topic=Node:*": every node; "topic=Node:<id>": one).
// The Node topic needs node:read (nomad/event_endpoint.go aclCheckForEvents).
//
// The emulator models the Node topic alone; asking for another topic is a 400
// that says so. One difference: a Raft apply that writes several nodes (a drain
// batch) gives one item per node here, each with the apply's index, where Nomad
// gives one item with all of them.

// The event types of node writes (nomad/structs/event.go), by the message type
// of the write (nomad/state/events.go MsgTypeEvents): Node.Register (a client's
// registration, and its updates of meta, class and resources), a status update
// (heartbeats: NodeUpdateStatusRequestType), an eligibility update, a drain
// update (also the drainer's batch when a drain completes).
const (
	eventNodeRegistration = "NodeRegistration"
	eventNodeStatus       = "NodeStreamEvent"
	eventNodeEligibility  = "NodeEligibility"
	eventNodeDrain        = "NodeDrain"
)

// eventBufferSize is Nomad's default event_buffer_size.
const eventBufferSize = 100

// streamHeartbeat is nomad/stream/ndjson.go's heartbeat interval as the HTTP
// endpoint uses it (NewJsonStream(ctx, 30*time.Second)).
const streamHeartbeat = 30 * time.Second

// streamItem is one item of the event buffer: the events of one write, encoded.
type streamItem struct {
	index uint64
	key   string          // the node ID
	raw   json.RawMessage // the api.Event
	next  *streamItem
	ready chan struct{} // closed once next is set
}

// eventBuffer is the broker's buffer; guarded by Sim.mu.
type eventBuffer struct {
	head, tail *streamItem // tail: the newest item's successor to be (no event)
	size       int
}

// tailLocked returns the item the next event will fill.
func (b *eventBuffer) tailLocked() *streamItem {
	if b.tail == nil {
		b.tail = &streamItem{ready: make(chan struct{})}
		b.head = b.tail
	}
	return b.tail
}

// nodeEventLocked publishes the node as written at idx, with the event type of
// the write (nomad/structs/event.go TypeNode*).
func (c *clusterState) nodeEventLocked(n *api.Node, idx uint64, typ string) {
	raw, err := json.Marshal(api.Event{Topic: api.TopicNode, Type: typ, Key: n.ID, Index: idx,
		Payload: map[string]any{"Node": n}})
	if err != nil {
		panic(err)
	}
	b := &c.events
	it := b.tailLocked()
	it.index, it.key, it.raw = idx, n.ID, raw
	it.next = &streamItem{ready: make(chan struct{})}
	b.tail = it.next
	close(it.ready)
	b.size++
	for b.size > eventBufferSize {
		b.head = b.head.next
		b.size--
	}
}

// startLocked returns the item a subscription at index starts at.
func (b *eventBuffer) startLocked(index uint64) *streamItem {
	it := b.tailLocked()
	if b.head != nil {
		it = b.head
	}
	for index > 0 && it.next != nil && it.index < index {
		it = it.next
	}
	return it
}

func (s *Sim) registerEventRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/event/stream", methods(s.handleEventStream, http.MethodGet))
}

// parseNodeTopics is parseEventTopics for the Node topic: the node IDs asked for
// (nil: every node).
func parseNodeTopics(q []string) (all bool, keys map[string]bool, err error) {
	if len(q) == 0 {
		return false, nil, fmt.Errorf("the emulator models the Node topic only: ask for topic=Node")
	}
	keys = map[string]bool{}
	for _, t := range q {
		topic, key, ok := strings.Cut(t, ":")
		if !ok {
			key = "*"
		}
		if topic != string(api.TopicNode) {
			return false, nil, fmt.Errorf("the emulator models the Node topic only, not %q", topic)
		}
		if key == "*" {
			all = true
		}
		keys[key] = true
	}
	return all, keys, nil
}

func (s *Sim) handleEventStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	index := uint64(0)
	if v := q.Get("index"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			simhttp.WriteError(w, http.StatusBadRequest, "Unable to parse index: "+err.Error())
			return
		}
		index = n
	}
	all, keys, err := parseNodeTopics(q["topic"])
	if err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "Invalid topic query: "+err.Error())
		return
	}
	if s.brokerOff.Load() {
		s.brokerDisabled(w)
		return
	}
	if s.authorize(w, r, func(t *Token) bool { return t.AllowNode(false) }) == nil {
		return
	}
	s.mu.Lock()
	it := s.cluster.events.startLocked(index)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	send := func(b []byte) bool {
		if _, err := w.Write(b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if !send([]byte("{}\n")) {
		return
	}
	beat := time.NewTicker(streamHeartbeat)
	defer beat.Stop()
	rt := requestTimer(r.Context())
	for {
		slept := time.Now()
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		case <-beat.C:
			if rt != nil {
				rt.waited += time.Since(slept)
			}
			if !send([]byte("{}\n")) {
				return
			}
			continue
		case <-it.ready:
		}
		if rt != nil {
			rt.waited += time.Since(slept)
		}
		if (all || keys[it.key]) && it.index >= index {
			line := fmt.Appendf(nil, `{"Index":%d,"Events":[%s]}`+"\n", it.index, it.raw)
			if !send(line) {
				return
			}
		}
		it = it.next
	}
}

// SetEventBrokerDisabled turns the event broker off (as servers restarted
// with enable_event_broker = false) or on again. Subscriptions already open go
// on until they end.
func (s *Sim) SetEventBrokerDisabled(off bool) { s.brokerOff.Store(off) }

// brokerDisabled answers a stream request to servers run with
// enable_event_broker = false. The streaming RPC (nomad/event_endpoint.go
// Event.stream) fails with "EventBroker not configured". Up to Nomad 1.11.1
// the HTTP handler (command/agent/event_endpoint.go EventStream) waited for the
// RPC's first answer and turned that error into a 500; from 1.11.2 it writes
// the 200 and its headers before the RPC runs, so the caller sees a stream that
// opens and closes at once with no item in it.
func (s *Sim) brokerDisabled(w http.ResponseWriter) {
	if !versionAtLeast(s.cfg.NomadVersion, "1.11.2") {
		simhttp.WriteError(w, http.StatusInternalServerError, "EventBroker not configured")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
}

// versionAtLeast reports whether the Nomad version v is min or newer (a
// version that does not parse counts as the newest).
func versionAtLeast(v, min string) bool {
	have, err := version.NewVersion(v)
	if err != nil {
		return true
	}
	return !have.LessThan(version.Must(version.NewVersion(min)))
}
