package coordinator

import (
	"context"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/approvalhook"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/wave"
	"github.com/rollboot/rollboot/internal/wavekeep"
)

// What holds a queued host besides its group's budget, as the pass reads it
// for admission: its approval, and its wave.
//
// Approvals (a group's approval = "manual" or "webhook", decided by package
// admission, approval.go): the operators' approvals are entries of the hosts'
// control variables, read with the control state (a change wakes a pass
// through the requests watch). The approval webhook is asked only when
// admission asks, for a host whose turn came; its answers are kept (package
// approvalhook), by host and request, while they stand: an approving one
// until the host's request is granted (its retries after an aborted drain
// included), one that did not approve until approval.recheck (admission asks
// again then). They are the leader's memory only: a new leader asks again.
// The approval a grant used is recorded in its plan; the operator's is
// removed from the control state when the cycle ends (apply.go
// consumeApproval).
//
// The waves (package wave) and their state in <prefix>/waves (package
// wavekeep): observe judges them, a pass stores what changed (a canary's
// failure, halting its group: Halt) before it admits, admission holds the
// hosts their wave holds, and the hosts admitted are recorded in their waves
// before their grants are carried out.

// waveView is what a pass knows of the waves.
type waveView = wavekeep.View

// observeWaves reads the waves once per term and judges them from the
// pass's plans (nothing stored: storeWaves does); readHalts ran first, so a
// group resumed since has its failures forgotten.
func (c *Coordinator) observeWaves(ctx context.Context, s *snapshot) {
	var resumes map[string]policy.Resume
	if s.haltsErr == "" {
		resumes = s.halts.Resumes
	}
	s.waves = c.waves.Observe(ctx, c.opt.Rules.Waves(), resumes, func() []wave.Host { return waveHosts(s, s.plans) }, s.now)
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

// askWebhook asks the approval webhook about each of hosts, side by side,
// and keeps the answers. A preview (rollboot plan) asks nothing: the hosts
// are shown awaiting approval.
func (c *Coordinator) askWebhook(ctx context.Context, s *snapshot, hosts []string) {
	if s.preview {
		for _, h := range hosts {
			s.previewAnswers[h] = admission.WebhookAnswer{At: s.now,
				Answer: "not asked by rollboot plan (the coordinator asks when the host's turn comes)"}
		}
		return
	}
	asked := make([]approvalhook.Asked, len(hosts))
	for i, h := range hosts {
		asked[i] = approvalhook.Asked{Request: webhookRequest(s, h), RequestedAt: s.plans[h].RequestedAt}
	}
	c.approvals.Ask(ctx, c.opt.ApprovalHook, asked, s.now)
}

// webhookRequest is what the webhook is sent about host.
func webhookRequest(s *snapshot, host string) approvalhook.Request {
	hv, p := s.hosts[host], s.plans[host]
	r := approvalhook.Request{Host: host, Group: hv.group, Reason: p.Reason}
	if hv.rec != nil {
		r.Fingerprint = hv.rec.Fingerprint
	}
	return r
}
