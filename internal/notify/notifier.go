package notify

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// Options configure a Notifier.
type Options struct {
	Store    LedgerStore
	Targets  []*Target
	Messages Messages
	// Events are the kinds sent; the others are recorded as sent without
	// sending them. Empty: every kind.
	Events []Kind
	// Timeout bounds one send to one target (default 10s).
	Timeout time.Duration
	// Queue is how many events may wait to be sent (default 100). Events that
	// do not fit are not lost: the state still implies them, and the next pass
	// queues them again.
	Queue int
	// Retries is how many times a failed send to a target is tried again, after
	// 1s, then doubling (default 2).
	Retries  int
	Registry *prometheus.Registry // nil: metrics are not exported
	Log      *slog.Logger
}

// Notifier derives the events from the coordinator's stored state and sends
// each once. The coordinator hands it every state it reads or stores (Observe)
// and runs it for as long as it leads (Run).
type Notifier struct {
	opt     Options
	log     *slog.Logger
	metrics *metrics

	mu sync.Mutex
	// implied: the events the states observed since Run last took them imply,
	// each once, in order. Each state's events are taken, not only the newest
	// state's: a host may pass through a state (rebooting) between two takes.
	implied []Event
	seen    map[string]bool
	latest  *State // the newest state
	wake    chan struct{}
}

// State is what the events are derived from: the plans as stored after a pass,
// and the pause flag.
type State struct {
	Plans []store.Plan
	Pause Pause
	// Halts are the scopes the failure budgets halted.
	Halts []Halt
	// Freezes are the freezes in force at At (the pass's time). A state
	// with At zero says nothing of the freezes: none is taken as ended.
	Freezes []Freeze
	At      time.Time
}

// New returns a notifier.
func New(opt Options) *Notifier {
	if opt.Timeout <= 0 {
		opt.Timeout = 10 * time.Second
	}
	if opt.Queue <= 0 {
		opt.Queue = 100
	}
	if opt.Retries < 0 {
		opt.Retries = 0
	}
	n := &Notifier{opt: opt, log: opt.Log, wake: make(chan struct{}, 1), metrics: newMetrics(opt.Registry)}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	return n
}

// Observe hands the notifier a state the coordinator read or stored. It never
// blocks and does no I/O: it notes the events the state implies.
func (n *Notifier) Observe(s State) {
	evs := append(Implied(s.Plans, s.Pause), haltEvents(s.Halts)...)
	evs = append(evs, freezeEvents(s.Freezes)...)
	n.mu.Lock()
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	for _, e := range evs {
		if k := key(e); !n.seen[k] {
			n.seen[k] = true
			n.implied = append(n.implied, e)
		}
	}
	n.latest = &s
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// take returns the events noted since the last take and the newest state.
func (n *Notifier) take() ([]Event, *State) {
	n.mu.Lock()
	defer n.mu.Unlock()
	evs, s := n.implied, n.latest
	n.implied, n.seen, n.latest = nil, nil, nil
	return evs, s
}

// Run sends the events of the states observed until ctx ends (the end of this
// coordinator's term as leader). fence, when set, is asked before each send
// and stops it when this coordinator may no longer lead.
func (n *Notifier) Run(ctx context.Context, fence func(context.Context) error) {
	t := &term{n: n, queued: map[string]bool{}, todo: make(chan Event, n.opt.Queue), done: make(chan sent, n.opt.Queue)}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		n.sendLoop(ctx, fence, t.todo, t.done)
	}()
	t.run(ctx)
}

// sent is an event whose send ended (ok or not).
type sent struct {
	e  Event
	ok bool
}

// term is the notifier's state for one term as leader: the ledger as it read and
// wrote it, the events waiting for it, and the events queued and not yet sent.
type term struct {
	n      *Notifier
	ledger Ledger
	stored stored // the ledger's variables as last read or written
	loaded bool
	absent bool // the ledger does not exist: the first events are the baseline
	dirty  bool // the ledger has marks not yet stored
	// waiting: events implied and not yet queued (the queue was full, or the
	// ledger is not read yet), in order.
	waiting []Event
	queued  map[string]bool
	todo    chan Event
	done    chan sent
	state   *State // the newest state observed
}

func (t *term) run(ctx context.Context) {
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.n.wake:
			evs, s := t.n.take()
			t.add(evs)
			if s != nil {
				t.state = s
			}
		case s := <-t.done:
			delete(t.queued, key(s.e))
			t.ledger.Mark(s.e)
			t.dirty = true
		case <-retry.C:
		}
		if !t.step(ctx) {
			retry.Reset(5 * time.Second)
		}
	}
}

// add appends events to those waiting, each once.
func (t *term) add(evs []Event) {
	have := make(map[string]bool, len(t.waiting))
	for _, e := range t.waiting {
		have[key(e)] = true
	}
	for _, e := range evs {
		if !have[key(e)] {
			have[key(e)] = true
			t.waiting = append(t.waiting, e)
		}
	}
}

// step loads the ledger if needed, queues the waiting events that are neither
// sent nor queued, and stores the ledger if it changed. false: a read or write
// failed, try again later.
func (t *term) step(ctx context.Context) bool {
	if !t.loaded && !t.load(ctx) {
		return false
	}
	if t.absent {
		if t.state == nil {
			return true
		}
		// The first coordinator with notifications: what is stored now happened
		// before, only what happens from now on is sent.
		for _, e := range t.waiting {
			t.ledger.Mark(e)
		}
		t.waiting, t.absent, t.dirty = nil, false, true
		t.n.log.Info("notifications start from the current state")
	}
	if t.state != nil {
		if r, ok := resumed(t.state.Pause, t.ledger); ok {
			t.add([]Event{r})
		}
		t.add(freezesEnded(t.state.Freezes, t.state.At, t.ledger))
	}
	var left []Event
	for _, e := range t.waiting {
		switch {
		case t.ledger.Sent(e):
			continue
		case t.queued[key(e)]:
			continue
		case len(t.n.opt.Events) > 0 && !slices.Contains(t.n.opt.Events, e.Kind):
			t.ledger.Mark(e) // not wanted: recorded, never sent
			t.dirty = true
			continue
		}
		select {
		case t.todo <- e:
			t.queued[key(e)] = true
		default:
			left = append(left, e) // the queue is full: later
			t.n.metrics.queueFull.Inc()
		}
	}
	t.waiting = left
	t.n.metrics.pending.Set(float64(len(left) + len(t.queued)))
	return t.store(ctx)
}

// load reads the ledger. A ledger of version 1 (one variable) is the starting
// point of its parts, which the next store writes.
func (t *term) load(ctx context.Context) bool {
	s, err := readParts(ctx, t.n.opt.Store)
	if err != nil {
		t.n.metrics.ledgerFailures.WithLabelValues("read").Inc()
		t.n.log.Warn("notification ledger unreadable: sending nothing until it can be read", "err", err)
		return false
	}
	l, problems, err := DecodeLedger(s.items)
	if err != nil {
		t.n.metrics.ledgerFailures.WithLabelValues("read").Inc()
		t.n.log.Error("notification ledger refused: sending nothing", "err", err)
		return false
	}
	if len(problems) > 0 {
		t.n.log.Warn("notification ledger entries skipped: their events may be sent again", "problems", problems)
	}
	if _, ok := s.index[LegacyPart]; ok {
		t.n.log.Info("notification ledger of one variable found: it is moved to one variable per shard of hosts")
		t.dirty = true
	}
	t.ledger, t.stored, t.absent, t.loaded = l, s, !s.exists(), true
	return true
}

// store writes the ledger's parts that changed if it has marks not yet stored.
// On a conflict (another coordinator wrote a part: this one may no longer lead)
// it reads the ledger again and puts its marks on it.
func (t *term) store(ctx context.Context) bool {
	if !t.dirty {
		return true
	}
	if t.state != nil {
		t.ledger.Prune(t.state.Plans)
		if !t.state.At.IsZero() {
			t.ledger.PruneFreezes(t.state.Freezes)
		}
	}
	_, err := writeParts(ctx, t.n.opt.Store, t.ledger, &t.stored)
	if errors.Is(err, store.ErrConflict) {
		mine := t.ledger
		if !t.load(ctx) {
			return false
		}
		merge(&t.ledger, mine)
		_, err = writeParts(ctx, t.n.opt.Store, t.ledger, &t.stored)
	}
	if err != nil {
		if ctx.Err() == nil {
			t.n.metrics.ledgerFailures.WithLabelValues("write").Inc()
			t.n.log.Warn("notification ledger not written: will try again", "err", err)
		}
		return false
	}
	t.dirty = false
	return true
}

// merge puts the marks of mine on l.
func merge(l *Ledger, mine Ledger) {
	for host, h := range mine.Hosts {
		for _, k := range h.Kinds {
			l.Mark(Event{Kind: k, Host: host, Grant: h.Grant})
		}
		if !h.Back.IsZero() {
			l.Mark(Event{Kind: BackInService, Host: host, At: h.Back})
		}
	}
	for scope, at := range mine.Halts {
		if !l.Sent(Event{Kind: Halted, Group: scope, At: at}) {
			l.Mark(Event{Kind: Halted, Group: scope, At: at})
		}
	}
	for name, f := range mine.Freezes {
		l.Mark(Event{Kind: Frozen, Freeze: name, Group: f.Groups, At: f.Start, Until: f.Until})
		if f.Ended {
			l.Mark(Event{Kind: FreezeEnded, Freeze: name, Until: f.Until})
		}
	}
	if mine.Pause.Resumed {
		l.Mark(Event{Kind: Resumed, At: mine.Pause.At})
	} else if mine.Pause.Paused && !l.Sent(Event{Kind: Resumed, At: mine.Pause.At}) {
		l.Mark(Event{Kind: Paused, At: mine.Pause.At})
	}
}

// sendLoop sends the queued events one at a time, in order, to every target.
func (n *Notifier) sendLoop(ctx context.Context, fence func(context.Context) error, todo <-chan Event, done chan<- sent) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-todo:
			if fence != nil {
				if err := fence(ctx); err != nil {
					n.log.Warn("notification not sent: this coordinator may no longer lead", "event", string(e.Kind), "host", e.Host, "err", err)
					return
				}
			}
			ok := n.send(ctx, e)
			if ctx.Err() != nil {
				return // not recorded: the next leader sends it
			}
			select {
			case done <- sent{e: e, ok: ok}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// send renders e and sends it to every target, trying each again after a
// failure; false when some target did not get it.
func (n *Notifier) send(ctx context.Context, e Event) bool {
	msg, err := n.opt.Messages.Render(e)
	if err != nil {
		n.log.Error("notification not rendered", "event", string(e.Kind), "host", e.Host, "err", err)
		n.metrics.failures.WithLabelValues(string(e.Kind), "template").Inc()
		return false
	}
	all := true
	for _, t := range n.opt.Targets {
		err := n.sendTo(ctx, t, msg)
		if err != nil {
			all = false
			if ctx.Err() == nil {
				n.metrics.failures.WithLabelValues(string(e.Kind), t.Service).Inc()
				n.log.Warn("notification failed", "event", string(e.Kind), "host", e.Host, "target", t.Name, "err", err)
			}
			continue
		}
		n.metrics.sent.WithLabelValues(string(e.Kind), t.Service).Inc()
		n.log.Info("notification sent", "event", string(e.Kind), "host", e.Host, "target", t.Name)
	}
	return all
}

func (n *Notifier) sendTo(ctx context.Context, t *Target, msg string) error {
	wait := time.Second
	for try := 0; ; try++ {
		err := t.Send(ctx, n.opt.Timeout, msg)
		if err == nil || try >= n.opt.Retries || ctx.Err() != nil {
			return err
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
		wait *= 2
	}
}

// key identifies an event.
func key(e Event) string {
	switch e.Kind {
	case BackInService, Paused, Resumed:
		return string(e.Kind) + "/" + e.Host + "/" + e.At.UTC().Format(time.RFC3339Nano)
	case Halted:
		return string(e.Kind) + "/" + e.Group + "/" + e.At.UTC().Format(time.RFC3339Nano)
	case Frozen:
		return string(e.Kind) + "/" + e.Freeze + "/" + e.At.UTC().Format(time.RFC3339Nano)
	case FreezeEnded:
		return string(e.Kind) + "/" + e.Freeze + "/" + e.Until.UTC().Format(time.RFC3339Nano)
	}
	return string(e.Kind) + "/" + e.Host + "/" + e.Grant
}

type metrics struct {
	sent           *prometheus.CounterVec
	failures       *prometheus.CounterVec
	pending        prometheus.Gauge
	queueFull      prometheus.Counter
	ledgerFailures *prometheus.CounterVec
}

func newMetrics(reg *prometheus.Registry) *metrics {
	var r prometheus.Registerer = prometheus.NewRegistry() // not exported
	if reg != nil {
		r = reg
	}
	return &metrics{
		sent: telemetry.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollboot_notifications_sent_total",
			Help: "Notifications sent, by event and service (the notification URL's scheme).",
		}, []string{"event", "service"})),
		failures: telemetry.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollboot_notification_failures_total",
			Help: "Notifications that a target did not take after every retry (or that could not be rendered: service \"template\"), by event and service.",
		}, []string{"event", "service"})),
		pending: telemetry.Register(r, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rollboot_notifications_pending",
			Help: "Events the stored state implies that are not sent yet (queued or waiting for room in the queue).",
		})),
		queueFull: telemetry.Register(r, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "rollboot_notification_queue_full_total",
			Help: "Times an event found the send queue full (a later pass queues it again: it is not lost).",
		})),
		ledgerFailures: telemetry.Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollboot_notification_ledger_failures_total",
			Help: "Reads and writes of the notification ledger that failed, by op (read, write); each is tried again. Sending waits for a ledger that cannot be read.",
		}, []string{"op"})),
	}
}
