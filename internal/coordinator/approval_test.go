package coordinator

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/approvalhook"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// fakeAsker answers as approve says and counts the requests.
type fakeAsker struct {
	mu      sync.Mutex
	approve bool
	asked   []approvalhook.Request
}

func (f *fakeAsker) Ask(_ context.Context, r approvalhook.Request, now time.Time) admission.WebhookAnswer {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, r)
	if f.approve {
		return admission.WebhookAnswer{At: now, Approved: true, Answer: "HTTP 200: ok"}
	}
	return admission.WebhookAnswer{At: now, Answer: "HTTP 403: no"}
}

// The approval webhook is asked only by a pass, never by a preview (rollboot
// plan), only for the host whose turn came, and again only once its answer's
// recheck is over; its 2xx lets the host go, recorded in the plan.
func TestApprovalWebhookAsked(t *testing.T) {
	sim, client, st := simStore(t, nomadsim.Config{Clients: 2})
	ctx := t.Context()
	asked := time.Now().Add(-time.Hour)
	for i, name := range []string{"client-1", "client-2"} {
		h, _ := sim.Host(name)
		rec := store.HostRecord{Host: h.Name, NodeID: h.NodeID, BootID: h.BootID, Roles: []string{store.RoleNomadClient},
			RebootRequired: true, Reason: "test", RequestedAt: asked.Add(time.Duration(i) * time.Minute), Fingerprint: "fp"}
		if _, err := st.PutHost(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	hook := &fakeAsker{}
	var mu sync.Mutex
	now := time.Now()
	co := New(Options{
		Deps:    Deps{Nodes: client.Nodes(), Store: st, ApprovalAsker: hook},
		Runtime: Runtime{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }},
		Rules: rules.Rules{
			Groups: []rules.GroupSpec{{Group: policy.Group{Name: "all", Concurrency: 1}}},
			Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
			Approval: admission.ApprovalRules{Groups: map[string]string{"all": admission.ApprovalWebhook},
				HoldSlot: time.Hour, Recheck: time.Minute},
		},
	})
	res, err := co.Preview(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range res.Hosts {
		if h.Host == "client-1" && (h.Waiting.Kind != phase.WaitAwaitingApproval || !strings.Contains(h.Waiting.String(), "not asked by rollboot plan")) {
			t.Errorf("preview of client-1: %v", h.Waiting)
		}
	}
	if len(hook.asked) != 0 {
		t.Fatalf("the preview asked the webhook: %+v", hook.asked)
	}
	pass := func() map[string]store.Plan {
		t.Helper()
		if err := co.ReconcileOnce(ctx); err != nil {
			t.Fatal(err)
		}
		plans, err := st.Plans(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return plans
	}
	pass() // idle to pending: the host that heads its line is asked about by the hand-out
	plans := pass()
	if p := plans["client-1"]; p.WaitingKind != "awaiting_approval" || !strings.Contains(p.Waiting, "HTTP 403: no") || p.AwaitingSince.IsZero() {
		t.Errorf("client-1 after a refusal: %+v", p)
	}
	if len(hook.asked) != 1 || hook.asked[0] != (approvalhook.Request{Host: "client-1", Group: "all", Reason: "test", Fingerprint: "fp"}) {
		t.Fatalf("asked %+v, want client-1 once", hook.asked)
	}
	hook.mu.Lock()
	hook.approve = true
	hook.mu.Unlock()
	pass()
	if len(hook.asked) != 1 {
		t.Errorf("asked again before the recheck: %+v", hook.asked)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	plans = pass()
	if p := plans["client-1"]; p.Phase != store.PhaseDraining || p.ApprovedBy != "approval webhook: HTTP 200: ok" {
		t.Errorf("client-1 after the approval: %+v", p)
	}
	if p := plans["client-2"]; p.Phase != store.PhasePending || p.WaitingKind == "awaiting_approval" {
		t.Errorf("client-2 behind it: %+v", p)
	}
}
