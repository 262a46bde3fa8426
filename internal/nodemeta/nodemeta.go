// Package nodemeta publishes each host's rollout state as Nomad dynamic node
// metadata (/v1/client/metadata, Nomad 1.5 and later), so that Nomad's UI shows
// it and node filters select on it:
//
//	nomad node status -filter 'Meta.rollboot_phase == "stuck"'
//
// Keys: rollboot_phase (the host's phase), rollboot_reboot_required ("true" or
// "false") and rollboot_last_reboot (RFC 3339, UTC; absent until rollboot
// finished a reboot of the host); with the policy's node_meta block,
// rollboot_next ("true" on the nodes drained next, for jobs' affinities),
// rollboot_cordoned ("true" on the nodes rollboot made ineligible before their
// host's drain: node_meta.cordon_next) and
// the operator's keys (operator.go). The leading coordinator hands the publisher
// the wanted metadata after every pass; the publisher writes a node's only when
// it differs from what the node has (read once per term, then known from its
// own writes; after a failed write, written again without a read), beside the reconcile loop, so a node whose
// client does not answer (it is rebooting) never slows a pass. A failed write is
// logged, counted and tried again: as an error, or, while the host may be down
// in its reboot, as deferred. A drained host's phase is written only once it has
// lasted (Options.Settle): the host goes down as soon as its agent sees the go.
package nodemeta

import (
	"context"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// The metadata keys rollboot owns. Nomad meta keys are dotted identifiers
// (structs.NodeMetaApplyRequest.Validate); underscores keep them one segment,
// so filters need no quoting.
const (
	KeyPhase          = "rollboot_phase"
	KeyRebootRequired = "rollboot_reboot_required"
	KeyLastReboot     = "rollboot_last_reboot"
	KeyNext           = "rollboot_next"
	KeyCordoned       = "rollboot_cordoned"
)

// Meta is what rollboot publishes about one node. It is comparable: the
// publisher tells what changed with ==.
type Meta struct {
	Phase          string
	RebootRequired bool
	LastReboot     time.Time // zero: none finished by rollboot
	// Steering: node_meta.next_in_line is on, so rollboot_next is written
	// ("true" when Next: the host is next in line); off, it is removed.
	Steering, Next bool
	// Cordoning: node_meta.cordon_next is on, so rollboot_cordoned is
	// written ("true" when Cordoned: the plan of the node's host holds a
	// cordon of rollboot's); off, it is removed.
	Cordoning, Cordoned bool
	// Operator are the operator's keys (OperatorKeys), encoded (EncodeKeys).
	Operator string
}

// Items returns the metadata as Nomad applies it: a nil value removes a key.
func (m Meta) Items() map[string]*string {
	str := func(s string) *string { return &s }
	items := map[string]*string{KeyPhase: str(m.Phase), KeyRebootRequired: str("false"), KeyLastReboot: nil, KeyNext: nil, KeyCordoned: nil}
	for k, v := range decodeKeys(m.Operator) {
		items[k] = v
	}
	if m.RebootRequired {
		items[KeyRebootRequired] = str("true")
	}
	if !m.LastReboot.IsZero() {
		items[KeyLastReboot] = str(m.LastReboot.UTC().Format(time.RFC3339))
	}
	if m.Steering {
		items[KeyNext] = str(strconv.FormatBool(m.Next))
	}
	if m.Cordoning {
		items[KeyCordoned] = str(strconv.FormatBool(m.Cordoned))
	}
	return items
}

// matches reports whether the node's metadata already says m.
func (m Meta) matches(have map[string]string) bool {
	for k, v := range m.Items() {
		got, ok := have[k]
		if (v == nil) != !ok || (v != nil && *v != got) {
			return false
		}
	}
	return true
}

// API is the dynamic node metadata API; *api.NodeMeta implements it.
type API interface {
	Read(nodeID string, q *api.QueryOptions) (*api.NodeMetaResponse, error)
	Apply(req *api.NodeMetaApplyRequest, q *api.QueryOptions) (*api.NodeMetaResponse, error)
}

// Options configure a Publisher.
type Options struct {
	API API
	// Timeout bounds one read or write (default 10s): a node that is down is
	// answered for by its server, or not at all.
	Timeout time.Duration
	// Retry is how long a node whose read or write failed waits before the
	// next try (default 15s), unless the metadata wanted of it changes.
	Retry time.Duration
	// Settle is how long a node's host must have been drained before the
	// phase is written (default 15s; settles).
	Settle   time.Duration
	Registry *prometheus.Registry // nil: metrics not exported
	Log      *slog.Logger
}

// Publisher writes the wanted metadata of each node.
type Publisher struct {
	opt    Options
	log    *slog.Logger
	writes prometheus.Counter
	errs   *prometheus.CounterVec
	// deferred: failures while the host may be down in its reboot (mayBeDown).
	deferred *prometheus.CounterVec
	mu       sync.Mutex
	want     map[string]Meta // by node ID, newest
	wake     chan struct{}
	failLog  map[string]loggedFailure // by node ID: the last failure logged
}

// New returns a publisher.
func New(opt Options) *Publisher {
	if opt.Timeout <= 0 {
		opt.Timeout = 10 * time.Second
	}
	if opt.Retry <= 0 {
		opt.Retry = 15 * time.Second
	}
	if opt.Settle <= 0 {
		opt.Settle = 15 * time.Second
	}
	var reg prometheus.Registerer = prometheus.NewRegistry()
	if opt.Registry != nil {
		reg = opt.Registry
	}
	p := &Publisher{opt: opt, log: opt.Log, wake: make(chan struct{}, 1), failLog: map[string]loggedFailure{},
		writes: telemetry.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rollboot_node_meta_writes_total",
			Help: "Writes of rollboot's dynamic node metadata (only when it changed).",
		})),
		errs: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollboot_node_meta_errors_total",
			Help: "Failed reads and writes of rollboot's dynamic node metadata, by operation (read, write), but those while the host may be down in its reboot; each is tried again.",
		}, []string{"op"})),
		deferred: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollboot_node_meta_deferred_total",
			Help: "Reads and writes of rollboot's dynamic node metadata, by operation (read, write), that failed while the host may be down in its reboot (drained, rebooting, rejoining, or its node not ready); each is tried again once the host is back.",
		}, []string{"op"})),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p
}

// Observe hands the publisher the wanted metadata of every node, by node ID. It
// never blocks and does no I/O.
func (p *Publisher) Observe(want map[string]Meta) {
	p.mu.Lock()
	p.want = want
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run writes what is wanted until ctx ends (the end of this coordinator's term
// as leader). fence, when set, is asked before each write.
func (p *Publisher) Run(ctx context.Context, fence func(context.Context) error) {
	have := map[string]Meta{}    // what each node was read or written to say, this term
	next := map[string]failure{} // a node whose read or write failed: not before, unless its metadata changed
	// blind: the nodes whose last write failed. What they say is not known
	// (the write may have landed), but they need no read before the next
	// write, which sets every key rollboot owns whatever is there: a read
	// would only spare a write the failed one already made, and the nodes
	// whose writes fail are those of hosts down in their reboot, each a
	// request the servers forward to a client that is not there.
	blind := map[string]bool{}
	drained := map[string]time.Time{} // a node whose host is drained: since when (settles)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-timer.C:
		}
		p.mu.Lock()
		want := p.want
		p.mu.Unlock()
		wait := time.Duration(0)
		// Only the nodes to write are sorted (in order, so that a log reads
		// well): sorting every node at every wake would sort the whole cluster
		// for the few nodes that changed.
		var todo []string
		for id, m := range want {
			if h, ok := have[id]; !ok || h != m {
				todo = append(todo, id)
			}
		}
		slices.Sort(todo)
		now := time.Now()
		trackDrained(drained, want, now)
		for _, id := range todo {
			if ctx.Err() != nil {
				return
			}
			if left := p.settling(drained, id, now); left > 0 {
				wait = minPositive(wait, left)
				continue
			}
			if f, ok := next[id]; ok && f.want == want[id] && time.Now().Before(f.retry) {
				wait = minPositive(wait, time.Until(f.retry))
				continue
			}
			_, known := have[id]
			wrote, err := p.sync(ctx, fence, id, want[id], known || blind[id])
			if err != nil {
				next[id] = failure{retry: time.Now().Add(p.opt.Retry), want: want[id]}
				wait = minPositive(wait, p.opt.Retry)
				delete(have, id)
				if wrote {
					blind[id] = true
				}
				continue
			}
			delete(next, id)
			delete(blind, id)
			have[id] = want[id]
		}
		if wait > 0 {
			timer.Reset(wait)
		}
	}
}

// A drained host goes down as soon as its agent sees the go, unless it holds
// first (pre-reboot hooks, a delay, a hold at its go/no-go): a write of
// "drained" forwarded to its client races the shutdown, and mostly fails
// with "No path to node", a request and a forwarded RPC for nothing. So the
// phase is written only once the host has been drained for Settle: a host
// that reboots at once keeps showing "draining" until it is back, and one
// that holds shows "drained" after Settle.

// trackDrained keeps, in since, when each node wanted drained (want) was
// first seen so, and forgets the others.
func trackDrained(since map[string]time.Time, want map[string]Meta, now time.Time) {
	for id := range since {
		if want[id].Phase != store.PhaseDrained {
			delete(since, id)
		}
	}
	for id, m := range want {
		if _, ok := since[id]; !ok && m.Phase == store.PhaseDrained {
			since[id] = now
		}
	}
}

// settling is how long the node must still wait before its drained phase is
// written (0: it may be written now, or it is not drained).
func (p *Publisher) settling(since map[string]time.Time, id string, now time.Time) time.Duration {
	t, ok := since[id]
	if !ok {
		return 0
	}
	return max(0, t.Add(p.opt.Settle).Sub(now))
}

// failure is a node whose read or write failed: it is tried again at retry, or
// at once when the metadata wanted of it is no longer want (its host moved on:
// a node that did not answer while its host rebooted is written as soon as the
// host is back, not a retry interval later).
type failure struct {
	retry time.Time
	want  Meta
}

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}

// sync writes m to the node's metadata. Unless noRead (this term read or wrote
// what the node says, and it is not m; or its last write failed), it reads the
// node's metadata first and writes only if it differs: a new leader finds the
// nodes as earlier terms left them, and rewrites none of them. A node this
// term knows is written without a read: a write sets every key rollboot owns,
// whatever was there, and each read is a request the servers forward to the
// node's client, one per phase a host goes through. wrote: the error is the
// write's.
func (p *Publisher) sync(ctx context.Context, fence func(context.Context) error, nodeID string, m Meta, noRead bool) (wrote bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, p.opt.Timeout)
	defer cancel()
	if !noRead {
		cur, err := p.opt.API.Read(nodeID, (&api.QueryOptions{}).WithContext(rctx))
		if err != nil {
			// A rebooting host's client does not answer (Nomad: "No path
			// to node"): expected, so not a warning at every reboot.
			return false, p.failed(ctx, nodeID, "read", err)
		}
		if m.matches(cur.Meta) {
			p.ok(nodeID)
			return false, nil
		}
	}
	if fence != nil {
		if err := fence(ctx); err != nil {
			return false, err
		}
	}
	if _, err := p.opt.API.Apply(&api.NodeMetaApplyRequest{NodeID: nodeID, Meta: m.Items()}, (&api.QueryOptions{}).WithContext(rctx)); err != nil {
		return true, p.failed(ctx, nodeID, "write", err)
	}
	p.writes.Inc()
	p.ok(nodeID)
	p.log.Debug("node metadata written", "node_id", nodeID, "phase", m.Phase, "reboot_required", m.RebootRequired)
	return true, nil
}

// mayBeDown reports whether a node whose newest wanted metadata (Observe) is
// m, if wanted at all, may be down by now, going down or booting. The newest,
// not the one its round started from: a round writes its nodes one after the
// other, and while it does, hosts it has not come to yet are granted their
// reboot and go down. A drained host is one of them (its agent reboots it at
// once, before the coordinator's next pass records it rebooting), and so is a
// rejoining one, whose client may not have reconnected yet
// (store.PhaseDrained, PhaseRebooting, PhaseRejoining). A node no longer wanted
// is not ready (Observe's caller).
func mayBeDown(m Meta, wanted bool) bool {
	if !wanted {
		return true
	}
	switch m.Phase {
	case "drained", "rebooting", "rejoining":
		return true
	}
	return false
}

// failed counts a failed read or write of a node's metadata and logs it once
// per error: as an error and a warning, or, when the host may be down in its
// reboot (expected: its client is down), as deferred and at debug level. Every
// reboot defers a write or two (the drained host goes down as its phase is
// written), so an alert on the errors would fire at every rollout if they
// counted those.
func (p *Publisher) failed(ctx context.Context, nodeID, op string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	m, wanted := p.wanted(nodeID)
	down := mayBeDown(m, wanted)
	if down {
		p.deferred.WithLabelValues(op).Inc()
	} else {
		p.errs.WithLabelValues(op).Inc()
	}
	// Logged when the error changes, not at every retry of a node that is down.
	if p.failLog[nodeID].err != err.Error() {
		level := slog.LevelWarn
		if down {
			level = slog.LevelDebug
		}
		p.failLog[nodeID] = loggedFailure{err: err.Error(), level: level}
		p.log.Log(ctx, level, "node metadata not published: will try again", "node_id", nodeID, "phase", m.Phase, "op", op, "err", err)
	}
	return err
}

// loggedFailure is the last failure logged of a node, and at which level.
type loggedFailure struct {
	err   string
	level slog.Level
}

// ok notes a node published: one whose failure was logged is logged again, at
// the same level (an expected failure's end is no news either).
func (p *Publisher) ok(nodeID string) {
	if f, ok := p.failLog[nodeID]; ok {
		delete(p.failLog, nodeID)
		p.log.Log(context.Background(), f.level, "node metadata published again", "node_id", nodeID)
	}
}

// wanted is the newest metadata wanted of the node (Observe), if any.
func (p *Publisher) wanted(nodeID string) (Meta, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.want[nodeID]
	return m, ok
}
