package coordinator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/telemetry"
	"github.com/rollboot/rollboot/internal/wave"
)

// Waves (package wave): the canaries of each group's waves go first, and a
// group starts a wave only after the groups it follows finished it. What must
// outlive a leader (the canaries and their verdicts, when a wave finished in a
// group, a canary's failure) is in <prefix>/waves, written by the coordinator
// only and read once per term:
//   - observe judges the waves from the plans (observeWaves, a read and the
//     pure wave.Observe, also run by Preview);
//   - a pass stores what changed before it admits (storeWaves): a canary's
//     failure is stored before any later host of its wave could be granted,
//     and halts its group (Halt, apply.go) until `rollboot resume -group G`,
//     after which the group's failures before the resume are forgotten and the
//     wave picks its canaries again;
//   - admission holds the hosts their wave holds (admissionInput);
//   - the hosts admitted in a tracked group are recorded in their wave, and
//     the record stored, before their grants are carried out (grantWaves): a
//     new leader knows the canaries a drain started for.
//
// When the variable cannot be read or written, every pending host of a
// tracked group that is in a wave is held, saying why (fail closed).

// waveState is the coordinator's copy of <prefix>/waves, its own writes,
// read once per term.
type waveState struct {
	loaded bool
	st     wave.State
	index  uint64
	// failures counts the canaries that failed, by group.
	failures *prometheus.CounterVec
	// logged: the error last logged, so that a pass chain logs it once.
	logged string
}

// waveView is what a pass knows of the waves.
type waveView struct {
	rules wave.Rules
	st    wave.State
	// err: the state could not be read or stored: tracked waves hold.
	err error
	// failed: the canaries this pass saw fail, stored by storeWaves.
	failed []wave.Failure
}

func newWaveFailures(reg *prometheus.Registry) *prometheus.CounterVec {
	return telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollboot_wave_canary_failures_total",
		Help: "Canaries whose cycle failed (stuck, reboot failed, drain aborted, node gone, back unhealthy), holding the rest of their wave, by group.",
	}, []string{"group"}))
}

// waveRules are the groups' wave settings.
func (c *Coordinator) waveRules() wave.Rules {
	r := wave.Rules{}
	for _, g := range c.opt.Groups {
		if w := g.Options.Wave; w.Canaries > 0 || len(w.After) > 0 {
			r[g.Name] = w
		}
	}
	return r
}

// observeWaves reads the waves once per term and judges them from the
// pass's plans (nothing stored: storeWaves does).
func (c *Coordinator) observeWaves(ctx context.Context, s *snapshot) {
	s.waves = waveView{rules: c.waveRules()}
	if !s.waves.rules.Enabled() {
		return
	}
	if !c.waves.loaded {
		items, idx, err := c.opt.Store.Waves(ctx)
		var st wave.State
		if err == nil {
			st, err = wave.FromItems(items)
		}
		if err != nil {
			s.waves.err = fmt.Errorf("read the waves: %w", err)
			return
		}
		c.waves.st, c.waves.index, c.waves.loaded = st, idx, true
	}
	st := c.waves.st
	for group := range s.waves.rules {
		if r, ok := s.halts.Resumes[group]; ok && s.haltsErr == "" {
			st = wave.Resume(st, group, r.At) // readHalts ran first (observe)
		}
	}
	s.waves.st, s.waves.failed = wave.Observe(st, s.waves.rules, waveHosts(s, s.plans), s.now)
}

// waveHosts is what package wave sees of the hosts.
func waveHosts(s *snapshot, plans map[string]store.Plan) []wave.Host {
	out := make([]wave.Host, 0, len(plans))
	for _, name := range s.names {
		hv := s.hosts[name]
		p, ok := plans[name]
		if !ok {
			continue
		}
		h := wave.Host{Name: name, Group: planGroup(p, hv.group), Plan: p}
		if hv.rec != nil && hv.rec.RebootRequired {
			h.Fingerprint = hv.rec.Fingerprint
		}
		out = append(out, h)
	}
	return out
}

// storeWaves stores what observeWaves changed, and hands the canaries that
// failed to the group's halt once stored.
func (c *Coordinator) storeWaves(ctx context.Context, s *snapshot) {
	defer func() {
		if msg := errText(s.waves.err); msg != c.waves.logged {
			c.waves.logged = msg
			if msg != "" {
				c.log.Warn("the waves cannot be read or stored: their hosts are held", "err", msg)
			}
		}
	}()
	if s.waves.err != nil || !s.waves.rules.Enabled() {
		return
	}
	if err := c.putWaves(ctx, s.waves.st); err != nil {
		s.waves.err = err
		return
	}
	for _, f := range s.waves.failed {
		c.waves.failures.WithLabelValues(f.Group).Inc()
		c.log.Warn("canary failed: its wave is held", "group", f.Group, "host", f.Host, "fingerprint", f.Fingerprint, "reason", f.Reason)
		if err := c.Halt(ctx, s, f.Group, f.String(), nil); err != nil {
			c.log.Warn("halting the group of a failed canary", "group", f.Group, "err", err)
		}
	}
}

// putWaves stores st when it differs from what is stored.
func (c *Coordinator) putWaves(ctx context.Context, st wave.State) error {
	if st.Equal(c.waves.st) {
		return nil
	}
	idx, err := c.opt.Store.PutWaves(ctx, wave.Items(st), c.waves.index)
	if err != nil {
		c.waves.loaded = false // read again: another coordinator may have written
		return fmt.Errorf("store the waves: %w", err)
	}
	c.waves.st, c.waves.index = st, idx
	return nil
}

// waveHolds says why each queued host waits for its wave, and when the
// first soak ends.
func waveHolds(s *snapshot, queue []admission.Pending) (map[string]phase.WaitReason, time.Time) {
	out, until := waveHoldsUntil(s, queue)
	var recheck time.Time
	for _, t := range until {
		recheck = phase.Earliest(recheck, t)
	}
	return out, recheck
}

// waveHoldsUntil says why each queued host waits for its wave, and until when
// for those a soak holds.
func waveHoldsUntil(s *snapshot, queue []admission.Pending) (map[string]phase.WaitReason, map[string]time.Time) {
	if !s.waves.rules.Enabled() || len(queue) == 0 {
		return nil, nil
	}
	hosts := make([]wave.Host, 0, len(queue))
	for _, p := range queue {
		h := wave.Host{Name: p.Host, Group: p.Group, Plan: s.plans[p.Host]}
		if p.Rec != nil && p.Rec.RebootRequired {
			h.Fingerprint = p.Rec.Fingerprint
		}
		hosts = append(hosts, h)
	}
	slices.SortStableFunc(hosts, func(a, b wave.Host) int {
		if c := a.Plan.RequestedAt.Compare(b.Plan.RequestedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if err := s.waves.err; err != nil {
		out := map[string]phase.WaitReason{}
		for _, h := range hosts {
			if h.Fingerprint != "" && s.waves.rules.Tracked(h.Group) {
				out[h.Name] = phase.WaitFor(phase.WaitWaveUnknown, err.Error())
			}
		}
		return out, nil
	}
	return wave.HoldsUntil(s.waves.st, s.waves.rules, hosts, s.now)
}

// grantWaves records the hosts admitted in their waves and stores the record
// before their grants are carried out; when it cannot be stored, those hosts
// are not granted, and wait saying why.
func (c *Coordinator) grantWaves(ctx context.Context, s *snapshot, adm admission.Result) admission.Result {
	if !s.waves.rules.Enabled() || len(adm.Admitted) == 0 {
		return adm
	}
	var admitted []wave.Host
	for _, h := range waveHosts(s, s.plans) {
		if adm.Admitted[h.Name] && h.Fingerprint != "" && s.waves.rules.Tracked(h.Group) {
			admitted = append(admitted, h)
		}
	}
	if len(admitted) == 0 {
		return adm
	}
	err := s.waves.err
	if err == nil {
		st, changed := wave.Grant(s.waves.st, s.waves.rules, admitted, s.now)
		if !changed {
			return adm
		}
		if err = c.putWaves(ctx, st); err == nil {
			s.waves.st = st
			return adm
		}
		s.waves.err = err
	}
	for _, h := range admitted {
		delete(adm.Admitted, h.Name)
		adm.Wait[h.Name] = phase.WaitFor(phase.WaitWaveUnknown, err.Error())
	}
	return adm
}

// waveCanaries are the hosts that are the canaries of their wave and not back
// yet, with those the grants of admitted would make canaries (for `rollboot
// plan`).
func waveCanaries(s *snapshot, admitted map[string]bool) map[string]bool {
	if !s.waves.rules.Enabled() || s.waves.err != nil {
		return nil
	}
	var hosts []wave.Host
	for _, h := range waveHosts(s, s.plans) {
		if admitted[h.Name] && h.Fingerprint != "" && s.waves.rules.Tracked(h.Group) {
			hosts = append(hosts, h)
		}
	}
	st, _ := wave.Grant(s.waves.st, s.waves.rules, hosts, s.now)
	out := map[string]bool{}
	for _, w := range st.Waves {
		for _, m := range w.Members {
			if m.Canary && m.Done.IsZero() && w.Failed == "" {
				out[m.Host] = true
			}
		}
	}
	return out
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
