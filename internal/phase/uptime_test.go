package phase

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// A host up longer than its group's max_uptime (its jitter added) needs a
// reboot, with the lowest priority: a package need or a request is the
// reason when there is one, and overtakes a waiting uptime need.
func TestUptimeNeed(t *testing.T) {
	const limit = 30 * 24 * time.Hour
	due, _ := policy.UptimeDue("h1", t0.Add(-limit-policy.UptimeJitter("h1", limit)), limit) // due exactly at t0
	bootedLong := t0.Add(-limit - policy.UptimeJitter("h1", limit))
	uptimeReason := policy.UptimeReason("h1", limit)
	up := func(booted time.Time, required bool) *store.HostRecord {
		h := host("b1", required)
		h.BootedAt = booted
		return h
	}
	idle := plan(store.PhaseIdle, nil)
	pendingUptime := plan(store.PhasePending, func(p *store.Plan) {
		p.GrantID, p.Reason, p.UptimeBootedAt, p.RequestedAt = "", uptimeReason, bootedLong, due
	})
	tests := []struct {
		name      string
		plan      store.Plan
		host      *store.HostRecord
		maxUptime time.Duration
		cancelAt  time.Time
		request   *store.Request
		phase     string
		reason    string
		booted    time.Time // the plan's UptimeBootedAt
		write     bool
	}{
		{name: "up longer than max_uptime: pending", plan: idle, host: up(bootedLong, false), maxUptime: limit,
			phase: store.PhasePending, reason: uptimeReason, booted: bootedLong, write: true},
		{name: "not up long enough yet (the jitter counts)", plan: idle, host: up(bootedLong.Add(time.Second), false), maxUptime: limit,
			phase: store.PhaseIdle},
		{name: "no max_uptime", plan: idle, host: up(bootedLong, false), phase: store.PhaseIdle},
		{name: "no boot time published", plan: idle, host: up(time.Time{}, false), maxUptime: limit, phase: store.PhaseIdle},
		{name: "a package need is the reason when both", plan: idle, host: up(bootedLong, true), maxUptime: limit,
			phase: store.PhasePending, reason: "sentinel", write: true},
		{name: "a request is the reason when both", plan: idle, host: up(bootedLong, false), maxUptime: limit,
			request: &store.Request{At: t0.Add(-time.Minute), Reason: "kernel"},
			phase:   store.PhasePending, reason: "manual request: kernel", write: true},
		{name: "canceled after it fell due", plan: idle, host: up(bootedLong, false), maxUptime: limit, cancelAt: due,
			phase: store.PhaseIdle},
		{name: "a cancel before it fell due does not suppress it", plan: idle, host: up(bootedLong, false), maxUptime: limit,
			cancelAt: due.Add(-time.Second), phase: store.PhasePending, reason: uptimeReason, booted: bootedLong, write: true},
		{name: "a record of a boot the host left makes none", plan: plan(store.PhaseIdle, func(p *store.Plan) { p.GoneBootID = "b1" }),
			host: up(bootedLong, false), maxUptime: limit, phase: store.PhaseIdle},
		{name: "a package need overtakes a waiting uptime need", plan: pendingUptime, host: up(bootedLong, true), maxUptime: limit,
			phase: store.PhasePending, reason: "sentinel", write: true},
		{name: "a waiting uptime need stays as it is", plan: pendingUptime, host: up(bootedLong, false), maxUptime: limit,
			phase: store.PhasePending, reason: uptimeReason, booted: bootedLong},
		{name: "a waiting uptime need after the reboot it asked for is gone", plan: pendingUptime, host: up(t0.Add(-time.Minute), false),
			maxUptime: limit, phase: store.PhaseIdle, reason: uptimeReason, booted: bootedLong, write: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Now: t0, Plan: tt.plan, Host: tt.host, Node: node(nil), Timing: timing, MaxUptime: tt.maxUptime,
				CancelAt: tt.cancelAt, Request: tt.request}
			d := Step(in)
			if d.Plan.Phase != tt.phase || d.Write != tt.write {
				t.Fatalf("phase %s (write %v), want %s (write %v); waiting %v", d.Plan.Phase, d.Write, tt.phase, tt.write, d.Waiting)
			}
			if tt.phase == store.PhasePending && (d.Plan.Reason != tt.reason || !d.Plan.UptimeBootedAt.Equal(tt.booted)) {
				t.Errorf("reason %q, uptime boot %s; want %q, %s", d.Plan.Reason, d.Plan.UptimeBootedAt, tt.reason, tt.booted)
			}
		})
	}
}
