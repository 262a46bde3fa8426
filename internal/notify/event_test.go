package notify

import (
	"reflect"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func plan(phase, grant string, mod func(*store.Plan)) store.Plan {
	p := store.Plan{Host: "h1", Group: "web", Phase: phase, PhaseSince: t0.Add(3 * time.Minute), GrantID: grant, NodeID: "n1",
		Reason: "sentinel", Attempt: 1, Timeline: map[string]time.Time{
			store.PhasePending: t0, store.PhaseDraining: t0.Add(time.Minute), store.PhaseRebooting: t0.Add(2 * time.Minute)}}
	if mod != nil {
		mod(&p)
	}
	return p
}

func kinds(evs []Event) []Kind {
	out := []Kind{}
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func TestDerive(t *testing.T) {
	sentDrain := Ledger{Hosts: map[string]HostSent{"h1": {Grant: "g1", Kinds: []Kind{DrainStarted}}}}
	tests := []struct {
		name   string
		plans  []store.Plan
		pause  Pause
		ledger Ledger
		want   []Kind
	}{
		{name: "idle, never rebooted", plans: []store.Plan{plan(store.PhaseIdle, "", nil)}, want: []Kind{}},
		{name: "pending", plans: []store.Plan{plan(store.PhasePending, "", nil)}, want: []Kind{}},
		{name: "draining", plans: []store.Plan{plan(store.PhaseDraining, "g1", nil)}, want: []Kind{DrainStarted}},
		{name: "draining, sent", plans: []store.Plan{plan(store.PhaseDraining, "g1", nil)}, ledger: sentDrain, want: []Kind{}},
		{name: "drained, sent", plans: []store.Plan{plan(store.PhaseDrained, "g1", nil)}, ledger: sentDrain, want: []Kind{}},
		{name: "rebooting", plans: []store.Plan{plan(store.PhaseRebooting, "g1", nil)}, ledger: sentDrain, want: []Kind{Rebooting}},
		{name: "rejoining, nothing sent: both, in order", plans: []store.Plan{plan(store.PhaseRejoining, "g1", nil)},
			want: []Kind{DrainStarted, Rebooting}},
		{name: "a new grant: the old grant's marks do not count", plans: []store.Plan{plan(store.PhaseDraining, "g2", nil)},
			ledger: sentDrain, want: []Kind{DrainStarted}},
		{name: "no node: no drain", plans: []store.Plan{plan(store.PhaseRebooting, "g1", func(p *store.Plan) { p.NodeID = "" })},
			want: []Kind{Rebooting}},
		{name: "stuck", plans: []store.Plan{plan(store.PhaseStuck, "g1", func(p *store.Plan) { p.LastError = "gone" })},
			ledger: sentDrain, want: []Kind{Stuck}},
		{name: "drain aborted", plans: []store.Plan{plan(store.PhaseBackoff, "g1", func(p *store.Plan) { p.LastError = "too slow" })},
			ledger: sentDrain, want: []Kind{DrainAborted}},
		{name: "reboot failed", plans: []store.Plan{plan(store.PhaseBackoff, "g1", func(p *store.Plan) {
			p.LastError = notRebooted + "reboot command failed"
		})}, ledger: sentDrain, want: []Kind{RebootFailed}},
		{name: "node gone", plans: []store.Plan{plan(store.PhaseBackoff, "g1", func(p *store.Plan) {
			p.LastError = store.NodeGonePrefix + "node n1 is no longer in Nomad's node list (purged) for 5m0s: the slot is released"
		})}, ledger: sentDrain, want: []Kind{NodeGone}},
		{name: "backoff without a grant (a reboot loop)", plans: []store.Plan{plan(store.PhaseBackoff, "", nil)}, want: []Kind{}},
		{name: "back in service", plans: []store.Plan{plan(store.PhaseIdle, "", func(p *store.Plan) { p.LastCompleted = t0.Add(time.Hour) })},
			ledger: sentDrain, want: []Kind{BackInService}},
		{name: "back in service, sent", plans: []store.Plan{plan(store.PhaseIdle, "", func(p *store.Plan) { p.LastCompleted = t0.Add(time.Hour) })},
			ledger: Ledger{Hosts: map[string]HostSent{"h1": {Back: t0.Add(time.Hour)}}}, want: []Kind{}},
		{name: "canceled later: the same cycle's end is not sent again", plans: []store.Plan{plan(store.PhaseIdle, "", func(p *store.Plan) {
			p.LastCompleted = t0
		})}, ledger: Ledger{Hosts: map[string]HostSent{"h1": {Grant: "g9", Kinds: []Kind{DrainStarted}, Back: t0}}}, want: []Kind{}},
		{name: "paused", pause: Pause{Paused: true, At: t0}, want: []Kind{Paused}},
		{name: "paused, sent", pause: Pause{Paused: true, At: t0}, ledger: Ledger{Pause: PauseSent{At: t0, Paused: true}}, want: []Kind{}},
		{name: "paused again", pause: Pause{Paused: true, At: t0.Add(time.Hour)}, ledger: Ledger{Pause: PauseSent{At: t0, Paused: true}},
			want: []Kind{Paused}},
		{name: "resumed", ledger: Ledger{Pause: PauseSent{At: t0, Paused: true}}, want: []Kind{Resumed}},
		{name: "resumed, sent", ledger: Ledger{Pause: PauseSent{At: t0, Paused: true, Resumed: true}}, want: []Kind{}},
		{name: "never paused", want: []Kind{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := Derive(tt.plans, tt.pause, tt.ledger)
			if got := kinds(evs); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("events %v, want %v", got, tt.want)
			}
			// Once marked, nothing is derived again from the same state.
			l, _, _ := DecodeLedger(tt.ledger.Parts()) // a copy
			for _, e := range evs {
				l.Mark(e)
			}
			if again := Derive(tt.plans, tt.pause, l); len(again) != 0 {
				t.Errorf("after marking, derived again: %v", kinds(again))
			}
			// And the marks survive the ledger's encoding.
			back, problems, err := DecodeLedger(l.Parts())
			if err != nil || len(problems) > 0 {
				t.Fatalf("decode: %v %v", err, problems)
			}
			if again := Derive(tt.plans, tt.pause, back); len(again) != 0 {
				t.Errorf("after a round trip of the ledger, derived again: %v", kinds(again))
			}
		})
	}
}

// A host's whole cycle, observed pass by pass, gives each event once; and the
// ledger a new leader reads (Baseline on the first start) sends nothing old.
func TestCycleOnce(t *testing.T) {
	states := []store.Plan{
		plan(store.PhasePending, "", nil),
		plan(store.PhaseDraining, "g1", nil),
		plan(store.PhaseBackoff, "g1", func(p *store.Plan) { p.LastError = "too slow" }),
		plan(store.PhasePending, "g1", nil),
		plan(store.PhaseDraining, "g2", func(p *store.Plan) { p.Attempt = 2 }),
		plan(store.PhaseDrained, "g2", nil),
		plan(store.PhaseRebooting, "g2", nil),
		plan(store.PhaseRejoining, "g2", nil),
		plan(store.PhaseStuck, "g2", nil),
		plan(store.PhaseRejoining, "g2", nil),
		plan(store.PhaseIdle, "", func(p *store.Plan) { p.LastCompleted = t0.Add(time.Hour) }),
		plan(store.PhaseIdle, "", func(p *store.Plan) { p.LastCompleted = t0.Add(time.Hour) }),
	}
	var l Ledger
	var got []Kind
	for _, p := range states {
		for _, e := range Derive([]store.Plan{p}, Pause{}, l) {
			got = append(got, e.Kind)
			l.Mark(e)
		}
	}
	want := []Kind{DrainStarted, DrainAborted, DrainStarted, Rebooting, Stuck, BackInService}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if b := Baseline(states[6:7], Pause{Paused: true, At: t0}); len(Derive(states[6:7], Pause{Paused: true, At: t0}, b)) != 0 {
		t.Error("the baseline leaves events to send")
	}
}

func TestMessages(t *testing.T) {
	m, err := CompileMessages(map[Kind]string{Stuck: "{{.Host}} stuck since {{.At.Format \"15:04\"}}: {{.Error}}"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Render(Event{Kind: Stuck, Host: "h1", At: t0, Error: "gone"})
	if err != nil || got != "h1 stuck since 10:00: gone" {
		t.Errorf("got %q, %v", got, err)
	}
	got, _ = m.Render(Event{Kind: BackInService, Host: "h1", Duration: 90 * time.Second})
	if got != "rollboot: h1 rebooted and is back in service after 1m30s" {
		t.Errorf("default back_in_service: %q", got)
	}
	// A slot freed at the healthy deadline with workloads unhealthy: the plan's
	// LastUnhealthy becomes the event's Error, which the message tells.
	unhealthy := plan(store.PhaseIdle, "", func(p *store.Plan) {
		p.LastCompleted, p.LastUnhealthy = t0.Add(time.Hour), "web.web[0] unhealthy"
	})
	evs := Derive([]store.Plan{unhealthy}, Pause{}, Ledger{})
	if len(evs) != 1 || evs[0].Kind != BackInService || evs[0].Error != "web.web[0] unhealthy" {
		t.Fatalf("events of an unhealthy release: %+v", evs)
	}
	got, _ = m.Render(evs[0])
	if want := "rollboot: h1 rebooted and is back in service after 59m0s, but its workloads were still unhealthy at its healthy deadline: web.web[0] unhealthy"; got != want {
		t.Errorf("back_in_service, unhealthy: %q, want %q", got, want)
	}
	for _, bad := range []string{"{{.Hots}}", "{{.Host", "{{template \"x\"}}"} {
		if _, err := CompileMessage(Stuck, bad); err == nil {
			t.Errorf("%q compiled", bad)
		}
	}
}

// A retry's drain and reboot are dated by its own entry into the phase, not by
// the request's first (the timeline keeps the first entry of each phase).
func TestRetryDates(t *testing.T) {
	retry := plan(store.PhaseDraining, "g2", func(p *store.Plan) { p.PhaseSince = t0.Add(time.Hour) })
	evs := Derive([]store.Plan{retry}, Pause{}, Ledger{})
	if len(evs) != 1 || !evs[0].At.Equal(t0.Add(time.Hour)) {
		t.Errorf("events %+v, want a drain at %s", evs, t0.Add(time.Hour))
	}
}
