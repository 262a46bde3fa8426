// Package raftsim is the Raft membership model of the emulated servers: Nomad's
// (internal/nomadsim), Consul's (consulsim) and Vault's (vaultsim). The three
// products embed hashicorp/raft and hashicorp/raft-autopilot, so one model serves
// them all: the Raft configuration (voters and non-voters), leadership and
// elections, each member's health as autopilot computes it (raft-autopilot
// state.go), and what the leader's autopilot adds (autopilot.go).
//
// Model. A member "participates" when its host is up (Serf alive) and it is not
// detached (a sealed or uninitialized Vault node does not run Raft). A
// participating member that is not stalled (SetStalled) and has caught up after
// (re)joining follows the leader; autopilot counts the leader and the following
// members healthy: they have recent contact, the leader's term and a current log.
// The others keep the term, index and contact time they had when they stopped
// following. (Autopilot's own ServerStabilizationTime only gates promotions; the
// unhealthy period after a (re)join, Config.CatchUpTime, models the time a
// restarted server needs to replay and catch up its log.)
//
// Leadership. Losing the leader (its host down, a Vault seal or step-down, a
// stalled leader or one without a quorum after Config.ElectionTime) leaves the
// cluster without a leader; an election among the participating, non-stalled
// voters follows after ElectionTime when a quorum (voters/2+1) participates. A
// caught-up candidate wins over one still catching up (Raft's log check). Every
// leader change starts a new term, is a Raft write (the index moves) and is
// logged as Config.LeaderEvent.
//
// Locking. A Cluster has no lock of its own: every method runs with the
// emulator's state lock held, and so do the functions it gives Env.After.
package raftsim

import (
	"fmt"
	"slices"
	"time"
)

// Emulator is what every emulated product needs from the emulator around it
// (nomadsim.Sim). Its methods run with the emulator's state lock held.
type Emulator interface {
	// Wake tells whoever waits on the emulator's state to look again (WaitFor,
	// blocking queries), without a Raft write of the cluster.
	Wake()
	// After runs fn after d with the state lock held, unless the emulator closed.
	After(d time.Duration, fn func())
	// Event appends an entry to the emulator's event log.
	Event(typ, host string, details map[string]string)
	// Pick returns a random int in [0, n) from the emulator's seeded source.
	Pick(n int) int
}

// Env is what a Cluster needs: the emulator and the cluster's Raft index.
type Env interface {
	Emulator
	// Apply is one Raft write in the cluster: its index moves and the emulator
	// wakes its waiters. It returns the new index.
	Apply() uint64
	// Index is the cluster's current Raft index.
	Index() uint64
}

// OwnIndex is the Env of a cluster that keeps a Raft index of its own (Consul's,
// Vault's; Nomad's is the emulator's): Apply moves *N and wakes the emulator's
// waiters.
type OwnIndex struct {
	Emulator
	N *uint64
}

// Apply is one Raft write: the index moves and the emulator's waiters wake.
func (e OwnIndex) Apply() uint64 {
	*e.N++
	e.Wake()
	return *e.N
}

// Index is the cluster's current Raft index.
func (e OwnIndex) Index() uint64 { return *e.N }

// Config describes one product's cluster.
type Config struct {
	// Product names the product in the details of the configuration events
	// ("nomad", "consul", "vault").
	Product string
	// LeaderEvent is the event type of a leader elected or lost, HealthEvent
	// that of a member stalled, recovered or caught up.
	LeaderEvent, HealthEvent string
	// DownEvent and UpEvent, when set, record a member's host going down and the
	// member joining again (Nomad's server.down and server.up).
	DownEvent, UpEvent string
	// LeaderEventIndex adds the Raft index of the change to the leader event.
	LeaderEventIndex bool

	// ElectionTime is Raft's election timeout: how long after a change the
	// members elect a leader, or depose a stalled one.
	ElectionTime time.Duration
	// CatchUpTime is how long a member that (re)joined is unhealthy while it
	// catches up its log.
	CatchUpTime time.Duration
	// UpdateInterval is how long a new leader's autopilot takes to its first
	// state pass (its state update interval: Nomad's ServerHealthInterval),
	// unless StateAtStart.
	UpdateInterval time.Duration
	// StateAtStart: a new leader's autopilot computes its state as it starts,
	// before the leader serves (raft-autopilot run.go Start runs updateState
	// once before it launches its loops, as Nomad's establishLeadership calls
	// it), so the health endpoints are never empty after a leader change.
	StateAtStart bool
	// StabilizationTime is how long a non-voter must have been healthy before
	// autopilot promotes it (server_stabilization_time).
	StabilizationTime time.Duration
	// CleanupDeadServers is autopilot's cleanup_dead_servers.
	CleanupDeadServers bool

	// OnLeader, when set, runs at the end of every leader change; elected
	// reports whether there is a leader now.
	OnLeader func(elected bool)
	// StandIn, when set, makes the member of a configuration that has no other:
	// Nomad's implicit server of a cluster without server hosts (nomadsim
	// operator.go). It is elected without a vote and leaves the configuration
	// when the first member is added.
	StandIn func() *Member
}

// Member is one server in a Raft cluster.
type Member struct {
	ID   string // Raft ID
	Name string // node name
	Addr string // Raft address (ip:port)
	Host string // the host it runs on; "" for a stand-in

	voter     bool
	up        bool      // the host is up (Serf alive)
	detached  bool      // up but not running Raft (Vault: sealed or not initialized)
	stalled   bool      // SetStalled(true)
	holdUntil time.Time // stepped down: does not stand for election before this

	catchingUp bool // (re)joined less than CatchUpTime ago
	catchGen   uint64

	// Where it stood when it stopped following.
	lastTerm    uint64
	lastIndex   uint64
	lastContact time.Time

	healthy     bool
	stableSince time.Time // the last change of healthy
}

// Voter reports the member's Raft suffrage.
func (m *Member) Voter() bool { return m.voter }

// Up reports whether the member's host is up (Serf alive).
func (m *Member) Up() bool { return m.up }

// Stalled reports whether the member is alive but not applying the log.
func (m *Member) Stalled() bool { return m.stalled }

// Healthy is the member's health as autopilot last computed it.
func (m *Member) Healthy() bool { return m.healthy }

// LastIndex is the log index the member stopped at when it stopped following.
func (m *Member) LastIndex() uint64 { return m.lastIndex }

// LastContact is when the member last heard from a leader, if it stopped following.
func (m *Member) LastContact() time.Time { return m.lastContact }

// Participating reports whether the member runs Raft.
func (m *Member) Participating() bool { return m.up && !m.detached }

// Cluster is one product's Raft cluster with autopilot.
type Cluster struct {
	env Env
	cfg Config

	members     []*Member // the Raft configuration, in join order
	removed     []*Member // removed by the dead-server cleanup, not (yet) back
	standIn     *Member
	leader      *Member
	term        uint64
	configIndex uint64    // index of the last configuration change
	reconcileN  uint64    // generation of the pending reconcile timer
	leaderSince time.Time // when the current leader was elected
	leaderLost  time.Time // when the last leader was lost
	withheld    bool      // no election while set (Nomad's SetLeaderLost)

	ap autopilotRun
}

// New returns an empty cluster.
func New(env Env, cfg Config) *Cluster {
	return &Cluster{env: env, cfg: cfg}
}

// Members is the Raft configuration: the members in join order, or the stand-in
// while there is none.
func (c *Cluster) Members() []*Member {
	if len(c.members) == 0 && c.standIn != nil {
		return []*Member{c.standIn}
	}
	return c.members
}

// Removed are the members the dead-server cleanup removed that are not back yet.
func (c *Cluster) Removed() []*Member { return c.removed }

// ByID is the member with Raft ID id, or nil.
func (c *Cluster) ByID(id string) *Member {
	for _, m := range c.Members() {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// ByHost is the member on host, or nil (also when autopilot removed it).
func (c *Cluster) ByHost(host string) *Member {
	for _, m := range c.members {
		if m.Host == host {
			return m
		}
	}
	return nil
}

// RemovedByHost is the removed member on host, or nil.
func (c *Cluster) RemovedByHost(host string) *Member {
	for _, m := range c.removed {
		if m.Host == host {
			return m
		}
	}
	return nil
}

// Find is the server on host, in the configuration or removed from it, or nil.
func (c *Cluster) Find(host string) *Member {
	if m := c.ByHost(host); m != nil {
		return m
	}
	return c.RemovedByHost(host)
}

// Leader is the leader, or nil.
func (c *Cluster) Leader() *Member { return c.leader }

// Term is the current Raft term.
func (c *Cluster) Term() uint64 { return c.term }

// ConfigIndex is the index of the last change of the Raft configuration.
func (c *Cluster) ConfigIndex() uint64 { return c.configIndex }

// LeaderSince is when the current leader was elected.
func (c *Cluster) LeaderSince() time.Time { return c.leaderSince }

// LeaderLost is when the cluster last lost its leader (zero: never).
func (c *Cluster) LeaderLost() time.Time { return c.leaderLost }

// Following reports whether m, not the leader, follows it.
func (c *Cluster) Following(m *Member) bool {
	return c.leader != nil && m != c.leader && m.Participating() && !m.stalled && !m.catchingUp
}

// changed is one Raft write: the index moves and health is recomputed.
func (c *Cluster) changed() uint64 {
	idx := c.env.Apply()
	c.refresh(time.Now())
	return idx
}

// freeze records where m stands when it stops following (a stalled leader
// stopped when it stalled).
func (c *Cluster) freeze(m *Member) {
	if (m == c.leader && !m.stalled) || c.Following(m) {
		m.lastTerm, m.lastIndex, m.lastContact = c.term, c.env.Index(), time.Now()
	}
}

func (c *Cluster) freezeAll() {
	for _, m := range c.Members() {
		c.freeze(m)
	}
}

// refresh recomputes health; StableSince is the last change of Healthy
// (raft-autopilot state.go).
func (c *Cluster) refresh(now time.Time) {
	for _, m := range c.Members() {
		h := m == c.leader || c.Following(m)
		if h != m.healthy {
			m.healthy, m.stableSince = h, now
		}
	}
}

// seat makes m a voter that has just joined.
func (c *Cluster) seat(m *Member, up bool) {
	now := time.Now()
	m.voter, m.up = true, up
	m.stableSince, m.lastContact = now, now
	m.lastTerm, m.lastIndex = c.term, c.env.Index()
}

// Add adds m as a voter to the Raft configuration (a configuration change is a
// Raft write); up tells whether its host is up. The first member replaces the
// stand-in.
func (c *Cluster) Add(m *Member, up bool) {
	if len(c.members) == 0 && c.standIn != nil && c.leader == c.standIn {
		c.ClearLeader("implicit server replaced")
	}
	c.seat(m, up)
	c.members = append(c.members, m)
	c.configIndex = c.changed()
}

// quorum reports whether a majority of the voters participates.
func (c *Cluster) quorum() bool {
	voters, alive := 0, 0
	for _, m := range c.Members() {
		if m.voter {
			voters++
			if m.Participating() {
				alive++
			}
		}
	}
	return voters > 0 && alive >= voters/2+1
}

// SetWithheld stops elections (true) until it is called with false: Nomad's
// SetLeaderLost. It neither deposes nor elects a leader itself.
func (c *Cluster) SetWithheld(withheld bool) { c.withheld = withheld }

// Elect elects a leader now when there is none, elections are not withheld and a
// quorum participates. A Vault node that stepped down does not take the lock
// before its hold time (vault/ha.go manualStepDownSleepPeriod).
func (c *Cluster) Elect() {
	if c.withheld || c.leader != nil {
		return
	}
	if len(c.members) == 0 && c.cfg.StandIn != nil {
		if c.standIn == nil {
			c.standIn = c.cfg.StandIn()
			c.seat(c.standIn, true)
		}
		c.setLeader(c.standIn, "election")
		return
	}
	if !c.quorum() {
		return
	}
	now := time.Now()
	ready, nextHold := c.candidates(now)
	if len(ready) == 0 {
		if !nextHold.IsZero() {
			c.scheduleReconcileAt(nextHold.Sub(now))
		}
		return
	}
	c.setLeader(ready[c.env.Pick(len(ready))], "election")
}

// candidates are the voters that may win an election now: the caught-up ones, or
// when there is none those still catching up; and when the next member on hold
// may stand.
func (c *Cluster) candidates(now time.Time) (ready []*Member, nextHold time.Time) {
	var behind []*Member
	for _, m := range c.members {
		if !m.voter || !m.Participating() || m.stalled {
			continue
		}
		if now.Before(m.holdUntil) {
			if nextHold.IsZero() || m.holdUntil.Before(nextHold) {
				nextHold = m.holdUntil
			}
			continue
		}
		if m.catchingUp {
			behind = append(behind, m)
		} else {
			ready = append(ready, m)
		}
	}
	if len(ready) == 0 {
		ready = behind
	}
	return ready, nextHold
}

// Transfer makes m the leader (hashicorp/raft LeadershipTransferToServer, once
// the caller checked that m can take it).
func (c *Cluster) Transfer(m *Member) { c.setLeader(m, "leadership transfer") }

// setLeader makes m the leader in a new term.
func (c *Cluster) setLeader(m *Member, reason string) {
	prev := c.leader
	if prev != nil {
		c.freezeAll()
	}
	c.leader = m
	c.leaderSince = time.Now()
	c.term++
	m.catchingUp = false
	m.catchGen++
	idx := c.changed()
	c.ap.leaderChanged(c, true, prev == nil && c.term == 1)
	prevID := ""
	if prev != nil {
		prevID = prev.ID
	}
	c.leaderEvent(m.Host, idx, map[string]string{"id": m.ID, "address": m.Addr, "previous": prevID,
		"term": fmt.Sprint(c.term), "reason": reason})
	c.rejoin()
	if c.cfg.OnLeader != nil {
		c.cfg.OnLeader(true)
	}
}

// ClearLeader leaves the cluster without a leader.
func (c *Cluster) ClearLeader(reason string) {
	prev := c.leader
	if prev == nil {
		return
	}
	c.freezeAll()
	c.leader = nil
	c.leaderLost = time.Now()
	idx := c.changed()
	c.ap.leaderChanged(c, false, false)
	c.leaderEvent("", idx, map[string]string{"id": "", "previous": prev.ID,
		"term": fmt.Sprint(c.term), "reason": reason})
	if c.cfg.OnLeader != nil {
		c.cfg.OnLeader(false)
	}
}

func (c *Cluster) leaderEvent(host string, idx uint64, d map[string]string) {
	if c.cfg.LeaderEventIndex {
		d["index"] = fmt.Sprint(idx)
	}
	c.env.Event(c.cfg.LeaderEvent, host, d)
}

// StepDown: the leader gives up leadership and does not stand again for hold
// (Vault's sys/step-down); the others elect a leader after ElectionTime.
func (c *Cluster) StepDown(hold time.Duration) {
	l := c.leader
	if l == nil {
		return
	}
	l.holdUntil = time.Now().Add(hold)
	c.ClearLeader("step-down")
	c.scheduleReconcile()
}

func (c *Cluster) scheduleReconcile() { c.scheduleReconcileAt(c.cfg.ElectionTime) }

// scheduleReconcileAt runs reconcile after d (the latest schedule wins).
func (c *Cluster) scheduleReconcileAt(d time.Duration) {
	c.reconcileN++
	n := c.reconcileN
	c.env.After(d, func() {
		if c.reconcileN == n {
			c.reconcile()
		}
	})
}

// reconcile is what Raft does after an election timeout: a stalled leader or one
// without a quorum steps down, then an election runs if possible.
func (c *Cluster) reconcile() {
	if l := c.leader; l != nil && (l.stalled || !l.Participating() || !c.quorum()) {
		c.ClearLeader("leader lost contact with quorum")
	}
	c.Elect()
}

// leave: m stops participating (why says how). A leader is gone at once; the
// others elect a new one after ElectionTime if a quorum is left.
func (c *Cluster) leave(m *Member, why func()) {
	c.freeze(m)
	why()
	m.catchingUp = false
	m.catchGen++
	if c.leader == m {
		c.ClearLeader("leader down")
	} else {
		c.changed()
	}
	c.scheduleReconcile()
}

// HostDown: m's host went down; Serf marks it failed. A removed member only
// goes down (it is no Raft peer).
func (c *Cluster) HostDown(m *Member) {
	if slices.Contains(c.removed, m) {
		m.up, m.catchingUp = false, false
		m.catchGen++
		return
	}
	c.leave(m, func() {
		m.up = false
		if c.cfg.DownEvent != "" {
			c.env.Event(c.cfg.DownEvent, m.Host, map[string]string{"id": m.ID})
		}
	})
}

// HostUp: m's host is back. Unless detached (a Vault node that starts sealed) it
// joins again: Serf-alive at once, unhealthy until it caught up; a removed member
// rejoins as a non-voter when there is a leader.
func (c *Cluster) HostUp(m *Member, detached bool) {
	m.up, m.detached = true, detached
	if detached {
		c.changed()
		return
	}
	c.join(m)
}

// Detach: m, up, stops running Raft (Vault sealed).
func (c *Cluster) Detach(m *Member) { c.leave(m, func() { m.detached = true }) }

// Attach: m runs Raft again (Vault unsealed) and catches up.
func (c *Cluster) Attach(m *Member) {
	m.detached = false
	c.join(m)
}

// join: m participates again. It is unhealthy until it caught up (CatchUpTime);
// a cluster without a leader elects one after ElectionTime if the quorum is back.
func (c *Cluster) join(m *Member) {
	m.catchingUp = true
	m.catchGen++
	gen := m.catchGen
	if c.cfg.UpEvent != "" {
		c.env.Event(c.cfg.UpEvent, m.Host, map[string]string{"id": m.ID})
	}
	c.changed()
	c.env.After(c.cfg.CatchUpTime, func() {
		if m.catchGen != gen {
			return
		}
		m.catchingUp = false
		c.changed()
		c.env.Event(c.cfg.HealthEvent, m.Host, map[string]string{
			"id": m.ID, "healthy": fmt.Sprint(m.healthy), "reason": "caught up"})
		if c.leader == nil {
			c.Elect()
		}
	})
	c.rejoin()
	if c.leader == nil {
		c.scheduleReconcile()
	}
}

// SetStalled makes m a stalled member (true): alive, but it stops applying the
// log, so its contact, term and index go stale and autopilot counts it
// unhealthy; a stalled leader is deposed after ElectionTime. false makes it
// follow again.
func (c *Cluster) SetStalled(m *Member, stalled bool) {
	if stalled {
		c.freeze(m)
	}
	m.stalled = stalled
	c.changed()
	c.env.Event(c.cfg.HealthEvent, m.Host, map[string]string{
		"id": m.ID, "healthy": fmt.Sprint(!stalled), "reason": "injected"})
	c.scheduleReconcile()
}

// Health is the cluster's state as raft-autopilot computes it.
type Health struct {
	Healthy          bool // every server is healthy
	FailureTolerance int  // max(0, healthy voters − (voters/2+1))
	Voters           []string
	Servers          []Server
}

// Server is one member as autopilot reports it.
type Server struct {
	Member      *Member
	Leader      bool
	LastTerm    uint64
	LastIndex   uint64
	LastContact time.Duration
	StableSince time.Time // in the leader's autopilot state
}

// Health is raft-autopilot's cluster state (nomad/autopilot.go GetClusterHealth,
// Consul and Vault alike): FailureTolerance = max(0, healthy voters −
// (voters/2+1)); Healthy only when every server is. It is Raft's true state:
// the endpoints show an empty state until a new leader's first pass
// (AutopilotReady).
func (c *Cluster) Health() Health {
	now := time.Now()
	c.refresh(now)
	out := Health{Healthy: true, Voters: []string{}}
	voters, healthyVoters := 0, 0
	for _, m := range c.Members() {
		v := Server{Member: m, Leader: m == c.leader, StableSince: c.ap.stableSince(m.stableSince)}
		if v.Leader || c.Following(m) {
			v.LastTerm, v.LastIndex = c.term, c.env.Index()
		} else {
			v.LastTerm, v.LastIndex = m.lastTerm, m.lastIndex
			v.LastContact = now.Sub(m.lastContact)
		}
		if m.voter {
			voters++
			out.Voters = append(out.Voters, m.ID)
			if m.healthy {
				healthyVoters++
			}
		}
		if !m.healthy {
			out.Healthy = false
		}
		out.Servers = append(out.Servers, v)
	}
	out.FailureTolerance = max(0, healthyVoters-(voters/2+1))
	return out
}

// Route is the host a cluster address forwards to (Consul's service address,
// Vault's active.vault.service): the leader's, or the first member's that is up
// when there is no leader ("" when none is up).
func (c *Cluster) Route() string {
	if l := c.Leader(); l != nil && l.Up() {
		return l.Host
	}
	for _, m := range c.Members() {
		if m.Up() {
			return m.Host
		}
	}
	return ""
}
