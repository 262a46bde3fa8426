package coordinator

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

// TestQuietSteps: for every host the pass skips as quiet, phase.Step on its full
// phase.Input decides what the skip assumes (its plan kept, no write, no drain, no
// control cleared, not waiting). Hosts are drawn at random over what phase.Step reads
// of an idle host: its plan (none, idle with a past cycle, or under way), its
// record (none, asking or not, from a boot the last cycle left), its node
// (none, draining by rollboot or another, or not), and a request, cancel or
// release before or after its need.
func TestQuietSteps(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(rng *rand.Rand) time.Time { return now.Add(time.Duration(rng.IntN(7)-3) * time.Hour) }
	c := &Coordinator{}
	c.opt.DefaultOptions.MaxUptime = 2 * time.Hour // due for some hosts, not for others
	quietN, stepped := 0, 0
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 14))
		s := &snapshot{now: now, plans: map[string]store.Plan{}, hosts: map[string]*hostView{},
			control: store.Control{Requests: map[string]store.Request{}, Cancels: map[string]time.Time{}, Releases: map[string]time.Time{}}}
		adm := admission.Result{Admitted: map[string]bool{}, Wait: map[string]phase.WaitReason{}}
		for i := range 200 {
			name := fmt.Sprintf("h%03d", i)
			hv := &hostView{group: "default"}
			if rng.IntN(4) > 0 {
				hv.rec = &store.HostRecord{Host: name, BootID: fmt.Sprint("boot-", rng.IntN(2)),
					RebootRequired: rng.IntN(3) == 0, RequestedAt: at(rng), Reason: "kernel"}
				if rng.IntN(2) == 0 {
					hv.rec.BootedAt = at(rng)
				}
			}
			switch rng.IntN(4) {
			case 0: // no plan
			case 1:
				s.plans[name] = store.Plan{Host: name, Phase: store.PhaseIdle, GoneBootID: "boot-0",
					LastCompleted: at(rng), Waiting: []string{"", "paused"}[rng.IntN(2)], ModifyIndex: uint64(i + 1)}
			case 2:
				s.plans[name] = store.Plan{Host: name, ModifyIndex: uint64(i + 1)} // a plan without a phase is idle
			default:
				s.plans[name] = store.Plan{Host: name, Phase: store.PhasePending, RequestedAt: at(rng),
					Timeline: map[string]time.Time{store.PhasePending: at(rng)}}
			}
			if rng.IntN(6) == 0 {
				s.control.Requests[name] = store.Request{At: at(rng)}
			}
			if rng.IntN(6) == 0 {
				s.control.Cancels[name] = []time.Time{{}, at(rng)}[rng.IntN(2)]
			}
			if rng.IntN(6) == 0 {
				s.control.Releases[name] = at(rng)
			}
			if rng.IntN(3) > 0 { // its node: draining by rollboot, by someone else, or not
				hv.node = &phase.NodeView{ID: "node-" + name, Status: "ready", Eligible: rng.IntN(2) == 0, Draining: rng.IntN(3) == 0,
					DrainGrant: []string{"", "g-old"}[rng.IntN(2)], DrainRestores: rng.IntN(2) == 0,
					DrainStatus: []string{"", "draining", "complete", "canceled"}[rng.IntN(4)], DrainStartedAt: at(rng)}
			}
			adm.Admitted[name] = rng.IntN(2) == 0
			s.hosts[name] = hv
			s.names = append(s.names, name)
		}
		for _, name := range s.names {
			in := c.input(s, adm, name)
			d := phase.Step(in)
			if !nothingToDecide(s, s.hosts[name], name, hostPhase(s.plans[name]) != store.PhaseIdle, c.opt.DefaultOptions.MaxUptime) {
				stepped++
				continue
			}
			quietN++
			if d.Changes() || d.ClearCancel || d.Waiting != (phase.WaitReason{}) || d.Event != "" ||
				d.Plan.Phase != store.PhaseIdle {
				t.Fatalf("seed %d host %s is quiet, but phase.Step decides %+v on %+v", seed, name, d, in)
			}
		}
	}
	if quietN < 1000 || stepped < 1000 {
		t.Fatalf("%d quiet hosts and %d stepped: the draw does not cover both", quietN, stepped)
	}
}
