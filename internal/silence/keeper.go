package silence

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// API is what the keeper asks of Alertmanager; *HTTP implements it.
type API interface {
	Create(ctx context.Context, host string, ms []Matcher, now, endsAt time.Time) (string, error)
	Extend(ctx context.Context, id string, endsAt time.Time) (string, error)
	End(ctx context.Context, id string) error
}

// StateStore keeps the silences in rollboot's state, one item per host;
// *store.Store implements it.
type StateStore interface {
	Silences(ctx context.Context) (map[string]string, uint64, error)
	PutSilences(ctx context.Context, items map[string]string, modifyIndex uint64) (uint64, error)
}

// Decode decodes the silences kept from their stored items. An item that does
// not decode is left out (its silence runs out by itself) and named in the
// error.
func Decode(items map[string]string) (map[string]Kept, error) {
	out := make(map[string]Kept, len(items))
	var errs []error
	for host, item := range items {
		var k Kept
		if err := json.Unmarshal([]byte(item), &k); err != nil {
			errs = append(errs, fmt.Errorf("the silence kept for %s does not decode: %v", host, err))
			continue
		}
		out[host] = k
	}
	return out, errors.Join(errs...)
}

// encode is Decode's inverse.
func encode(kept map[string]Kept) map[string]string {
	out := make(map[string]string, len(kept))
	for host, k := range kept {
		b, _ := json.Marshal(k) // a struct of strings and times
		out[host] = string(b)
	}
	return out
}

// State is what the coordinator hands the keeper after a pass.
type State struct {
	Plans map[string]store.Plan
	// Rules are a group's silence settings.
	Rules func(group string) Rules
	// AlertmanagerURL and Timeout: where silences are written (the policy's
	// alerts.alertmanager_url and alerts.timeout).
	AlertmanagerURL string
	Timeout         time.Duration
}

// Options configure a Keeper.
type Options struct {
	Store StateStore
	// NewAPI returns the client of an Alertmanager (default: *HTTP).
	NewAPI   func(url string, timeout time.Duration) API
	Registry *prometheus.Registry // nil: metrics not exported
	Log      *slog.Logger
	Now      func() time.Time
	// Retry is how long after a failed write it is tried again (default 15s).
	Retry time.Duration
}

// Keeper keeps each host's silence as Desired says, while its coordinator
// leads. A failed write never holds the rollout: it is logged, counted
// (rollboot_silence_write_failures_total) and kept in the state with the
// silence, where `rollboot status` shows it, and tried again.
type Keeper struct {
	opt      Options
	log      *slog.Logger
	failures *prometheus.CounterVec
	active   prometheus.Gauge
	wake     chan struct{}
	mu       sync.Mutex
	latest   *State
}

// New returns a keeper.
func New(opt Options) *Keeper {
	if opt.NewAPI == nil {
		opt.NewAPI = func(u string, t time.Duration) API { return &HTTP{URL: u, Timeout: t} }
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Retry <= 0 {
		opt.Retry = 15 * time.Second
	}
	var reg prometheus.Registerer = prometheus.NewRegistry()
	if opt.Registry != nil {
		reg = opt.Registry
	}
	k := &Keeper{opt: opt, log: opt.Log, wake: make(chan struct{}, 1),
		failures: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rollboot_silence_write_failures_total",
			Help: "Failed writes of the Alertmanager silences kept for hosts out for their reboot, by operation (create, extend, end); each is tried again, and none holds the rollout.",
		}, []string{"op"})),
		active: telemetry.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rollboot_silences",
			Help: "Alertmanager silences the leading coordinator keeps for hosts out for their reboot (or in their tail).",
		})),
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	return k
}

// Observe hands the keeper the state after a pass. It never blocks.
func (k *Keeper) Observe(s State) {
	k.mu.Lock()
	k.latest = &s
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// Run keeps the silences until ctx ends (the end of this coordinator's term).
// fence, when set, is asked before each write and stops the keeper when this
// coordinator may no longer lead.
func (k *Keeper) Run(ctx context.Context, fence func(context.Context) error) {
	t := &keeperTerm{k: k, fence: fence}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-k.wake:
		case <-timer.C:
		}
		next, ok := t.step(ctx)
		if !ok {
			return
		}
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(max(next.Sub(k.opt.Now()), 0))
		}
	}
}

// keeperTerm is the keeper's state for one term as leader.
type keeperTerm struct {
	k      *Keeper
	fence  func(context.Context) error
	loaded bool
	kept   map[string]Kept
	index  uint64
	// dirty: kept holds writes to Alertmanager not stored yet (the store
	// failed): they are stored at the next step, so that no silence's ID is
	// lost while this term lasts.
	dirty bool
}

// step loads the silences kept (once a term, and after a conflict), decides,
// writes, and stores what it wrote; it returns when to step again, and false
// when this coordinator may no longer lead.
func (t *keeperTerm) step(ctx context.Context) (time.Time, bool) {
	k := t.k
	k.mu.Lock()
	s := k.latest
	k.mu.Unlock()
	now := k.opt.Now()
	if s == nil {
		return time.Time{}, true
	}
	if !t.loaded {
		items, idx, err := k.opt.Store.Silences(ctx)
		if err != nil {
			k.log.Warn("read the silences kept", "err", err)
			return now.Add(k.opt.Retry), true
		}
		kept, err := Decode(items)
		if err != nil {
			k.log.Warn("silences kept left out", "err", err)
		}
		t.kept, t.index, t.loaded = kept, idx, true
		k.active.Set(float64(len(kept)))
	}
	d := Desired(Input{Plans: s.Plans, Rules: s.Rules, Kept: t.kept, Retry: k.opt.Retry, Now: now})
	if len(d.Actions) == 0 && !t.dirty {
		return d.RecheckAt, true
	}
	if t.fence != nil {
		if err := t.fence(ctx); err != nil {
			return time.Time{}, false
		}
	}
	after := maps.Clone(t.kept)
	failed := false
	api := k.opt.NewAPI(s.AlertmanagerURL, s.Timeout)
	for _, a := range d.Actions {
		failed = t.apply(ctx, api, a, after, now) || failed
	}
	idx, err := k.opt.Store.PutSilences(ctx, encode(after), t.index)
	switch {
	case errors.Is(err, store.ErrConflict):
		t.loaded = false // another leader wrote: read again
		return now, true
	case err != nil:
		k.log.Warn("store the silences kept", "err", err)
		t.kept, t.dirty = after, true
		return now.Add(k.opt.Retry), true
	}
	t.kept, t.index, t.dirty = after, idx, false
	k.active.Set(float64(len(after)))
	next := d.RecheckAt
	if retry := now.Add(k.opt.Retry); failed && (next.IsZero() || retry.Before(next)) {
		next = retry
	}
	if !failed {
		next = now // decide again at once: a write may make another due
	}
	return next, true
}

// apply carries out one action on Alertmanager and records its outcome in
// kept; it reports whether it failed.
func (t *keeperTerm) apply(ctx context.Context, api API, a Action, kept map[string]Kept, now time.Time) bool {
	var err error
	k := kept[a.Host]
	switch a.Op {
	case OpForget:
		delete(kept, a.Host)
		return false
	case OpCreate:
		err = a.Err
		if err == nil {
			var id string
			if id, err = api.Create(ctx, a.Host, a.Matchers, now, a.EndsAt); err == nil {
				k = Kept{ID: id, EndsAt: a.EndsAt}
			}
		}
	case OpExtend:
		var id string
		id, err = api.Extend(ctx, a.ID, a.EndsAt)
		switch {
		case errors.Is(err, errGone):
			delete(kept, a.Host) // created again while the host is out, else forgotten
			return false
		case err == nil:
			k = Kept{ID: id, EndsAt: a.EndsAt}
		}
	case OpEnd:
		if err = api.End(ctx, a.ID); err == nil {
			delete(kept, a.Host)
			return false
		}
	}
	if err != nil {
		t.k.failures.WithLabelValues(string(a.Op)).Inc()
		t.k.log.Warn("silence write failed", "host", a.Host, "op", string(a.Op), "err", err)
		k.Err, k.ErrAt = string(a.Op)+": "+err.Error(), now
	}
	kept[a.Host] = k
	return err != nil
}
