package coordinator

import (
	"context"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/wave"
	"github.com/rollboot/rollboot/internal/wavekeep"
)

// The waves (package wave) and their state in <prefix>/waves (package
// wavekeep): observe judges them, a pass stores what changed (a canary's
// failure, halting its group: Halt) before it admits, admission holds the
// hosts their wave holds, and the hosts admitted are recorded in their waves
// before their grants are carried out.

// waveView is what a pass knows of the waves.
type waveView = wavekeep.View

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
// pass's plans (nothing stored: storeWaves does); readHalts ran first, so a
// group resumed since has its failures forgotten.
func (c *Coordinator) observeWaves(ctx context.Context, s *snapshot) {
	var resumes map[string]policy.Resume
	if s.haltsErr == "" {
		resumes = s.halts.Resumes
	}
	s.waves = c.waves.Observe(ctx, c.waveRules(), resumes, func() []wave.Host { return waveHosts(s, s.plans) }, s.now)
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

// storeWaves stores what observeWaves changed, and halts the group of each
// canary that failed once stored.
func (c *Coordinator) storeWaves(ctx context.Context, s *snapshot) {
	c.waves.Store(ctx, &s.waves, func(group, reason string) error { return c.Halt(ctx, s, group, reason, nil) })
}

// waveHolds says why each queued host waits for its wave, and when the
// first soak ends.
func waveHolds(s *snapshot, queue []admission.Pending) (map[string]phase.WaitReason, time.Time) {
	return wavekeep.Holds(s.waves, s.plans, queue, s.now)
}

// grantWaves records the hosts admitted in their waves before their grants
// are carried out; those whose record cannot be stored are not granted.
func (c *Coordinator) grantWaves(ctx context.Context, s *snapshot, adm admission.Result) admission.Result {
	return c.waves.Grant(ctx, &s.waves, func() []wave.Host { return waveHosts(s, s.plans) }, adm, s.now)
}
