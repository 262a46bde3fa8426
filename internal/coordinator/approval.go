package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/approvalhook"
	"github.com/rollboot/rollboot/internal/parallel"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/telemetry"
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

// ApprovalAsker asks the approval webhook (*approvalhook.Hook).
type ApprovalAsker interface {
	Ask(ctx context.Context, r approvalhook.Request, now time.Time) admission.WebhookAnswer
}

// approvalState is the approvals' state across passes.
type approvalState struct {
	asker ApprovalAsker
	// hook: the webhook asker was made for (a policy that changes it gets a
	// new one); given: the asker came with the options, whatever the policy.
	hook    ApprovalHook
	given   bool
	metrics *approvalMetrics
	// answers: the webhook's answers standing, by host.
	answers map[string]webhookAnswer
}

// webhookAnswer is the webhook's answer to one request of a host.
type webhookAnswer struct {
	requestedAt time.Time
	ans         admission.WebhookAnswer
}

// maxWebhookAsks bounds the webhook requests in flight at once.
const maxWebhookAsks = 8

// webhookAnswers are the answers standing for the hosts of s's queue, by
// host: those to the host's current request (a new request is asked anew).
func (c *Coordinator) webhookAnswers(s *snapshot) map[string]admission.WebhookAnswer {
	out := map[string]admission.WebhookAnswer{}
	for host, a := range c.approvals.answers {
		if p, ok := s.plans[host]; ok && p.Phase == store.PhasePending && p.RequestedAt.Equal(a.requestedAt) {
			out[host] = a.ans
		}
	}
	return out
}

// askWebhook asks the approval webhook about each of hosts, side by side,
// and keeps the answers. A preview (rollboot plan) asks nothing: the hosts
// are shown awaiting approval.
func (c *Coordinator) askWebhook(ctx context.Context, s *snapshot, hosts []string) {
	if c.approvals.answers == nil {
		c.approvals.answers = map[string]webhookAnswer{}
	}
	if s.preview {
		for _, h := range hosts {
			s.previewAnswers[h] = admission.WebhookAnswer{At: s.now,
				Answer: "not asked by rollboot plan (the coordinator asks when the host's turn comes)"}
		}
		return
	}
	if h := c.opt.ApprovalHook; !c.approvals.given && (c.approvals.asker == nil || c.approvals.hook != h) {
		c.approvals.asker, c.approvals.hook = &approvalhook.Hook{URL: h.URL, Timeout: h.Timeout, Header: h.Header, Env: h.Env, File: h.File}, h
	}
	answers := make([]admission.WebhookAnswer, len(hosts))
	parallel.Each(len(hosts), maxWebhookAsks, nil, func(i int) {
		answers[i] = c.approvals.asker.Ask(ctx, webhookRequest(s, hosts[i]), s.now)
	})
	for i, h := range hosts {
		a := answers[i]
		before, asked := c.approvals.answers[h]
		c.approvals.answers[h] = webhookAnswer{requestedAt: s.plans[h].RequestedAt, ans: a}
		result := "refused"
		if a.Approved {
			result = "approved"
		}
		c.approvals.metrics.requests.WithLabelValues(result).Inc()
		if !asked || before.ans.Answer != a.Answer || before.ans.Approved != a.Approved {
			// Logged when it changes, not at every recheck.
			c.log.Info("approval webhook answered", "host", h, "group", s.hosts[h].group, "approved", a.Approved, "answer", a.Answer)
		}
	}
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
	for host, a := range c.approvals.answers {
		p, ok := s.plans[host]
		keep := ok && p.RequestedAt.Equal(a.requestedAt) &&
			(p.Phase == store.PhasePending || p.Phase == store.PhaseBackoff && a.ans.Approved)
		if !keep {
			delete(c.approvals.answers, host)
		}
	}
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

// approvalMetrics are the approvals' series.
type approvalMetrics struct {
	requests *prometheus.CounterVec
}

func newApprovalMetrics(reg prometheus.Registerer) *approvalMetrics {
	m := &approvalMetrics{
		requests: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollboot_approval_webhook_requests_total",
			Help: "Requests to the approval webhook, by result: approved (2xx) or refused (any other answer, none in time, unreachable)."}, []string{"result"})),
	}
	m.requests.WithLabelValues("approved")
	m.requests.WithLabelValues("refused")
	return m
}
