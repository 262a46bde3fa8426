package nomadsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// The event stream: GET /v1/event/stream (docs/emulator.md, "Fidelity to
// Nomad", has a row for each behaviour below and for what is not modelled).
//
// Publishing. For each Raft apply whose message type has an event type
// (nomad/state/events.go MsgTypeEvents), the state store publishes one item
// holding one event per changed row; a node row gives an event of topic Node,
// keyed by the node ID, whose payload is the node after the write
// (eventFromChange, "nodes" table; Node.Sanitize drops the secret ID, which
// api.Node does not carry). The emulator publishes the Node topic alone: its
// other writes (allocations, jobs, ACL objects, ...) add no item, so its buffer
// fills more slowly than Nomad's, where every topic shares it.
//
// The buffer (nomad/stream/event_buffer.go eventBuffer). A linked list that
// starts with an empty sentinel item. Append links the item after the tail,
// counts it, and while the count is above event_buffer_size (default 100;
// event_broker.go NewEventBroker) drops the head (advanceHead), closing the
// dropped item's droppedCh; only then does it wake the readers of the old tail
// (its nextCh). A subscription holds the last item it took; its Next waits for
// that item's successor and fails with "event dropped from buffer" when its own
// item left the buffer meanwhile (bufferItem.Next checks droppedCh after
// nextCh), so a subscriber that falls more than the buffer's length behind is cut
// off (Subscription.Next returns the error, nomad/event_endpoint.go
// Event.stream sends it as the stream's last message and returns).
//
// Where a subscription starts (event_broker.go Subscribe,
// event_buffer.go StartAtClosest): at index 0 at the buffer's head; at N at the
// first item whose index is N or more, at the head when N is older than it, and
// at the newest item when N is newer than every item (so that item is sent
// again).
//
// Filtering (nomad/stream/subscription.go filter, eventMatchesKey): the "*"
// topic's keys and the event's topic's keys are pooled; a lone "*" matches every
// event, otherwise the event is kept once for every key equal to its key (a node
// event has no FilterKeys). An item with no event left is skipped.
//
// The HTTP endpoint (command/agent/event_endpoint.go EventStream,
// nomad/stream/ndjson.go): newline-delimited JSON, a heartbeat {} at once and
// every 30 s, {"Index":N,"Events":[...]} for each item kept. Without any topic
// parameter it subscribes to every topic ("*":"*", parseEventTopics allTopics).
// Errors before the stream (the streaming RPC's: an unknown token, an ACL
// refusal, no broker) are a plain HTTP error up to Nomad 1.11.1; from 1.11.2 the
// handler hijacks the connection and writes 200 before the RPC runs, so they
// show as a stream that ends at once. An error that ends a running stream
// ("event dropped from buffer", "subscription closed by server, client should
// resubscribe") is written after the last item by the agent's error path
// (command/agent/http.go wrap) up to 1.11.1, where it is text the client cannot
// decode; from 1.11.2 the connection just closes.
//
// ACL (nomad/event_endpoint.go Event.stream: Authenticate, then ResolveACL and
// validateACL, validateNsOp, from Nomad 1.9.6 and 1.10.0, PRs #24849 and
// #25089; from 1.0 to 1.9.5 the broker's SubscribeWithACLCheck and
// aclAllowsSubscription in nomad/stream/event_broker.go made the same checks,
// having replaced aclCheckForEvents in PR #9447): topic Node needs node:read,
// "*" (or a topic validateNsOp does not list) a management token; an unknown
// token is 403 Permission denied. While the
// subscription runs, the broker re-checks it on ACL writes
// (event_broker.go handleACLUpdates): a deleted token's subscriptions end
// (subscriptions.closeSubscriptionsForTokens); a token update, a policy or role
// write ends those whose token no longer authenticates or no longer allows its
// topics (closeSubscriptionFunc, checkSubscriptionsAgainstACLChange, which skips
// subscriptions made without a token). A snapshot restore replaces the state
// store and stops its broker, which closes every subscription (nomad/fsm.go
// restoreImpl → StateStore.Abandon → StopEventBroker; EventBroker.handleUpdates
// closeAll), and the new store's buffer starts empty.
//
// The stream is served from the state of the server that receives it and is not
// forwarded to the leader (Event.stream forwards only to another region), so a
// follower cut off from the leader serves a stream whose heartbeats go on and
// whose items stop (SetEventStreamSilent).

// The event types of node writes (nomad/structs/event.go), by the message type
// of the write (nomad/state/events.go MsgTypeEvents): Node.Register (a client's
// registration, and its updates of meta, class and resources), a status update
// (NodeUpdateStatusRequestType; also the node events a client sends,
// UpsertNodeEventsType), a drain update (also the drainer's batch when drains
// complete). An eligibility update is typed NodeDrain up to Nomad 2.0.0 and
// NodeEligibility from 2.0.1 (nodeEligibilityEventType).
const (
	eventNodeRegistration = "NodeRegistration"
	eventNodeStatus       = "NodeStreamEvent"
	eventNodeDrain        = "NodeDrain"
	eventNodeEligibility  = "NodeEligibility"
)

// nodeEligibilityEventType is the event type of an eligibility write
// (NodeUpdateEligibilityRequestType in nomad/state/events.go MsgTypeEvents):
// TypeNodeDrain up to 2.0.0, TypeNodeEligibilityUpdate from 2.0.1 (PR #27858,
// "event stream: fix node eligibility update event type", backported to 2.0.1).
func (s *Sim) nodeEligibilityEventType() string {
	if versionAtLeast(s.cfg.NomadVersion, "2.0.1") {
		return eventNodeEligibility
	}
	return eventNodeDrain
}

// DefaultEventBufferSize is Nomad's default event_buffer_size.
const DefaultEventBufferSize = 100

// streamHeartbeat is nomad/stream/ndjson.go's heartbeat interval as the
// streaming RPC uses it (Event.stream: NewJsonStream(ctx, 30*time.Second)).
const streamHeartbeat = 30 * time.Second

// streamWriteTimeout is the deadline of each write of the HTTP endpoint from
// Nomad 1.11.2 (command/agent/event_endpoint.go deadlineWriter, writeTimeout:
// the heartbeat interval plus 10 s): a client that reads nothing for that long
// is cut off.
const streamWriteTimeout = 40 * time.Second

// The errors that end a running subscription (nomad/stream/event_buffer.go
// bufferItem.Next, subscription.go ErrSubscriptionClosed).
const (
	errStreamDropped = "event dropped from buffer"
	errStreamClosed  = "subscription closed by server, client should resubscribe"
)

// streamEvent is one event of an item: the key it is filtered by and the
// encoded api.Event.
type streamEvent struct {
	key string
	raw json.RawMessage
}

// streamItem is one item of the buffer: the events of one Raft apply.
type streamItem struct {
	seq    uint64 // order of publication; 0 for a sentinel
	index  uint64
	events []streamEvent // nil: a sentinel

	// next is set before nextCh is closed and never changes after.
	next      *streamItem
	nextCh    chan struct{}
	droppedCh chan struct{} // closed when the item leaves the buffer
}

func newStreamItem() *streamItem {
	return &streamItem{nextCh: make(chan struct{}), droppedCh: make(chan struct{})}
}

// eventBroker is the servers' event broker: the buffer and the open
// subscriptions. Guarded by Sim.mu; a subscription follows the items without
// the lock, through their channels.
type eventBroker struct {
	head, tail *streamItem
	size, max  int
	seq        uint64 // of the newest item published
	// pending collects the node events of the current write batch, one Raft
	// apply (clusterState.writeLocked): published as one item at its end.
	pending *streamItem
	subs    map[*subscription]struct{}
	// eligibilityType: the event type of an eligibility write, by the Nomad
	// version the emulator follows (nodeEligibilityEventType).
	eligibilityType string
}

func newEventBroker(max int, eligibilityType string) *eventBroker {
	it := newStreamItem()
	return &eventBroker{head: it, tail: it, max: max, subs: map[*subscription]struct{}{}, eligibilityType: eligibilityType}
}

// appendLocked publishes it (eventBuffer.appendItem and advanceHead).
func (b *eventBroker) appendLocked(it *streamItem) {
	b.seq++
	it.seq = b.seq
	old := b.tail
	old.next = it
	b.tail = it
	b.size++
	for b.size > b.max {
		b.dropHeadLocked()
	}
	close(old.nextCh)
}

func (b *eventBroker) dropHeadLocked() {
	old := b.head
	next := old.next
	if next == nil {
		next = newStreamItem()
	}
	close(old.droppedCh)
	b.head = next
	if old == b.tail {
		b.tail = next
	}
	if b.size > 0 {
		b.size--
	}
}

// flushLocked publishes the pending item of a write batch.
func (b *eventBroker) flushLocked() {
	if b.pending != nil {
		it := b.pending
		b.pending = nil
		b.appendLocked(it)
	}
}

// startLocked is the item a subscription at index starts at (Subscribe,
// StartAtClosest), among the items the serving servers have: those published
// before seq hidden (0: all).
func (b *eventBroker) startLocked(index, hidden uint64) *streamItem {
	it := b.head
	if index == 0 || index <= it.index {
		return it
	}
	for {
		prev := it
		it = it.next
		if it == nil || (hidden != 0 && it.seq >= hidden) {
			return prev
		}
		if index <= it.index {
			return it
		}
	}
}

// nodeEventLocked publishes the node as written at idx, with the event type of
// the write. Writes of one batch (one Raft apply, such as the drainer's batch of
// drains completed) make one item, as in Nomad.
func (c *clusterState) nodeEventLocked(n *api.Node, idx uint64, typ string) {
	if typ == eventNodeEligibility {
		typ = c.stream.eligibilityType // the write's kind, labelled as the version does
	}
	raw, err := json.Marshal(api.Event{Topic: api.TopicNode, Type: typ, Key: n.ID, Index: idx,
		Payload: map[string]any{"Node": n}})
	if err != nil {
		panic(err)
	}
	b := c.stream
	if b.pending != nil && b.pending.index != idx {
		b.flushLocked()
	}
	it := b.pending
	if it == nil {
		it = newStreamItem()
		it.index = idx
	}
	it.events = append(it.events, streamEvent{key: n.ID, raw: raw})
	if c.batchIdx != 0 && c.batchIdx == idx {
		b.pending = it // published at the end of the batch (endBatch)
		return
	}
	b.pending = nil
	b.appendLocked(it)
}

// subscription is one open stream (nomad/stream/subscription.go Subscription).
type subscription struct {
	cur    *streamItem         // the last item taken
	topics map[string][]string // topic → keys
	// secret is the token's secret ("" without one); allowed re-checks, with
	// Sim.mu held, that it still authenticates and may read the topics.
	secret  string
	allowed func() bool

	closed    chan struct{} // closed by closeLocked (forceClose)
	closeOnce sync.Once
}

func (sub *subscription) closeLocked() { sub.closeOnce.Do(func() { close(sub.closed) }) }

// copies is how many times the subscription keeps an event of topic and key
// (subscription.go filter).
func (sub *subscription) copies(topic, key string) int {
	all := sub.topics["*"]
	if len(all) == 1 && all[0] == "*" {
		return 1
	}
	keys := append(append([]string(nil), all...), sub.topics[topic]...)
	if len(keys) == 1 && keys[0] == "*" {
		return 1
	}
	n := 0
	for _, k := range keys {
		if k == key {
			n++
		}
	}
	return n
}

// line is the ndjson line of it for the subscription, or nil when no event of
// it is kept.
func (sub *subscription) line(it *streamItem) []byte {
	var out []byte
	for _, ev := range it.events {
		for range sub.copies(string(api.TopicNode), ev.key) {
			if out == nil {
				out = fmt.Appendf(nil, `{"Index":%d,"Events":[`, it.index)
			} else {
				out = append(out, ',')
			}
			out = append(out, ev.raw...)
		}
	}
	if out != nil {
		out = append(out, "]}\n"...)
	}
	return out
}

// streamControl holds the test knobs of the stream (SetEventStreamSilent,
// SetEventSubscriberDelay), which open subscriptions read without Sim.mu.
type streamControl struct {
	mu sync.Mutex
	// hidden: while the stream is silent, the seq of the first item the
	// serving servers do not have (0: not silent).
	hidden uint64
	delay  time.Duration
	// changed is closed and replaced at every change.
	changed chan struct{}
	// dropped counts the subscriptions cut off for falling more than the
	// buffer's length behind.
	dropped atomic.Int64
}

func (sc *streamControl) get() (hidden uint64, delay time.Duration, changed <-chan struct{}) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.changed == nil {
		sc.changed = make(chan struct{})
	}
	return sc.hidden, sc.delay, sc.changed
}

func (sc *streamControl) set(f func()) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	f()
	if sc.changed != nil {
		close(sc.changed)
	}
	sc.changed = make(chan struct{})
}

func (s *Sim) registerEventRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/event/stream", methods(s.handleEventStream, http.MethodGet))
}

// parseEventTopics is command/agent/event_endpoint.go parseEventTopics and
// parseTopic: no topic parameter is every topic; "T" is "T:*"; more than one
// colon is a 400. The emulator publishes the Node topic only, so it refuses a
// subscription to any other named topic rather than leave it silent where
// Nomad would send events; "*" (every topic) gets the node events.
func parseEventTopics(q url.Values) (map[string][]string, error) {
	raw, ok := q["topic"]
	if !ok {
		return map[string][]string{"*": {"*"}}, nil
	}
	topics := map[string][]string{}
	for _, t := range raw {
		parts := strings.Split(t, ":")
		var topic, key string
		switch len(parts) {
		case 1:
			topic, key = t, "*"
		case 2:
			topic, key = parts[0], parts[1]
		default:
			return nil, fmt.Errorf("error parsing topics: Invalid key value pair for topic, topic: %s", t)
		}
		if topic != string(api.TopicNode) && topic != "*" {
			return nil, fmt.Errorf("the emulator models the Node topic only (and * for every topic), not %q", topic)
		}
		topics[topic] = append(topics[topic], key)
	}
	return topics, nil
}

// streamAllowed is validateNsOp for the topics the emulator serves: Node needs
// node:read, "*" a management token (its default case). The namespace does not
// matter to either.
func streamAllowed(t *Token, topics map[string][]string) bool {
	for topic := range topics {
		switch topic {
		case string(api.TopicNode):
			if !t.AllowNode(false) {
				return false
			}
		default:
			if !t.Management {
				return false
			}
		}
	}
	return true
}

// streamRPCError answers a subscription the streaming RPC refused
// (nomad/event_endpoint.go Event.stream: handleJsonResultError with 403 or 500,
// such as "EventBroker not configured" from state_store.go EventBroker when the
// servers run with enable_event_broker = false). Up to Nomad 1.11.1 the HTTP
// handler (command/agent/event_endpoint.go EventStream) waits for the RPC's
// first answer and turns the error into that status; from 1.11.2 it has
// written 200 and its headers before the RPC runs, so the caller sees a stream
// that opens and closes at once with no item in it.
func (s *Sim) streamRPCError(w http.ResponseWriter, code int, msg string) {
	if !versionAtLeast(s.cfg.NomadVersion, "1.11.2") {
		simhttp.WriteError(w, code, msg)
		return
	}
	w.Header().Set("Connection", "close") // the hijacked connection is closed
	w.WriteHeader(http.StatusOK)
}

// subscribeLocked is Event.stream up to EventBroker.Subscribe: the token, the
// ACL, the broker. It returns the subscription, or the RPC's error.
func (s *Sim) subscribeLocked(r *http.Request, topics map[string][]string, index uint64) (*subscription, int, string) {
	secret := requestSecret(r)
	t, err := s.tokenForSecretLocked(secret)
	if err != nil {
		return nil, http.StatusForbidden, "Permission denied"
	}
	if !streamAllowed(t, topics) {
		return nil, http.StatusForbidden, "Permission denied"
	}
	if s.brokerOff.Load() {
		return nil, http.StatusInternalServerError, "EventBroker not configured"
	}
	hidden, _, _ := s.stream.get()
	b := s.cluster.stream
	start := newStreamItem()
	start.next = b.startLocked(index, hidden)
	close(start.nextCh)
	sub := &subscription{cur: start, topics: topics, secret: secret, closed: make(chan struct{})}
	if s.acl.enabled {
		sub.allowed = func() bool {
			t, err := s.tokenForSecretLocked(secret)
			return err == nil && streamAllowed(t, topics)
		}
	}
	b.subs[sub] = struct{}{}
	return sub, 0, ""
}

func (s *Sim) unsubscribe(sub *subscription) {
	s.mu.Lock()
	delete(s.cluster.stream.subs, sub)
	s.mu.Unlock()
}

// aclChangedLocked re-checks the open subscriptions after an ACL write
// (event_broker.go handleACLUpdates): a deleted token's subscriptions end; after
// a token update (secret set) those of that token, after a policy write (secret
// "") those of every token but the empty one, end when they are no longer
// allowed.
func (s *Sim) aclChangedLocked(secret string, deleted bool) {
	for sub := range s.cluster.stream.subs {
		switch {
		case sub.allowed == nil:
		case deleted:
			if sub.secret == secret {
				sub.closeLocked()
			}
		case secret != "" && sub.secret != secret:
		case sub.secret == "":
		case !sub.allowed():
			sub.closeLocked()
		}
	}
}

// parseStreamIndex is EventStream's strconv.Atoi of ?index= (a negative index
// becomes a huge one when the RPC converts it, uint64(args.Index)).
func parseStreamIndex(v string) (uint64, error) {
	if v == "" {
		v = "0"
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, err
	}
	return uint64(n), nil
}

func (s *Sim) handleEventStream(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	index, err := parseStreamIndex(q.Get("index"))
	if err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "Unable to parse index: "+err.Error())
		return
	}
	topics, err := parseEventTopics(q)
	if err != nil {
		simhttp.WriteError(w, http.StatusBadRequest, "Invalid topic query: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	s.mu.Lock()
	sub, code, msg := s.subscribeLocked(r, topics, index)
	s.mu.Unlock()
	if sub == nil {
		s.streamRPCError(w, code, msg)
		return
	}
	defer s.unsubscribe(sub)
	s.serveSubscription(w, r, sub)
}

// serveSubscription writes the subscription's heartbeats and items until the
// caller goes, the emulator closes or the subscription ends with an error.
func (s *Sim) serveSubscription(w http.ResponseWriter, r *http.Request, sub *subscription) {
	newer := versionAtLeast(s.cfg.NomadVersion, "1.11.2")
	rc := http.NewResponseController(w)
	send := func(b []byte) bool {
		if newer {
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		}
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	end := func(msg string) {
		if !newer {
			send([]byte(msg)) // wrap writes the RPC's error after the stream
		}
	}
	if newer {
		// Nomad 1.11.2 writes the stream on the hijacked connection and closes
		// it at the end; the write deadline must not outlive the stream.
		w.Header().Set("Connection", "close")
		defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	}
	w.WriteHeader(http.StatusOK)
	if !send([]byte("{}\n")) {
		return
	}
	beat := time.NewTicker(streamHeartbeat)
	defer beat.Stop()
	rt := requestTimer(r.Context())
	wait := func(slept time.Time) {
		if rt != nil {
			rt.waited += time.Since(slept)
		}
	}
	for {
		hidden, delay, changed := s.stream.get()
		// While the stream is silent, the item after the current one may be
		// one the serving servers do not have: wait for the silence to end.
		nextCh := sub.cur.nextCh
		select {
		case <-nextCh:
			if hidden != 0 && sub.cur.next.seq >= hidden {
				nextCh = nil
			}
		default:
		}
		slept := time.Now()
		select {
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			return
		case <-sub.closed:
			end(errStreamClosed)
			return
		case <-beat.C:
			wait(slept)
			if !send([]byte("{}\n")) {
				return
			}
			continue
		case <-changed:
			wait(slept)
			continue
		case <-nextCh:
			wait(slept)
		}
		select {
		case <-sub.closed:
			end(errStreamClosed)
			return
		case <-sub.cur.droppedCh:
			s.stream.dropped.Add(1)
			end(errStreamDropped)
			return
		default:
		}
		if hidden != 0 && sub.cur.next.seq >= hidden {
			continue
		}
		sub.cur = sub.cur.next
		line := sub.line(sub.cur)
		if line == nil {
			continue
		}
		if delay > 0 {
			// A slow subscriber: the item reaches its client delay later.
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			case <-s.ctx.Done():
				t.Stop()
				return
			}
			wait(time.Now().Add(-delay))
		}
		if !send(line) {
			return
		}
	}
}

// SetEventBrokerDisabled turns the event broker off (as servers restarted
// with enable_event_broker = false) or on again. Subscriptions already open go
// on until they end.
func (s *Sim) SetEventBrokerDisabled(off bool) { s.brokerOff.Store(off) }

// SetEventStreamSilent makes every event stream silent, as one served by a
// follower cut off from the leader: its state stops at the last write it
// applied, so its subscriptions send heartbeats and no newer item, and new ones
// start from that state. Turned off, the follower catches up: the subscriptions
// go on with the items published meanwhile, and one whose current item left the
// buffer meanwhile ends with "event dropped from buffer". The emulator does not
// model which server serves a stream, so all are silent.
func (s *Sim) SetEventStreamSilent(silent bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := s.cluster.stream.seq + 1
	s.stream.set(func() {
		switch {
		case !silent:
			s.stream.hidden = 0
		case s.stream.hidden == 0:
			s.stream.hidden = seq
		}
	})
	s.eventLocked(Event{Type: EventStreamSilent, Details: map[string]string{"silent": strconv.FormatBool(silent)}})
}

// SetEventSubscriberDelay makes every subscriber slow (0: as fast as it can): each
// item reaches its client d after the subscription took it from the buffer, so
// one that falls more than the buffer's length behind the writes is cut off
// with "event dropped from buffer", as Nomad cuts off a subscriber that reads
// too slowly.
func (s *Sim) SetEventSubscriberDelay(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("subscriber delay %v: must not be negative", d)
	}
	s.stream.set(func() { s.stream.delay = d })
	return nil
}

// EventStreamState is the event stream's state as the control API shows it.
type EventStreamState struct {
	BrokerDisabled  bool   `json:"broker_disabled"`
	Silent          bool   `json:"silent"`
	SubscriberDelay string `json:"subscriber_delay"`
	BufferSize      int    `json:"buffer_size"`
	Subscriptions   int    `json:"subscriptions"`
	// Dropped: the subscriptions cut off so far for reading too slowly
	// ("event dropped from buffer").
	Dropped int64 `json:"dropped"`
}

// EventStream returns the event stream's state.
func (s *Sim) EventStream() EventStreamState {
	s.mu.Lock()
	n := len(s.cluster.stream.subs)
	s.mu.Unlock()
	hidden, delay, _ := s.stream.get()
	return EventStreamState{BrokerDisabled: s.brokerOff.Load(), Silent: hidden != 0,
		SubscriberDelay: delay.String(), BufferSize: s.cfg.EventBufferSize, Subscriptions: n, Dropped: s.stream.dropped.Load()}
}

// RestoreSnapshot models the servers restoring a snapshot of their state (a
// follower installing the leader's snapshot, `nomad operator snapshot restore`)
// as far as the event stream sees it: the restore replaces the state store and
// stops the old one's broker, which ends every subscription with "subscription
// closed by server, client should resubscribe", and the new broker's buffer
// starts empty. The restored state is the current one: nothing else changes.
func (s *Sim) RestoreSnapshot() {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cluster.stream
	old.flushLocked()
	for sub := range old.subs {
		sub.closeLocked()
	}
	s.cluster.stream = newEventBroker(s.cfg.EventBufferSize, s.nodeEligibilityEventType())
	s.eventLocked(Event{Type: EventSnapshotRestore})
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
