package admission

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// approvalInput is input with the default group needing approval mode.
func approvalInput(mode string, slots int, queue ...Pending) Input {
	in := input(slots, queue...)
	in.Rules.Approval = ApprovalRules{Groups: map[string]string{policy.DefaultGroupName: mode}, HoldSlot: time.Hour, Recheck: time.Minute}
	return in
}

func awaiting(p Pending, since time.Duration) Pending {
	p.AwaitingSince = now.Add(-since)
	return p
}

// A host whose turn comes in a group with an approval waits for it, keeping
// its group's slot (the host behind it waits for the slot) for hold_slot; an
// operator's approval or the webhook's 2xx lets it go, and says who.
func TestAdmitApproval(t *testing.T) {
	valid := store.Approval{Until: now.Add(time.Hour), By: "alice"}
	tests := []struct {
		name      string
		in        func() Input
		admitted  []string
		waitKinds map[string]phase.WaitKind
		approved  map[string]Approved
		needs     Needs
		recheck   time.Time
		detail    map[string]string // a part of each reason
		holds     []string          // the hosts awaiting that keep their slot
	}{
		{name: "no approval needed: admitted as before", in: func() Input {
			return approvalInput(ApprovalNone, 1, pending("a", 0))
		}, admitted: []string{"a"}},
		{name: "manual: the first in line awaits and keeps the slot", in: func() Input {
			return approvalInput(ApprovalManual, 1, pending("a", 0), pending("b", time.Minute))
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitAwaitingApproval, "b": phase.WaitQueued},
			detail: map[string]string{"a": "rollboot approve a"}, recheck: time.Time{}, holds: []string{"a"}},
		{name: "manual: awaiting since a while: the recheck is when it gives up its slot", in: func() Input {
			return approvalInput(ApprovalManual, 1, awaiting(pending("a", 0), 10*time.Minute), pending("b", time.Minute))
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitAwaitingApproval, "b": phase.WaitQueued},
			recheck: now.Add(50 * time.Minute)},
		{name: "manual: past hold_slot it steps aside, the next awaits in its place", in: func() Input {
			return approvalInput(ApprovalManual, 1, awaiting(pending("a", 0), 2*time.Hour), pending("b", time.Minute), pending("c", 2*time.Minute))
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitAwaitingApproval, "b": phase.WaitAwaitingApproval, "c": phase.WaitQueued},
			detail: map[string]string{"a": "let the next host in line"}, holds: []string{"b"}},
		{name: "manual: one that stepped aside, its group full with another's cycle, still awaits", in: func() Input {
			in := approvalInput(ApprovalManual, 1, awaiting(pending("a", 0), 2*time.Hour), pending("c", 2*time.Minute))
			in.Groups = map[string]GroupCount{policy.DefaultGroupName: {Size: 10, Active: 1}}
			return in
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitAwaitingApproval, "c": phase.WaitQueued},
			detail: map[string]string{"a": "let the next host in line"}},
		{name: "manual: an approved host behind one past hold_slot goes", in: func() Input {
			in := approvalInput(ApprovalManual, 1, awaiting(pending("a", 0), 2*time.Hour), pending("b", time.Minute))
			in.Approvals = map[string]store.Approval{"b": valid}
			return in
		}, admitted: []string{"b"}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitAwaitingApproval},
			approved: map[string]Approved{"b": {By: "alice", Until: valid.Until}}},
		{name: "manual: one awaiting keeps its place ahead of an older need that reached the queue later", in: func() Input {
			return approvalInput(ApprovalManual, 1, pending("a", 0), awaiting(pending("b", time.Minute), time.Second))
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitQueued, "b": phase.WaitAwaitingApproval}, holds: []string{"b"},
			recheck: now.Add(time.Hour - time.Second)},
		{name: "manual: approved, the one that awaited first goes ahead of one that took its place", in: func() Input {
			in := approvalInput(ApprovalManual, 1, awaiting(pending("a", 0), time.Second), awaiting(pending("b", time.Minute), time.Minute))
			in.Approvals = map[string]store.Approval{"b": valid}
			return in
		}, admitted: []string{"b"}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitAwaitingApproval},
			approved: map[string]Approved{"b": {By: "alice", Until: valid.Until}}},
		{name: "manual: approved by an operator", in: func() Input {
			in := approvalInput(ApprovalManual, 1, pending("a", 0))
			in.Approvals = map[string]store.Approval{"a": valid}
			return in
		}, admitted: []string{"a"}, approved: map[string]Approved{"a": {By: "alice", Until: valid.Until}}},
		{name: "manual: an expired approval does not count", in: func() Input {
			in := approvalInput(ApprovalManual, 1, pending("a", 0))
			in.Approvals = map[string]store.Approval{"a": {Until: now, By: "alice"}}
			return in
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitAwaitingApproval}},
		{name: "manual: two slots, two await", in: func() Input {
			return approvalInput(ApprovalManual, 2, pending("a", 0), pending("b", time.Minute), pending("c", 2*time.Minute))
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitAwaitingApproval, "b": phase.WaitAwaitingApproval, "c": phase.WaitQueued}},
		{name: "manual: a host held by a gate does not await: only a host whose turn comes", in: func() Input {
			in := approvalInput(ApprovalManual, 1, pending("a", 0), pending("b", time.Minute))
			in.Rules.Workloads = true
			in.WorkloadHolds = map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitBlockingJob, "job etl"), "b": {}}
			return in
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitBlockingJob, "b": phase.WaitAwaitingApproval}, recheck: now.Add(WorkloadRecheck)},
		{name: "manual: the node's system jobs are read before the approval is decided", in: func() Input {
			in := approvalInput(ApprovalManual, 1, pending("a", 0))
			delete(in.Jobs, "a")
			return in
		}, admitted: []string{"a"}, needs: Needs{Jobs: []string{"a"}}},
		{name: "webhook: not asked yet: asked", in: func() Input {
			return approvalInput(ApprovalWebhook, 1, pending("a", 0), pending("b", time.Minute))
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitAwaitingApproval, "b": phase.WaitQueued}, needs: Needs{Webhook: []string{"a"}}},
		{name: "webhook: 2xx approves", in: func() Input {
			in := approvalInput(ApprovalWebhook, 1, pending("a", 0))
			in.Webhook = map[string]WebhookAnswer{"a": {At: now, Approved: true, Answer: "HTTP 200: ok"}}
			return in
		}, admitted: []string{"a"}, approved: map[string]Approved{"a": {By: "approval webhook: HTTP 200: ok"}}},
		{name: "webhook: refused: held with the answer until the recheck", in: func() Input {
			in := approvalInput(ApprovalWebhook, 1, pending("a", 0))
			in.Webhook = map[string]WebhookAnswer{"a": {At: now.Add(-20 * time.Second), Answer: "HTTP 403: change freeze"}}
			return in
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitAwaitingApproval}, recheck: now.Add(40 * time.Second),
			detail: map[string]string{"a": "HTTP 403: change freeze"}},
		{name: "webhook: a refusal older than the recheck: asked again", in: func() Input {
			in := approvalInput(ApprovalWebhook, 1, pending("a", 0))
			in.Webhook = map[string]WebhookAnswer{"a": {At: now.Add(-time.Minute), Answer: "no answer within 10s"}}
			return in
		}, waitKinds: map[string]phase.WaitKind{"a": phase.WaitAwaitingApproval}, needs: Needs{Webhook: []string{"a"}},
			recheck: now, detail: map[string]string{"a": "no answer within 10s"}},
		{name: "webhook: an operator's approval is enough, the webhook is not asked", in: func() Input {
			in := approvalInput(ApprovalWebhook, 1, pending("a", 0))
			in.Approvals = map[string]store.Approval{"a": valid}
			return in
		}, admitted: []string{"a"}, approved: map[string]Approved{"a": {By: "alice", Until: valid.Until}}},
		{name: "another group needs approval: this one's hosts go", in: func() Input {
			in := approvalInput(ApprovalManual, 1, pending("a", 0))
			in.Rules.Approval.Groups = map[string]string{"db": ApprovalManual}
			return in
		}, admitted: []string{"a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, needs := Admit(tc.in())
			var admitted []string
			for h := range res.Admitted {
				admitted = append(admitted, h)
			}
			slices.Sort(admitted)
			if !slices.Equal(admitted, tc.admitted) {
				t.Errorf("admitted %v, want %v", admitted, tc.admitted)
			}
			for h, k := range tc.waitKinds {
				if res.Wait[h].Kind != k {
					t.Errorf("%s waits %v (%s), want kind %s", h, res.Wait[h].Kind.Name(), res.Wait[h], k.Name())
				}
			}
			for h, part := range tc.detail {
				if !strings.Contains(res.Wait[h].String(), part) {
					t.Errorf("%s waits %q, want it to say %q", h, res.Wait[h], part)
				}
			}
			if len(res.Approved) != len(tc.approved) {
				t.Errorf("approved %v, want %v", res.Approved, tc.approved)
			}
			for h, a := range tc.approved {
				if res.Approved[h] != a {
					t.Errorf("%s approved %+v, want %+v", h, res.Approved[h], a)
				}
			}
			var holds []string
			for h := range res.HoldsSlot {
				holds = append(holds, h)
			}
			slices.Sort(holds)
			if tc.holds != nil && !slices.Equal(holds, tc.holds) {
				t.Errorf("hold their slot: %v, want %v", holds, tc.holds)
			}
			if !slices.Equal(needs.Webhook, tc.needs.Webhook) || !slices.Equal(needs.Jobs, tc.needs.Jobs) {
				t.Errorf("needs %+v, want %+v", needs, tc.needs)
			}
			if needs.None() && !res.RecheckAt.Equal(tc.recheck) {
				t.Errorf("recheck at %s, want %s", res.RecheckAt, tc.recheck)
			}
		})
	}
}
