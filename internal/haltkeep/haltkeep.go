// Package haltkeep keeps the failure budgets' halt state (<prefix>/halts) for
// the leading coordinator: read while its watch saw a change, written with the
// failures and halts a pass decides, logged and exported as metrics.
package haltkeep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/notify"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/telemetry"
	"github.com/rollboot/rollboot/internal/watched"
)

// The failure budgets (package policy, halt.go). The failures are the pass's
// own decisions (phase.Decision.Failure), never a host's claim. A decision
// that fails a cycle is carried out only after the failure is stored in the
// halt state (<prefix>/halts, store/halts.go), in the same write as the halts
// it causes: a coordinator killed in between decides the same failure again
// in its next pass (a failure is recorded once per host, grant and kind), and
// a failure is never lost behind a plan that forgot the cycle. A halt state
// that cannot be written leaves those decisions for the next pass. So the halt
// is in place before the slot the failure frees is handed out in the same pass.
//
// The halt state is read when its watch saw it change (a resume written by
// `rollboot resume`, the coordinator's own write), at the start of each term,
// and at every pass while the last read failed. While it cannot be read, no
// drain starts (admission.HaltHold): any scope may be halted. A halt holds
// until it is resumed, whatever the policy says since (a budget removed from
// it lifts nothing).

// Store reads and writes the halt state; *store.Store implements it.
type Store interface {
	Halts(ctx context.Context) (policy.HaltState, uint64, error)
	PutHalts(ctx context.Context, st policy.HaltState, index uint64) (uint64, error)
}

// Pass is the halt state as one pass holds it: the state and its variable's
// index, or Err, why it cannot be read ("" when it can).
type Pass struct {
	State policy.HaltState
	Index uint64
	Err   string
}

// read is the halt state as a pass read it.
type read struct {
	st    policy.HaltState
	index uint64
}

// Keeper is the failure budgets' state across passes, the pass goroutine's.
type Keeper struct {
	store   Store
	log     *slog.Logger
	read    watched.Kept[read]
	metrics metrics
	// logged: the scopes last logged as halted.
	logged map[string]bool
	// notified: the halts stored, for the notifier.
	notified []notify.Halt
	// readErr: why the halt state could not be read when last logged ("":
	// it could).
	readErr string
}

// metrics are the failure budgets' series.
type metrics struct {
	halted   *prometheus.GaugeVec
	failures *prometheus.CounterVec
}

// New returns a keeper of the halt state in st, its series registered on reg.
func New(st Store, reg prometheus.Registerer, log *slog.Logger) *Keeper {
	return &Keeper{store: st, log: log, metrics: metrics{
		halted: telemetry.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rollboot_halted",
			Help: "1 while the scope (a group's name, or \"rollout\" for the whole rollout) is halted by its failure budget, until `rollboot resume`; absent when it is not."}, []string{"scope"})),
		failures: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollboot_cycle_failures_total",
			Help: "Cycles that failed, by group and kind (stuck, reboot_failed, unhealthy, drain_aborted), as the failure budgets count them."}, []string{"group", "kind"})),
	}}
}

// scopeLabel is a scope as the metric labels it.
func scopeLabel(scope string) string {
	if scope == policy.RolloutScope {
		return "rollout"
	}
	return scope
}

// Read returns the halt state for a pass: as kept while its watch (live, at
// generation gen) saw no change, else read. A read that fails sets Err:
// admission holds every host.
func (k *Keeper) Read(ctx context.Context, gen uint64, live bool) Pass {
	if r, ok := k.read.Get(gen, live); ok {
		return Pass{State: r.st, Index: r.index}
	}
	st, idx, err := k.store.Halts(ctx)
	if err != nil {
		if k.readErr != err.Error() {
			k.log.Warn("halt state cannot be read: no new drain starts until it can", "err", err)
		}
		k.readErr = err.Error()
		return Pass{Err: err.Error()}
	}
	k.readErr = ""
	k.read.Keep(gen, read{st: st, index: idx})
	return Pass{State: st, Index: idx}
}

// Record stores the failures fs a pass decided, with the halts they cause
// under budgets, and reports whether the decisions that fail those cycles may
// be carried out now: yes once the write succeeded or nothing needed writing,
// no when it failed (the next pass decides them again). p, the pass's halt
// state at the watch's generation gen, becomes the one written at now.
func (k *Keeper) Record(ctx context.Context, gen uint64, p *Pass, budgets policy.FailureBudgets, fs []policy.Failure, now time.Time) (bool, error) {
	for _, f := range fs {
		k.metrics.failures.WithLabelValues(f.Group, string(f.Kind)).Inc()
	}
	if !budgets.On() || len(fs) == 0 {
		return true, nil
	}
	if p.Err != "" {
		// Admission holds every host meanwhile; the hosts out finish their
		// cycles.
		k.log.Warn("failed cycles not counted: the halt state cannot be read", "failures", len(fs), "err", p.Err)
		return true, nil
	}
	next, changed := policy.Record(budgets, p.State, fs, now)
	if !changed {
		return true, nil
	}
	if err := k.put(ctx, gen, p, next); err != nil {
		return false, fmt.Errorf("record %d failed cycles: %w", len(fs), err)
	}
	return true, nil
}

// Halt halts group for reason at now, naming the hosts whose cycles
// made it (a canary that failed, say), as the failure budget does: no new
// drain of the group starts until `rollboot resume -group G`. A group already
// halted stays as it is.
func (k *Keeper) Halt(ctx context.Context, gen uint64, p *Pass, group, reason string, hosts []policy.Failure, now time.Time) error {
	if p.Err != "" {
		return errors.New("the halt state cannot be read: " + p.Err)
	}
	next, changed := policy.HaltGroup(p.State, group, reason, hosts, now)
	if !changed {
		return nil
	}
	if err := k.put(ctx, gen, p, next); err != nil {
		return fmt.Errorf("halt group %q: %w", group, err)
	}
	return nil
}

// put stores next over p with check-and-set and keeps it; a write that fails
// makes the next pass read the state again (a resume may have been written).
func (k *Keeper) put(ctx context.Context, gen uint64, p *Pass, next policy.HaltState) error {
	idx, err := k.store.PutHalts(ctx, next, p.Index)
	if err != nil {
		k.read.Forget()
		return err
	}
	p.State, p.Index = next, idx
	k.read.Keep(gen, read{st: next, index: idx})
	k.Log(*p)
	return nil
}

// FailureOf is the failure d decides for its host's cycle, counted in group.
func FailureOf(in phase.Input, d phase.Decision, group string) policy.Failure {
	p := in.Plan
	detail := d.Plan.LastError
	switch {
	case d.History != nil && d.History.Error != "":
		detail = d.History.Error
	case d.Unhealthy != "":
		detail = d.Unhealthy
	}
	return policy.Failure{Host: p.Host, Group: group, Grant: p.GrantID, Kind: d.Failure, At: in.Now,
		Detail: store.CleanText(detail)}
}

// Log logs each scope that turned halted or was resumed since the last log,
// and sets the halted metric; a halt state that could not be read changes
// neither.
func (k *Keeper) Log(p Pass) {
	if p.Err != "" {
		return
	}
	if k.logged == nil {
		k.logged = map[string]bool{}
	}
	var scopes []string
	for scope := range p.State.Halts {
		scopes = append(scopes, scope)
	}
	sort.Strings(scopes)
	k.metrics.halted.Reset()
	k.notified = nil
	for _, scope := range scopes {
		h := p.State.Halts[scope]
		k.notified = append(k.notified, notify.Halt{Scope: scope, Since: h.Since, Text: h.Text()})
		k.metrics.halted.WithLabelValues(scopeLabel(scope)).Set(1)
		if !k.logged[scope] {
			k.log.Warn("halted: no new drain starts until rollboot resume", "scope", policy.ScopeName(scope), "reason", h.Text())
		}
	}
	for scope := range k.logged {
		if _, ok := p.State.Halts[scope]; !ok {
			k.log.Info("halt lifted", "scope", policy.ScopeName(scope))
		}
	}
	k.logged = map[string]bool{}
	for _, scope := range scopes {
		k.logged[scope] = true
	}
}

// Notified are the halts last logged, as the notifier takes them.
func (k *Keeper) Notified() []notify.Halt { return k.notified }

// EndTerm forgets what this term read and logged: the next term reads the
// halt state again and logs every halt anew.
func (k *Keeper) EndTerm() {
	k.read.Forget()
	k.metrics.halted.Reset()
	k.logged, k.notified, k.readErr = nil, nil, ""
}

// List are the halts of st, the rollout's first, then by group.
func List(st policy.HaltState) []policy.Halt {
	var out []policy.Halt
	for _, h := range st.Halts {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scope < out[j].Scope })
	return out
}
