package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/approvalhook"
	"github.com/rollboot/rollboot/internal/store"
)

// Approvals (a group's approval = "manual" or "webhook", decided by package
// admission, approval.go): the operators' approvals are entries of the hosts'
// control variables, read with the control state (a change wakes a pass
// through the requests watch). The approval webhook is asked only when
// admission asks, for a host whose turn came; its answers are kept here, by
// host and request, while they stand: an approving one until the host's
// request is granted (its retries after an aborted drain included), one that
// did not approve until approval.recheck (admission asks again then). They
// are the leader's memory only: a new leader asks again. The approval a grant
// used is recorded in its plan; the operator's is removed from the control
// state when the cycle ends (closeCycle).

// webhookAnswers are the answers standing for the hosts of s's queue, by
// host: those to the host's current request (a new request is asked anew).
func (c *Coordinator) webhookAnswers(s *snapshot) map[string]admission.WebhookAnswer {
	requested := map[string]time.Time{}
	for host, p := range s.plans {
		if p.Phase == store.PhasePending {
			requested[host] = p.RequestedAt
		}
	}
	return c.approvals.Standing(requested)
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

// forgetAnswers drops the answers no longer standing: the host granted (its
// plan no longer pending on that request), or gone.
func (c *Coordinator) forgetAnswers(s *snapshot) {
	c.approvals.Forget(func(host string, requestedAt time.Time, approved bool) bool {
		p, ok := s.plans[host]
		return ok && p.RequestedAt.Equal(requestedAt) && (p.Phase == store.PhasePending || p.Phase == store.PhaseBackoff && approved)
	})
}

// validApprovals are the operators' approvals valid at now, by host.
func validApprovals(ctl store.Control, now time.Time) map[string]store.Approval {
	out := map[string]store.Approval{}
	for h, a := range ctl.Approvals {
		if a.Valid(now) {
			out[h] = a
		}
	}
	return out
}

// consumeApproval removes the operator's approval of host that the cycle
// ending used (valid until until), if it is still that one: a new approval
// given since stays.
func (c *Coordinator) consumeApproval(ctx context.Context, host string, until time.Time) error {
	err := c.updateControl(ctx, func(ctl *store.Control) error {
		if a, ok := ctl.Approvals[host]; ok && a.Until.Equal(until) {
			delete(ctl.Approvals, host)
		}
		return nil
	})
	if errors.Is(err, store.ErrUnknownVersion) {
		return nil // a newer rollboot's entries stay as they are (clearCancel)
	}
	if err != nil {
		return fmt.Errorf("remove the approval of %s: %w", host, err)
	}
	return nil
}
