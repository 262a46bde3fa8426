package nomadsim

// What the leader's autopilot adds on top of Raft, the same in Nomad, Consul and
// Vault (they all embed hashicorp/raft-autopilot):
//
//   - State reset. Autopilot runs only on the leader. When leadership ends its
//     state is zeroed (run.go beginExecution: a.state = &State{}), and a new
//     leader starts from that empty state (nomad/leader.go establishLeadership →
//     autopilot.Start). Until its first state pass (state.go updateState) the
//     health endpoints report no servers and Healthy=false: Nomad and Consul
//     answer 429 (nomad/autopilot.go GetClusterHealth, Consul
//     operator_autopilot_endpoint.go ServerHealth), Vault's autopilot state says
//     healthy=false with no servers. The first pass sees every server as new, so
//     every StableSince restarts then (state.go buildServerState). The emulator
//     runs the first pass Config.AutopilotUpdateInterval after the election. The
//     cluster built by New counts as already running: its first leader has a state.
//   - Promotion. Each reconcile pass (Config.AutopilotInterval; run.go
//     beginExecution's reconcileTicker) promotes every healthy non-voter whose
//     health has been stable for Config.AutopilotStabilizationTime
//     (stable_promoter.go CalculatePromotionsAndDemotions, types.go IsStable). While
//     autopilot has run for less than that time, stability is not required
//     (types.go State.ServerStabilizationTime).
//   - Dead-server cleanup. After the promotions the same pass removes failed
//     servers when cleanup_dead_servers is on (reconcile.go pruneDeadServers):
//     failed non-voters first, then failed voters, each class within the budget
//     (potential voters − 1) / 2 (adjudicateRemoval; min_quorum, 0 by default, is
//     not modelled). Nomad removes a failed server through Serf
//     (nomad/autopilot.go RemoveFailedServer → RemoveFailedNode, then the leader's
//     reconcileMember removes the Raft peer); the emulator removes it at once.
//   - Rejoin. A removed server that is alive again is added back by the leader as
//     a non-voter (nomad/leader.go addRaftPeer, Consul leader.go joinConsulServer:
//     AddNonvoter with Raft protocol 3); a server still in the configuration keeps
//     its suffrage. Without a leader nothing is added until one is elected.

import "time"

// EventServerRemoved and EventServerPromoted record autopilot's changes to the
// Raft configuration. Details: "product" (nomad, consul, vault) and "id".
const (
	EventServerRemoved  = "server.removed"
	EventServerRejoined = "server.rejoined" // added back as a non-voter
	EventServerPromoted = "server.promoted"
)

// autopilotRun is the leader's autopilot state as far as the emulator models it:
// whether the current leader ran its first state pass, and when.
type autopilotRun struct {
	gen   uint64    // bumped on every leadership change; stale timers compare it
	ready bool      // the current leader's first state pass ran
	first time.Time // when it ran (State.firstStateTime); zero for the bootstrap leader
}

// leaderChangedLocked resets the state for a new leader (or none): the first pass
// runs after AutopilotUpdateInterval, then onReady. bootstrap marks the first
// leader of the cluster built by New, whose autopilot counts as already running.
func (a *autopilotRun) leaderChangedLocked(s *Sim, hasLeader, bootstrap bool, onReady func()) {
	a.gen++
	a.ready, a.first = false, time.Time{}
	if !hasLeader {
		return
	}
	if bootstrap {
		a.ready = true
		return
	}
	gen := a.gen
	s.after(s.cfg.AutopilotUpdateInterval, func() {
		if a.gen != gen {
			return
		}
		a.ready, a.first = true, time.Now()
		s.bumpLocked()
		onReady()
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

// promotable is StablePromoter's test for a healthy non-voter.
func (a *autopilotRun) promotable(s *Sim, now, stableSince time.Time) bool {
	min := s.cfg.AutopilotStabilizationTime
	if now.Sub(a.first) <= min { // State.ServerStabilizationTime: autopilot is young
		min = 0
	}
	return now.Sub(a.stableSince(stableSince)) >= min
}

// removals is adjudicateRemoval for one class of failed servers: with potential
// voters in the configuration, at most (potential−1)/2 of them are removed, and
// no current voter once the budget is spent. It returns the indexes in failed to
// remove.
func removals(potential int, failedVoter []bool) []int {
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

// pruneDeadLocked is the dead-server cleanup of one autopilot pass
// (raft-autopilot reconcile.go pruneDeadServers): failed non-voters first, then
// failed voters, each class within the removal budget of the members left.
// members reads the current configuration, dead and voter describe a member,
// and remove takes one out.
func pruneDeadLocked[M any](members func() []M, dead, voter func(M) bool, remove func(M)) {
	for _, voters := range []bool{false, true} {
		var failed []M
		var isVoter []bool
		all := members()
		for _, m := range all {
			if dead(m) && voter(m) == voters {
				failed = append(failed, m)
				isVoter = append(isVoter, voter(m))
			}
		}
		for _, i := range removals(len(all), isVoter) {
			remove(failed[i])
		}
	}
}
