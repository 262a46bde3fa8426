package status

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// A host is held when its plan stores why it waits (a hold an operator may
// have to act on), not when it waits for its turn or its next step, and when
// a cancel makes the coordinator ignore its agent's need: the status page
// shows held hosts apart from queued ones.
func TestHeld(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	hosts := []store.HostRecord{
		{Host: "queued", RebootRequired: true}, {Host: "window", RebootRequired: true},
		{Host: "draining", RebootRequired: true}, {Host: "canceled", RebootRequired: true, RequestedAt: at.Add(-time.Hour)},
		{Host: "idle"},
	}
	plans := map[string]store.Plan{
		"queued": {Host: "queued", Group: "web", Phase: store.PhasePending, RequestedAt: at},
		"window": {Host: "window", Group: "web", Phase: store.PhasePending, Waiting: "group web: outside its windows",
			WaitingKind: "group_budget", RequestedAt: at},
		"draining": {Host: "draining", Group: "web", Phase: store.PhaseDraining},
	}
	v := Build(hosts, plans, store.Control{Cancels: map[string]time.Time{"canceled": at}})
	got := map[string]string{}
	for _, h := range v.Hosts {
		got[h.Host] = fmt.Sprint(h.Held, " ", h.HoldKind)
	}
	want := map[string]string{"queued": "false ", "window": "true group_budget", "draining": "false ", "canceled": "true canceled_need", "idle": "false "}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("held: got %v, want %v", got, want)
	}
}

// The groups' slot limits the leader recorded come with the policy.
func TestReadPolicySlots(t *testing.T) {
	p := readPolicy(context.Background(), policyStore{recErr: store.ErrNotFound,
		e: store.Enforcement{Leader: "h1", Slots: map[string]int{"web": 2, "default": 1}}})
	if !reflect.DeepEqual(p.Slots, map[string]int{"web": 2, "default": 1}) {
		t.Errorf("slots %v", p.Slots)
	}
}
