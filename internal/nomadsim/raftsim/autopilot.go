package raftsim

// What the leader's autopilot adds on top of Raft, the same in Nomad, Consul and
// Vault (they all embed hashicorp/raft-autopilot):
//
//   - State reset. Autopilot runs only on the leader. When leadership ends its
//     state is zeroed (run.go beginExecution: a.state = &State{}), and a new
//     leader starts from that empty state (nomad/leader.go establishLeadership →
//     autopilot.Start). The first state pass (state.go updateState) sees every
//     server as new, so every StableSince restarts then (nextServers). With
//     Config.StateAtStart (Nomad, raft-autopilot v0.1.6 in Nomad 1.9 to 2.0)
//     that pass runs inside Start (run.go Start: updateState before
//     beginExecution), at the election, so the health endpoints always report a
//     state computed by the new leader. Without it (Consul and Vault here) the
//     emulator runs the first pass Config.UpdateInterval after the election and
//     until then the health endpoints report no servers and Healthy=false:
//     Consul answers 429, Vault's autopilot state says healthy=false with no
//     servers. The first leader of a cluster counts as already running: its
//     first leader has a state.
//   - Promotion. Each reconcile pass (AutopilotPass; run.go beginExecution's
//     reconcileTicker) promotes every healthy non-voter whose health has been
//     stable for Config.StabilizationTime (stable_promoter.go
//     CalculatePromotionsAndDemotions, types.go IsStable). While autopilot has run
//     for less than that time, stability is not required (types.go
//     State.ServerStabilizationTime).
//   - Dead-server cleanup. After the promotions the same pass removes failed
//     servers when Config.CleanupDeadServers is on (reconcile.go
//     pruneDeadServers): failed non-voters first, then failed voters, each class
//     within the budget (potential voters − 1) / 2 (adjudicateRemoval;
//     min_quorum, 0 by default, is not modelled). Nomad removes a failed server
//     through Serf (nomad/autopilot.go RemoveFailedServer → RemoveFailedNode,
//     then the leader's reconcileMember removes the Raft peer); the emulator
//     removes it at once.
//   - Rejoin. A removed server that is alive again is added back by the leader as
//     a non-voter (nomad/leader.go addRaftPeer, Consul leader.go joinConsulServer:
//     AddNonvoter with Raft protocol 3); a server still in the configuration keeps
//     its suffrage. Without a leader nothing is added until one is elected.

import "time"

// EventRemoved, EventRejoined and EventPromoted record autopilot's changes to the
// Raft configuration. Details: "product" (nomad, consul, vault) and "id".
const (
	EventRemoved  = "server.removed"
	EventRejoined = "server.rejoined" // added back as a non-voter
	EventPromoted = "server.promoted"
)

// autopilotRun is the leader's autopilot state as far as the emulator models it:
// whether the current leader ran its first state pass, and when.
type autopilotRun struct {
	gen   uint64    // bumped on every leadership change; stale timers compare it
	ready bool      // the current leader's first state pass ran
	first time.Time // when it ran (State.firstStateTime); zero for the bootstrap leader
}

// leaderChanged resets the state for a new leader (or none): the first pass
// runs after UpdateInterval. bootstrap marks the first leader of the cluster,
// whose autopilot counts as already running.
func (a *autopilotRun) leaderChanged(c *Cluster, hasLeader, bootstrap bool) {
	a.gen++
	a.ready, a.first = false, time.Time{}
	if !hasLeader {
		return
	}
	if bootstrap {
		a.ready = true
		return
	}
	if c.cfg.StateAtStart {
		a.ready, a.first = true, time.Now()
		return
	}
	gen := a.gen
	c.env.After(c.cfg.UpdateInterval, func() {
		if a.gen != gen {
			return
		}
		a.ready, a.first = true, time.Now()
		c.env.Wake()
		c.refresh(time.Now())
	})
}

// stableSince is a server's StableSince in the leader's state: the first pass
// starts every server's.
func (a *autopilotRun) stableSince(t time.Time) time.Time {
	if t.Before(a.first) {
		return a.first
	}
	return t
}

// AutopilotReady reports whether the leader's autopilot ran its first state
// pass: until then the health endpoints report an empty, unhealthy state.
func (c *Cluster) AutopilotReady() bool { return c.ap.ready }

// AutopilotPass is one reconcile pass of the leader's autopilot: promotions,
// then dead-server cleanup of the members whose host is down (Serf failed).
func (c *Cluster) AutopilotPass(now time.Time) {
	if c.leader == nil || !c.ap.ready || len(c.members) == 0 {
		return
	}
	c.refresh(now)
	for _, m := range c.members {
		if !m.voter && m.healthy && c.promotable(now, m) {
			m.voter = true
			c.configChanged(EventPromoted, m)
		}
	}
	if c.cfg.CleanupDeadServers {
		c.pruneDead()
	}
}

// promotable is StablePromoter's test for a healthy non-voter: stable for
// StabilizationTime, unless autopilot is younger than that
// (State.ServerStabilizationTime).
func (c *Cluster) promotable(now time.Time, m *Member) bool {
	min := c.cfg.StabilizationTime
	if now.Sub(c.ap.first) <= min {
		min = 0
	}
	return now.Sub(c.ap.stableSince(m.stableSince)) >= min
}

// pruneDead is the dead-server cleanup of one autopilot pass (raft-autopilot
// reconcile.go pruneDeadServers): failed non-voters first, then failed voters,
// each class within the removal budget of the members left.
func (c *Cluster) pruneDead() {
	for _, voters := range []bool{false, true} {
		var failed []*Member
		var isVoter []bool
		for _, m := range c.members {
			if !m.up && m.voter == voters {
				failed = append(failed, m)
				isVoter = append(isVoter, m.voter)
			}
		}
		for _, i := range Removals(len(c.members), isVoter) {
			c.Remove(failed[i])
		}
	}
}

// Removals is adjudicateRemoval for one class of failed servers: with potential
// voters in the configuration, at most (potential−1)/2 of them are removed, and
// no current voter once the budget is spent. It returns the indexes in
// failedVoter to remove.
func Removals(potential int, failedVoter []bool) []int {
	budget := (potential - 1) / 2
	var out []int
	for i, voter := range failedVoter {
		if voter && budget < 1 {
			continue
		}
		budget--
		out = append(out, i)
	}
	return out
}

// Remove takes m out of the Raft configuration, as autopilot's dead-server
// cleanup does; it rejoins as a non-voter once it is up and there is a leader.
func (c *Cluster) Remove(m *Member) {
	for i, x := range c.members {
		if x == m {
			c.members = append(c.members[:i:i], c.members[i+1:]...)
			break
		}
	}
	m.voter = false
	c.removed = append(c.removed, m)
	c.configChanged(EventRemoved, m)
}

// rejoin: the leader adds removed members that are up again as non-voters
// (nomad/leader.go addRaftPeer, Consul leader.go joinConsulServer → AddNonvoter).
func (c *Cluster) rejoin() {
	if c.leader == nil {
		return
	}
	keep := c.removed[:0]
	for _, m := range c.removed {
		if !m.up {
			keep = append(keep, m)
			continue
		}
		m.voter = false
		c.members = append(c.members, m)
		c.configChanged(EventRejoined, m)
	}
	c.removed = keep
}

// configChanged records a change of the Raft configuration (a Raft write).
func (c *Cluster) configChanged(typ string, m *Member) {
	c.configIndex = c.changed()
	c.env.Event(typ, m.Host, map[string]string{"product": c.cfg.Product, "id": m.ID})
}
