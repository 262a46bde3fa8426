package wavekeep

import (
	"errors"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/wave"
)

// When <prefix>/waves cannot be read or stored, every queued host of a wave
// in a group with canaries or an order waits, saying why (fail closed); a host
// in no wave (no fingerprint) and a group without either go as before.
func TestWaveHoldsFailClosed(t *testing.T) {
	rec := func(name, fp string) *store.HostRecord {
		return &store.HostRecord{Host: name, RebootRequired: true, Fingerprint: fp}
	}
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	v := View{Rules: wave.Rules{"web": {Canaries: 1}}, Err: errors.New("read the waves: unexpected EOF")}
	plans := map[string]store.Plan{}
	var queue []admission.Pending
	for _, q := range []struct{ host, group, fp string }{{"a", "web", "k1"}, {"b", "web", ""}, {"c", "db", "k1"}} {
		plans[q.host] = store.Plan{Host: q.host, Phase: store.PhasePending}
		queue = append(queue, admission.Pending{Request: policy.Request{Host: q.host, Group: q.group}, Rec: rec(q.host, q.fp)})
	}
	holds, _ := Holds(v, plans, queue, t0)
	if len(holds) != 1 || holds["a"].Kind != phase.WaitWaveUnknown {
		t.Fatalf("holds %v, want a alone held with wave_unknown", holds)
	}
	v.Err, v.State = nil, wave.State{Waves: []wave.Wave{{Group: "web", Fingerprint: "k1", Seen: t0}}}
	if holds, _ := Holds(v, plans, queue, t0); len(holds) != 0 {
		t.Fatalf("with the waves read: holds %v, want none (a goes as the canary)", holds)
	}
}
