package admission

import (
	"fmt"
	"slices"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// Approvals (a group's approval = "manual" or "webhook"): a host whose turn
// comes, every budget and gate passing, is not granted until it is approved,
// by an operator (`rollboot approve`, an entry of the host's control
// variable) or, with "webhook", by the approval webhook's 2xx answer. It is
// the last check of a host a slot is offered to, so a host awaiting approval
// is the one that would go next. It keeps that place, and its group's slot,
// for ApprovalRules.HoldSlot from when it began to await; then it steps
// aside, still awaiting, and the slot goes to the next host in line, so that
// one host nobody approves does not stop its group for good. A host awaiting
// approval is not out of service: it counts in no budget but this pass's.

// The approval modes of a group (its approval setting).
const (
	ApprovalNone    = "none"
	ApprovalManual  = "manual"
	ApprovalWebhook = "webhook"
)

// ApprovalRules say which groups need an approval, and how.
type ApprovalRules struct {
	// Groups: by group name, ApprovalManual or ApprovalWebhook; a group
	// missing needs none.
	Groups map[string]string
	// HoldSlot: how long a host awaiting approval keeps its group's slot.
	HoldSlot time.Duration
	// Recheck: how long an answer of the webhook that did not approve stands
	// before the webhook is asked again.
	Recheck time.Duration
}

// WebhookAnswer is what the approval webhook answered for a host's request.
type WebhookAnswer struct {
	At       time.Time // when it was asked
	Approved bool      // it answered 2xx
	// Answer is the answer as shown: "HTTP 200: first line", or why none came.
	Answer string
}

// Approved is an approval admission found for a host it admitted.
type Approved struct {
	By string
	// Until: the end of the operator's approval used (zero: the webhook's).
	Until time.Time
}

// ApprovalVerdict is what the approval says of a host the budgets and gates
// would admit.
type ApprovalVerdict struct {
	// Approved: the host may go (By empty when its group needs no approval).
	Approved bool
	By       Approved
	// Wait: why it awaits approval (when not Approved).
	Wait phase.WaitReason
	// KeepsSlot: it keeps its group's slot while it awaits.
	KeepsSlot bool
	// Ask: the webhook must be asked first.
	Ask bool
	// RecheckAt: when the verdict changes with nothing else changing (the
	// slot given up, the webhook asked again; zero: never).
	RecheckAt time.Time
}

// ApprovalOf decides the approval of pending host p at now, given the
// operator's approval of it (nil: none valid) and the webhook's last answer
// for its request (nil: not asked).
func ApprovalOf(r ApprovalRules, p Pending, op *store.Approval, ans *WebhookAnswer, now time.Time) ApprovalVerdict {
	mode := r.Groups[p.Group]
	if mode == "" || mode == ApprovalNone {
		return ApprovalVerdict{Approved: true}
	}
	if op != nil && op.Valid(now) {
		by := op.By
		if by == "" {
			by = "an operator"
		}
		return ApprovalVerdict{Approved: true, By: Approved{By: by, Until: op.Until}}
	}
	v := ApprovalVerdict{KeepsSlot: true}
	if !p.AwaitingSince.IsZero() && r.HoldSlot > 0 {
		end := p.AwaitingSince.Add(r.HoldSlot)
		v.KeepsSlot = now.Before(end)
		if v.KeepsSlot {
			v.RecheckAt = end
		}
	}
	run := fmt.Sprintf("run `rollboot approve %s` (or `rollboot approve -group %s`)", p.Host, p.Group)
	detail := run
	if mode == ApprovalWebhook {
		switch {
		case ans == nil:
			// Asked in this pass when its turn came: the answer's text is the
			// one stored; this one is seen only while it waits for a slot.
			v.Ask, detail = true, "the approval webhook is asked when its turn comes; or "+run
		case ans.Approved:
			return ApprovalVerdict{Approved: true, By: Approved{By: "approval webhook: " + ans.Answer}}
		case !now.Before(ans.At.Add(r.Recheck)):
			v.Ask = true
			fallthrough
		default:
			detail = fmt.Sprintf("the approval webhook answered %s (asked again every %s); or %s", ans.Answer, r.Recheck, run)
			v.RecheckAt = phase.Earliest(v.RecheckAt, ans.At.Add(r.Recheck))
		}
	}
	if !v.KeepsSlot {
		detail += fmt.Sprintf("; after %s it let the next host in line have its group's slot", r.HoldSlot)
	}
	v.Wait = phase.WaitFor(phase.WaitAwaitingApproval, detail)
	return v
}

// approval is the approval's word on p, the last check of accept: whether p
// takes the slot offered (it may while it awaits approval, KeepsSlot) and
// whether it is admitted.
func (a *admitter) approval(p Pending) (takes, admitted bool) {
	v := a.approvalOf(p)
	if v.Approved {
		if v.By.By != "" {
			if a.out.Approved == nil {
				a.out.Approved = map[string]Approved{}
			}
			a.out.Approved[p.Host] = v.By
		}
		return true, true
	}
	if v.Ask {
		a.needs.Webhook = append(a.needs.Webhook, p.Host)
	}
	a.out.Wait[p.Host] = v.Wait
	a.out.RecheckAt = phase.Earliest(a.out.RecheckAt, v.RecheckAt)
	if v.KeepsSlot {
		if a.out.HoldsSlot == nil {
			a.out.HoldsSlot = map[string]bool{}
		}
		a.out.HoldsSlot[p.Host] = true
	}
	return v.KeepsSlot, false
}

// awaitingFirst puts the hosts that await their approval and still keep their
// group's slot (ApprovalVerdict.KeepsSlot), or awaited it and are approved
// now, at the head of the line, in the order they began to await, the others
// after them in queue order. A host
// keeps its place while it awaits: a host whose need was older but reached
// the queue later (its agent reported it later) would otherwise take the slot
// from one an operator was just told to approve, and hold it awaiting its own
// approval while the approved one waits.
func (a *admitter) awaitingFirst(queue []policy.Request) []policy.Request {
	var first, rest []policy.Request
	for _, r := range queue {
		if p := a.pending(r.Host); !p.AwaitingSince.IsZero() {
			if v := a.approvalOf(p); v.KeepsSlot || v.Approved {
				first = append(first, r)
				continue
			}
		}
		rest = append(rest, r)
	}
	slices.SortStableFunc(first, func(x, y policy.Request) int {
		return a.pending(x.Host).AwaitingSince.Compare(a.pending(y.Host).AwaitingSince)
	})
	return append(first, rest...)
}

// stillAwaiting keeps the reason of a host that awaited its approval and now
// waits only for a slot of its group (it stepped aside, and another host's
// cycle fills the group): it still needs its approval, which is what an
// operator must see. Zero for any other host. The webhook is not asked for
// it: its turn has not come.
func (a *admitter) stillAwaiting(w policy.Waiting) phase.WaitReason {
	if !w.ForSlot {
		return phase.WaitReason{}
	}
	i, ok := a.index[w.Host]
	if !ok || a.in.Queue[i].AwaitingSince.IsZero() {
		return phase.WaitReason{}
	}
	v := a.approvalOf(a.in.Queue[i])
	if v.Approved {
		return phase.WaitReason{}
	}
	return v.Wait
}

// approvalOf is ApprovalOf for p, with the operator's approval and the
// webhook's answer the input holds for it.
func (a *admitter) approvalOf(p Pending) ApprovalVerdict {
	var op *store.Approval
	if ap, ok := a.in.Approvals[p.Host]; ok {
		op = &ap
	}
	var ans *WebhookAnswer
	if w, ok := a.in.Webhook[p.Host]; ok {
		ans = &w
	}
	return ApprovalOf(a.in.Rules.Approval, p, op, ans, a.in.Now)
}

// ValidApprovals are the operators' approvals of approvals valid at now, by
// host.
func ValidApprovals(approvals map[string]store.Approval, now time.Time) map[string]store.Approval {
	out := map[string]store.Approval{}
	for h, a := range approvals {
		if a.Valid(now) {
			out[h] = a
		}
	}
	return out
}
