package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// A rebooted server host's Nomad and Consul servers come back as non-voters:
// autopilot's dead-server cleanup (on by default) removed them while the host was
// down, and promotes them only after the stabilization time, here far longer than
// server_stable_for. The host's slot is freed only once both are voters again, and
// no other server host reboots before that.
func TestServerSlotFreedOnlyWhenVoter(t *testing.T) {
	t.Parallel()
	const stabilization = 1500 * time.Millisecond
	c := newCluster(t, clusterOpts{servers: 3, coordinators: 1, autoUnseal: true, policy: quorumPolicy,
		coordExtra: `  server_stable_for = "200ms"`,
		simConfig: func(cfg *nomadsim.Config) {
			cfg.AutopilotStabilizationTime = stabilization
		}})
	servers := c.serverHosts()
	c.start()
	c.needReboot(servers...)
	nonVoterWait := map[string]bool{}
	c.waitFor("every server host rebooted", 180*time.Second, func() bool {
		for h, p := range c.plans() {
			if p.Phase == store.PhaseRejoining && strings.Contains(p.Waiting, "non-voter") {
				nonVoterWait[h] = true
			}
		}
		return c.rebootedAll(servers)()
	})
	c.mustHold(invariants.Spec{Reboots: each(servers, 1)})
	checkServerReboots(t, c, len(servers))

	// From the emulator's own log: when each host's servers were removed and
	// promoted, and when each host went down.
	removed, promoted := map[string]map[string]bool{}, map[string]time.Time{}
	rebootAt := map[string]time.Time{}
	for _, e := range c.sim.Events(0) {
		switch e.Type {
		case nomadsim.EventServerRemoved:
			if removed[e.Host] == nil {
				removed[e.Host] = map[string]bool{}
			}
			removed[e.Host][e.Details["product"]] = true
		case nomadsim.EventServerPromoted:
			promoted[e.Host] = e.Time // the last promotion of the host's servers
		case nomadsim.EventHostRebootStart:
			rebootAt[e.Host] = e.Time
		}
	}
	// The slot is freed by the close's writes: the history record, then the
	// plan. The record's Finished is the pass's clock, taken as the pass
	// starts, before it reads the clusters that let the slot go: the
	// emulator's time of the record's write is when the close was stored.
	grants := map[string]string{}
	for _, r := range c.history() {
		if r.Outcome == "rebooted" {
			grants[r.Host] = r.GrantID
		}
	}
	finished := map[string]time.Time{}
	for _, e := range c.sim.Events(0) {
		p := e.Details["path"]
		if e.Type != nomadsim.EventVarWrite || !strings.Contains(p, "/history/") {
			continue
		}
		for h, g := range grants {
			if strings.HasSuffix(p, "-"+h+"-"+g) && finished[h].IsZero() {
				finished[h] = e.Time
			}
		}
	}
	for _, h := range servers {
		if finished[h].IsZero() {
			t.Errorf("%s: no write of its history record in the emulator's log", h)
			continue
		}
		if !removed[h]["nomad"] || !removed[h]["consul"] || promoted[h].IsZero() {
			t.Errorf("%s: removed %v, promoted at %v: its servers did not rejoin as non-voters", h, removed[h], promoted[h])
			continue
		}
		t.Logf("%s: voter again %v after its reboot began; slot freed %v after that",
			h, promoted[h].Sub(rebootAt[h]).Round(time.Millisecond), finished[h].Sub(promoted[h]).Round(time.Millisecond))
		if finished[h].Before(promoted[h]) {
			t.Errorf("%s: slot freed at %v, before its servers were voters again (%v)", h, finished[h], promoted[h])
		}
		for _, other := range servers {
			if at := rebootAt[other]; at.After(rebootAt[h]) && at.Before(promoted[h]) {
				t.Errorf("%s rebooted at %v while %s's servers were not voters yet (%v)", other, at, h, promoted[h])
			}
		}
	}
	if len(nonVoterWait) == 0 {
		t.Errorf("no host ever waited for a non-voter to be promoted")
	}
}
