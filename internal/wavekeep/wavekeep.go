// Package wavekeep keeps package wave's state (<prefix>/waves) for the leading
// coordinator: read once per term, stored before the grants it records, and
// failing closed (every tracked wave's hosts held) when it cannot be read or
// stored.
package wavekeep

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/telemetry"
	"github.com/rollboot/rollboot/internal/wave"
)

// Waves (package wave): the canaries of each group's waves go first, and a
// group starts a wave only after the groups it follows finished it. What must
// outlive a leader (the canaries and their verdicts, when a wave finished in a
// group, a canary's failure) is in <prefix>/waves, written by the coordinator
// only and read once per term:
//   - observe judges the waves from the plans (Observe: a read and the pure
//     wave.Observe, also run by a preview);
//   - a pass stores what changed before it admits (Store): a canary's failure
//     is stored before any later host of its wave could be granted, and halts
//     its group until `rollboot resume -group G`, after which the group's
//     failures before the resume are forgotten and the wave picks its
//     canaries again;
//   - admission holds the hosts their wave holds (Holds);
//   - the hosts admitted in a tracked group are recorded in their wave, and
//     the record stored, before their grants are carried out (Grant): a new
//     leader knows the canaries a drain started for.
//
// When the variable cannot be read or written, every pending host of a
// tracked group that is in a wave is held, saying why (fail closed).

// Store reads and writes <prefix>/waves; *store.Store implements it.
type Store interface {
	Waves(ctx context.Context) (map[string]string, uint64, error)
	PutWaves(ctx context.Context, items map[string]string, modifyIndex uint64) (uint64, error)
}

// Keeper is the coordinator's copy of <prefix>/waves, its own writes, read
// once per term; the pass goroutine's.
type Keeper struct {
	store  Store
	log    *slog.Logger
	loaded bool
	st     wave.State
	index  uint64
	// failures counts the canaries that failed, by group.
	failures *prometheus.CounterVec
	// logged: the error last logged, so that a pass chain logs it once.
	logged string
}

// View is what a pass knows of the waves.
type View struct {
	Rules wave.Rules
	State wave.State
	// Err: the state could not be read or stored: tracked waves hold.
	Err error
	// Failed: the canaries this pass saw fail, stored by Store.
	Failed []wave.Failure
}

// New returns a keeper of the waves in st, its series registered on reg.
func New(st Store, reg prometheus.Registerer, log *slog.Logger) *Keeper {
	return &Keeper{store: st, log: log, failures: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollboot_wave_canary_failures_total",
		Help: "Canaries whose cycle failed (stuck, reboot failed, drain aborted, node gone, back unhealthy), holding the rest of their wave, by group.",
	}, []string{"group"}))}
}

// EndTerm makes the next term read the waves again.
func (k *Keeper) EndTerm() { k.loaded = false }

// Observe reads the waves once per term and judges them from hosts (asked
// only when some group has waves), after forgetting the failures of each
// group resumed since (resumes: the halt state's, nil when it cannot be
// read). Nothing is stored: Store does.
func (k *Keeper) Observe(ctx context.Context, rules wave.Rules, resumes map[string]policy.Resume, hosts func() []wave.Host, now time.Time) View {
	v := View{Rules: rules}
	if !rules.Enabled() {
		return v
	}
	if !k.loaded {
		items, idx, err := k.store.Waves(ctx)
		var st wave.State
		if err == nil {
			st, err = wave.FromItems(items)
		}
		if err != nil {
			v.Err = fmt.Errorf("read the waves: %w", err)
			return v
		}
		k.st, k.index, k.loaded = st, idx, true
	}
	st := k.st
	for group := range rules {
		if r, ok := resumes[group]; ok {
			st = wave.Resume(st, group, r.At)
		}
	}
	v.State, v.Failed = wave.Observe(st, rules, hosts(), now)
	return v
}

// Store stores what Observe changed, and hands each canary that failed to
// halt (its group, the reason) once stored.
func (k *Keeper) Store(ctx context.Context, v *View, halt func(group, reason string) error) {
	defer func() {
		if msg := errText(v.Err); msg != k.logged {
			k.logged = msg
			if msg != "" {
				k.log.Warn("the waves cannot be read or stored: their hosts are held", "err", msg)
			}
		}
	}()
	if v.Err != nil || !v.Rules.Enabled() {
		return
	}
	if err := k.put(ctx, v.State); err != nil {
		v.Err = err
		return
	}
	for _, f := range v.Failed {
		k.failures.WithLabelValues(f.Group).Inc()
		k.log.Warn("canary failed: its wave is held", "group", f.Group, "host", f.Host, "fingerprint", f.Fingerprint, "reason", f.Reason)
		if err := halt(f.Group, f.String()); err != nil {
			k.log.Warn("halting the group of a failed canary", "group", f.Group, "err", err)
		}
	}
}

// put stores st when it differs from what is stored.
func (k *Keeper) put(ctx context.Context, st wave.State) error {
	if st.Equal(k.st) {
		return nil
	}
	idx, err := k.store.PutWaves(ctx, wave.Items(st), k.index)
	if err != nil {
		k.loaded = false // read again: another coordinator may have written
		return fmt.Errorf("store the waves: %w", err)
	}
	k.st, k.index = st, idx
	return nil
}

// Grant records the hosts admitted in their waves (among hosts, asked only
// when some are admitted) and stores the record before their grants are
// carried out; when it cannot be stored, those hosts are not granted, and wait
// saying why.
func (k *Keeper) Grant(ctx context.Context, v *View, hosts func() []wave.Host, adm admission.Result, now time.Time) admission.Result {
	if !v.Rules.Enabled() || len(adm.Admitted) == 0 {
		return adm
	}
	admitted := v.tracked(hosts(), adm.Admitted)
	if len(admitted) == 0 {
		return adm
	}
	err := v.Err
	if err == nil {
		st, changed := wave.Grant(v.State, v.Rules, admitted, now)
		if !changed {
			return adm
		}
		if err = k.put(ctx, st); err == nil {
			v.State = st
			return adm
		}
		v.Err = err
	}
	for _, h := range admitted {
		delete(adm.Admitted, h.Name)
		adm.Wait[h.Name] = phase.WaitFor(phase.WaitWaveUnknown, err.Error())
	}
	return adm
}

// tracked are the hosts of hosts that admitted names, in a wave of a tracked
// group.
func (v View) tracked(hosts []wave.Host, admitted map[string]bool) []wave.Host {
	var out []wave.Host
	for _, h := range hosts {
		if admitted[h.Name] && h.Fingerprint != "" && v.Rules.Tracked(h.Group) {
			out = append(out, h)
		}
	}
	return out
}

// Holds says why each queued host waits for its wave, and when the first soak
// ends; plans are the pass's.
func Holds(v View, plans map[string]store.Plan, queue []admission.Pending, now time.Time) (map[string]phase.WaitReason, time.Time) {
	out, until := HoldsUntil(v, plans, queue, now)
	var recheck time.Time
	for _, t := range until {
		recheck = phase.Earliest(recheck, t)
	}
	return out, recheck
}

// HoldsUntil says why each queued host waits for its wave, and until when
// for those a soak holds.
func HoldsUntil(v View, plans map[string]store.Plan, queue []admission.Pending, now time.Time) (map[string]phase.WaitReason, map[string]time.Time) {
	if !v.Rules.Enabled() || len(queue) == 0 {
		return nil, nil
	}
	hosts := make([]wave.Host, 0, len(queue))
	for _, p := range queue {
		h := wave.Host{Name: p.Host, Group: p.Group, Plan: plans[p.Host]}
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
	if err := v.Err; err != nil {
		out := map[string]phase.WaitReason{}
		for _, h := range hosts {
			if h.Fingerprint != "" && v.Rules.Tracked(h.Group) {
				out[h.Name] = phase.WaitFor(phase.WaitWaveUnknown, err.Error())
			}
		}
		return out, nil
	}
	return wave.HoldsUntil(v.State, v.Rules, hosts, now)
}

// Canaries are the hosts that are the canaries of their wave and not back
// yet, with those the grants of admitted (among hosts) would make canaries
// (for `rollboot plan`).
func Canaries(v View, hosts []wave.Host, admitted map[string]bool, now time.Time) map[string]bool {
	if !v.Rules.Enabled() || v.Err != nil {
		return nil
	}
	st, _ := wave.Grant(v.State, v.Rules, v.tracked(hosts, admitted), now)
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
