package coordinator

import (
	"context"
	"errors"
	"fmt"
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
// is in place before the slot the failure frees is handed out in the same pass
// (regrant.go).
//
// The halt state is read when its watch saw it change (a resume written by
// `rollboot resume`, the coordinator's own write), at the start of each term,
// and at every pass while the last read failed. While it cannot be read, no
// drain starts (admission.HaltHold): any scope may be halted. A halt holds
// until it is resumed, whatever the policy says since (a budget removed from
// it lifts nothing).

// haltsRead is the halt state as a pass read it.
type haltsRead struct {
	st    policy.HaltState
	index uint64
}

// haltState is the failure budgets' state across passes.
type haltState struct {
	read    watched.Kept[haltsRead]
	metrics *haltMetrics
	// logged: the scopes last logged as halted.
	logged map[string]bool
	// notified: the halts stored, for the notifier (sideoutputs.go).
	notified []notify.Halt
	// readErr: why the halt state could not be read when last logged ("":
	// it could).
	readErr string
}

// haltMetrics are the failure budgets' series.
type haltMetrics struct {
	halted   *prometheus.GaugeVec
	failures *prometheus.CounterVec
}

func newHaltMetrics(reg prometheus.Registerer) *haltMetrics {
	return &haltMetrics{
		halted: telemetry.Register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "rollboot_halted",
			Help: "1 while the scope (a group's name, or \"rollout\" for the whole rollout) is halted by its failure budget, until `rollboot resume`; absent when it is not."}, []string{"scope"})),
		failures: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollboot_cycle_failures_total",
			Help: "Cycles that failed, by group and kind (stuck, reboot_failed, unhealthy, drain_aborted), as the failure budgets count them."}, []string{"group", "kind"})),
	}
}

// scopeLabel is a scope as the metric labels it.
func scopeLabel(scope string) string {
	if scope == policy.RolloutScope {
		return "rollout"
	}
	return scope
}

// watchHalts follows the halt state for the passes: a change (a resume, the
// coordinator's own write) makes the next pass read it again.
func (c *Coordinator) watchHalts(ctx context.Context, idx uint64) (uint64, error) {
	n, err := c.opt.Store.WatchHalts(ctx, idx, 5*time.Minute)
	c.mail.update(func(a *answers) {
		if err != nil {
			a.halts.Failed() // passes read it themselves
			return
		}
		a.halts.Answered(n, struct{}{}, n != idx)
	})
	return n, err
}

// readHalts puts the halt state in s: as kept while its watch saw no change,
// else read. A read that fails leaves s.haltsErr set: admission holds every
// host.
func (c *Coordinator) readHalts(ctx context.Context, s *snapshot) {
	w := c.seen.halts
	if r, ok := c.halts.read.Get(w.Gen, w.Live); ok {
		s.halts, s.haltsIndex = r.st, r.index
		return
	}
	st, idx, err := c.opt.Store.Halts(ctx)
	if err != nil {
		s.haltsErr = err.Error()
		if c.halts.readErr != s.haltsErr {
			c.log.Warn("halt state cannot be read: no new drain starts until it can", "err", err)
		}
		c.halts.readErr = s.haltsErr
		return
	}
	c.halts.readErr = ""
	s.halts, s.haltsIndex = st, idx
	c.halts.read.Keep(w.Gen, haltsRead{st: st, index: idx})
}

// recordFailures stores the failures of the decisions in failing, with the
// halts they cause, and returns the decisions that may be carried out now: all
// of them once the write succeeded, none when it failed (the next pass decides
// them again). s's halt state is the one written.
func (c *Coordinator) recordFailures(ctx context.Context, s *snapshot, failing []pendingWrite) ([]pendingWrite, error) {
	if len(failing) == 0 {
		return nil, nil
	}
	var fs []policy.Failure
	for _, w := range failing {
		f := failureOf(w.in, w.d)
		c.halts.metrics.failures.WithLabelValues(f.Group, string(f.Kind)).Inc()
		fs = append(fs, f)
	}
	if !c.opt.FailureBudgets.On() {
		return failing, nil
	}
	if s.haltsErr != "" {
		// Admission holds every host meanwhile; the hosts out finish their
		// cycles.
		c.log.Warn("failed cycles not counted: the halt state cannot be read", "failures", len(fs), "err", s.haltsErr)
		return failing, nil
	}
	next, changed := policy.Record(c.opt.FailureBudgets, s.halts, fs, s.now)
	if !changed {
		return failing, nil
	}
	wctx, cancel := c.stepContext(ctx)
	defer cancel()
	idx, err := c.opt.Store.PutHalts(wctx, next, s.haltsIndex)
	if err != nil {
		c.halts.read.Forget() // read again: a resume may have been written
		return nil, fmt.Errorf("record %d failed cycles: %w", len(fs), err)
	}
	s.halts, s.haltsIndex = next, idx
	c.halts.read.Keep(c.seen.halts.Gen, haltsRead{st: next, index: idx})
	c.logHalts(s)
	return failing, nil
}

// failureOf is the failure d decides for its host's cycle.
func failureOf(in phase.Input, d phase.Decision) policy.Failure {
	p := in.Plan
	detail := d.Plan.LastError
	switch {
	case d.History != nil && d.History.Error != "":
		detail = d.History.Error
	case d.Unhealthy != "":
		detail = d.Unhealthy
	}
	return policy.Failure{Host: p.Host, Group: planGroup(p, in.Group), Grant: p.GrantID, Kind: d.Failure, At: in.Now,
		Detail: store.CleanText(detail)}
}

// logHalts logs each scope that turned halted or was resumed since the last
// log, and sets the halted metric; a halt state that could not be read
// changes neither.
func (c *Coordinator) logHalts(s *snapshot) {
	if s.haltsErr != "" {
		return
	}
	if c.halts.logged == nil {
		c.halts.logged = map[string]bool{}
	}
	var scopes []string
	for scope := range s.halts.Halts {
		scopes = append(scopes, scope)
	}
	sort.Strings(scopes)
	c.halts.metrics.halted.Reset()
	c.halts.notified = nil
	for _, scope := range scopes {
		h := s.halts.Halts[scope]
		c.halts.notified = append(c.halts.notified, notify.Halt{Scope: scope, Since: h.Since, Text: h.Text()})
		c.halts.metrics.halted.WithLabelValues(scopeLabel(scope)).Set(1)
		if !c.halts.logged[scope] {
			c.log.Warn("halted: no new drain starts until rollboot resume", "scope", policy.ScopeName(scope), "reason", h.Text())
		}
	}
	for scope := range c.halts.logged {
		if _, ok := s.halts.Halts[scope]; !ok {
			c.log.Info("halt lifted", "scope", policy.ScopeName(scope))
		}
	}
	c.halts.logged = map[string]bool{}
	for _, scope := range scopes {
		c.halts.logged[scope] = true
	}
}

// haltList are the halts of st, the rollout's first, then by group.
func haltList(st policy.HaltState) []policy.Halt {
	var out []policy.Halt
	for _, h := range st.Halts {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Scope < out[j].Scope })
	return out
}

// Halt halts group for reason, naming the hosts whose cycles made it (a
// canary that failed, say), as the failure budget does: no new drain of the
// group starts until `rollboot resume -group G`. A group already halted stays
// as it is. Called from the pass's goroutine, with the pass's snapshot.
func (c *Coordinator) Halt(ctx context.Context, s *snapshot, group, reason string, hosts []policy.Failure) error {
	if s.haltsErr != "" {
		return errors.New("the halt state cannot be read: " + s.haltsErr)
	}
	next, changed := policy.HaltGroup(s.halts, group, reason, hosts, s.now)
	if !changed {
		return nil
	}
	idx, err := c.opt.Store.PutHalts(ctx, next, s.haltsIndex)
	if err != nil {
		c.halts.read.Forget()
		return fmt.Errorf("halt group %q: %w", group, err)
	}
	s.halts, s.haltsIndex = next, idx
	c.halts.read.Keep(c.seen.halts.Gen, haltsRead{st: next, index: idx})
	c.logHalts(s)
	return nil
}
