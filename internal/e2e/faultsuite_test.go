package e2e

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// The seeded fault suite: whole rollouts with real rollboot processes (an agent
// per host, two standalone coordinators) against the emulator with ACLs on, under
// faults chosen by the seed. After the faults end every request must complete (a
// host that never returns must end stuck first), the independent invariant
// checker must pass, no process may exit by itself, and no log may show a token.
//
//	go test ./internal/e2e -run 'TestFaults$'              # the fixed CI seeds
//	go test ./internal/e2e -run 'TestFaults$' -seeds=50    # seeds 1..50
//	go test ./internal/e2e -run 'TestFaults$' -seeds=30 -seeds-from=61   # seeds 61..90
//	go test ./internal/e2e -run 'TestFaults$' -seed=7 -v   # replay one seed
var (
	faultSeeds     = flag.Int("seeds", 0, "TestFaults: run N seeds (1..N, or from -seeds-from) instead of the fixed CI set")
	faultSeedsFrom = flag.Uint64("seeds-from", 1, "TestFaults: the first of the -seeds seeds")
	faultSeed      = flag.Uint64("seed", 0, "TestFaults: run this one seed")
)

// faultKind is one fault the suite can inject.
type faultKind int

const (
	faultLeaderKill       faultKind = iota // kill -9 of the leading coordinator at a random phase point
	faultLeaderStop                        // SIGSTOP of the leader past 2×TTL + lock delay, then SIGCONT
	faultAgentKill                         // an agent killed between its grant and its reboot
	faultRebootFails                       // the reboot command fails (each host's first attempt)
	faultHookFails                         // a pre-reboot hook fails (each host's first attempt)
	faultAPIBursts                         // bursts of 500, 429 and latency (one at the agents' start)
	faultNomadLeaderLoss                   // the Nomad servers lose their leader while a server host runs its hooks and delay
	faultNeverReturns                      // a host that goes down and does not boot (until the block is lifted)
	faultDrainStuck                        // drains that cannot finish (batch work outlives the deadline) for a while
	faultRequestHangs                      // requests accepted and never answered (node calls: drains, eligibility, allocations)
	faultOperatorDrain                     // an operator drains a pending host (its system jobs too), then gives it back
	faultOperatorMidCycle                  // an operator makes a node in its cycle eligible, drains it, or cancels rollboot's drain
	numFaults
)

var faultNames = [numFaults]string{"leader-kill", "leader-stop", "agent-kill", "reboot-fails", "hook-fails",
	"api-bursts", "nomad-leader-loss", "never-returns", "drain-stuck", "request-hangs", "operator-drain", "operator-mid-cycle"}

// ciSeeds run with `go test ./...`: together they cover every fault kind (see
// TestFaultSeedsCoverEveryFault).
var ciSeeds = []uint64{4, 6, 19, 26, 44, 46}

// scenario is what a seed chose.
type scenario struct {
	seed   uint64
	rng    *rand.Rand
	faults []faultKind
	delay  time.Duration // the agents' reboot delay
}

func (s *scenario) has(f faultKind) bool { return slices.Contains(s.faults, f) }

func (s *scenario) String() string {
	var names []string
	for _, f := range s.faults {
		names = append(names, faultNames[f])
	}
	return fmt.Sprintf("seed %d: %s, reboot delay %s", s.seed, strings.Join(names, " + "), s.delay)
}

// scenarioFor picks a seed's faults: seed mod the number of kinds, plus one more
// drawn at random, so that any run of consecutive seeds covers every kind.
func scenarioFor(seed uint64) *scenario {
	s := &scenario{seed: seed, rng: rand.New(rand.NewPCG(seed, seed*7919+1))}
	s.faults = []faultKind{faultKind(seed % uint64(numFaults))}
	if extra := faultKind(s.rng.IntN(int(numFaults))); extra != s.faults[0] {
		s.faults = append(s.faults, extra)
	}
	s.delay = time.Duration(300+s.rng.IntN(900)) * time.Millisecond
	if s.has(faultNomadLeaderLoss) || s.has(faultAgentKill) {
		s.delay += 1500 * time.Millisecond // room to act between the grant and the reboot
	}
	return s
}

func TestFaultSeedsCoverEveryFault(t *testing.T) {
	seen := map[faultKind]bool{}
	for _, seed := range ciSeeds {
		for _, f := range scenarioFor(seed).faults {
			seen[f] = true
		}
	}
	for f := range numFaults {
		if !seen[f] {
			t.Errorf("no CI seed injects %s", faultNames[f])
		}
	}
}

func TestFaults(t *testing.T) {
	seeds := ciSeeds
	switch {
	case *faultSeed != 0:
		seeds = []uint64{*faultSeed}
	case *faultSeeds > 0:
		seeds = nil
		for i := range uint64(*faultSeeds) {
			seeds = append(seeds, max(*faultSeedsFrom, 1)+i)
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			runFaultSeed(t, scenarioFor(seed))
		})
	}
}

// hook and reboot command that fail on a host's first attempt (a counter in the
// host's folder), with a message on stderr, as a full disk or a refused reboot does.
func failFirst(name string, status int, msg string, then string) []string {
	script := fmt.Sprintf(`f={{host_dir}}/%s; n=$(cat "$f" 2>/dev/null || echo 0); echo $((n+1)) > "$f"; `+
		`if [ "$n" -lt 1 ]; then echo %q >&2; echo "more detail" >&2; exit %d; fi; %s`, name, msg, status, then)
	return []string{"sh", "-c", script}
}

func hclList(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = fmt.Sprintf("%q", a)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func runFaultSeed(t *testing.T, sc *scenario) {
	t.Log(sc)
	conc := 1
	if sc.has(faultNeverReturns) {
		conc = 2 // the host that does not come back keeps its slot; the others still go
	}
	o := clusterOpts{clients: 3, coordinators: 2, acl: true, migrateTime: 100 * time.Millisecond,
		jobs: []nomadsim.JobSpec{
			{ID: "api", Type: "service", Groups: []nomadsim.GroupSpec{{Name: "api", Count: 3, MigrateMaxParallel: 1}}},
			{ID: "exporter", Type: "system"},
		},
		policy: fmt.Sprintf(`group "all" {
  concurrency = %d
}
drain {
  deadline = "3s"
  retry_backoff = "300ms"
  retry_max_backoff = "2s"
}`, conc),
		coordExtra:  `  rejoin_timeout = "10s"`,
		rebootExtra: fmt.Sprintf("    delay = %q\n    recheck_interval = \"200ms\"", sc.delay.String()),
	}
	if sc.has(faultNomadLeaderLoss) {
		o.servers, o.autoUnseal = 3, true
		// Scaled with rejoin_timeout: at the default 10s, a server had to be
		// stable for as long as its whole rejoin may take, and a Nomad leader
		// change (which restarts every StableSince) made it stuck.
		o.coordExtra += "\n  server_stable_for = \"2s\""
	}
	if sc.has(faultDrainStuck) {
		// Batch work runs to its end: a drain waits for it past its deadline
		// and is aborted, until the work is done.
		o.jobs = append(o.jobs, nomadsim.JobSpec{ID: "report", Type: "batch", RunTime: 8 * time.Second,
			Groups: []nomadsim.GroupSpec{{Name: "report", Count: 3}}})
	}
	if sc.has(faultHookFails) {
		o.rebootExtra += "\n    pre_hooks = [" + hclList(failFirst("hook-count", 3, "check-disk: disk full", "exit 0")) + "]"
	}
	if sc.has(faultRebootFails) {
		o.rebootCommand = failFirst("reboot-count", 7, "reboot: access denied (injected)",
			`exec {{bin}} sim-ctl reboot --address {{sim}} {{host}}`)
	}
	c := newCluster(t, o)
	hosts := append(c.clients(), c.serverHosts()...)
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpPlans()
		}
	})
	var neverBack string
	if sc.has(faultNeverReturns) {
		neverBack = c.clients()[sc.rng.IntN(len(c.clients()))]
		if err := c.sim.SetBootBlocked(neverBack, true); err != nil {
			t.Fatal(err)
		}
	}
	if sc.has(faultAPIBursts) {
		// The servers have no leader while the agents start: their first reads
		// of their own records fail.
		c.burst(t, nomadsim.Fault{PathPrefix: "/v1/var/", Method: "GET", ErrorRate: 1, Status: 500, Count: 6})
	}
	c.start()
	c.waitFor("a coordinator to lead", 60*time.Second, func() bool { return c.leader() != "" })
	c.needReboot(hosts...)

	ch := &chaos{c: c, t: t, sc: sc, hosts: hosts, neverBack: neverBack}
	ch.run()
	c.sim.ClearFaults()
	t.Log("faults ended")

	done := c.rebootedAll(hosts)
	c.waitFor("every host rebooted after the faults ended", 240*time.Second, func() bool {
		// A process that ended by itself fails the run at once (nothing
		// restarts it here, as a system job's restart policy would).
		return len(c.unexpectedExits()) > 0 || done()
	})
	c.checkFaultRun(t, sc, hosts, conc, neverBack, ch.killedAgent())
}

// burst injects one fault rule.
func (c *cluster) burst(t *testing.T, f nomadsim.Fault) {
	t.Helper()
	if err := c.sim.InjectFault(f); err != nil {
		t.Error(err)
	}
}

// chaos injects a scenario's faults, each in its own goroutine, and returns once
// they are all over.
type chaos struct {
	c         *cluster
	t         *testing.T
	sc        *scenario
	hosts     []string
	neverBack string

	mu  sync.Mutex
	rng *rand.Rand
	// killed is the host whose agent agent-kill killed ("": none).
	killed string
}

// killedAgent is the host whose agent agent-kill killed, if any.
func (ch *chaos) killedAgent() string {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.killed
}

func (ch *chaos) intn(n int) int {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.rng.IntN(n)
}

func (ch *chaos) run() {
	ch.rng = rand.New(rand.NewPCG(ch.sc.seed, 17))
	var wg sync.WaitGroup
	for _, f := range ch.sc.faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch.inject(f)
		}()
	}
	wg.Wait()
}

// until waits (at most timeout) for cond; it reports whether cond held.
func (ch *chaos) until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		ch.c.sim.WaitIndex(ctx, ch.c.sim.Index())
		cancel()
	}
	return true
}

// somePlan reports whether some host's plan is in one of phases.
func (ch *chaos) somePlan(phases ...string) func() bool {
	return func() bool {
		for _, p := range ch.c.plans() {
			if slices.Contains(phases, p.Phase) {
				return true
			}
		}
		return false
	}
}

// rebootingHost returns a host whose agent is between its grant and its reboot.
func (ch *chaos) rebootingHost(among []string) string {
	plans := ch.c.plans()
	for _, h := range among {
		rec, err := ch.c.st.Host(context.Background(), h)
		hh, _ := ch.c.sim.Host(h)
		if err == nil && hh.Up && rec.BootID == hh.BootID && rec.RebootingGrant != "" && rec.RebootingGrant == plans[h].GrantID {
			return h
		}
	}
	return ""
}

func (ch *chaos) inject(f faultKind) {
	c, t := ch.c, ch.t
	switch f {
	case faultLeaderKill:
		phases := []string{store.PhaseDraining, store.PhaseDrained, store.PhaseRebooting, store.PhaseRejoining}
		phase := phases[ch.intn(len(phases))]
		ch.until(60*time.Second, ch.somePlan(phase))
		leader := c.leader()
		if leader == "" {
			t.Logf("fault leader-kill: no leader to kill")
			return
		}
		c.killCoordinator(leader)
		t.Logf("fault leader-kill: killed %s (kill -9) at phase %s", leader, phase)
		c.startCoordinator(leader + "-replacement") // keep two candidates
	case faultLeaderStop:
		ch.until(60*time.Second, ch.somePlan(store.PhaseDraining, store.PhaseDrained, store.PhaseRebooting))
		leader := c.leader()
		if leader == "" {
			t.Logf("fault leader-stop: no leader to stop")
			return
		}
		if c.signalCoordinator(leader, syscall.SIGSTOP) != nil {
			t.Logf("fault leader-stop: %s has ended already", leader)
			return
		}
		// Nomad frees the lock 2×TTL + lock delay after the last renewal
		// (TTL 10s, lock delay = TTL): the other candidate leads meanwhile.
		pause := 31*time.Second + time.Duration(ch.intn(3000))*time.Millisecond
		t.Logf("fault leader-stop: SIGSTOP %s for %s", leader, pause)
		time.Sleep(pause) // the fault's own duration, not a wait for a condition
		if c.signalCoordinator(leader, syscall.SIGCONT) != nil {
			// Still holding the lock while stopped, it was the leader that
			// leader-kill found, and killed.
			t.Logf("fault leader-stop: %s was killed while stopped", leader)
			return
		}
		t.Logf("fault leader-stop: SIGCONT %s", leader)
	case faultAgentKill:
		var victim string
		ch.until(60*time.Second, func() bool { victim = ch.rebootingHost(c.clients()); return victim != "" })
		if victim == "" {
			t.Logf("fault agent-kill: no agent caught between grant and reboot")
			return
		}
		c.sup.Kill(victim, true)
		ch.mu.Lock()
		ch.killed = victim
		ch.mu.Unlock()
		t.Logf("fault agent-kill: killed the agent on %s between its grant and its reboot", victim)
	case faultRebootFails, faultHookFails:
		// Configured in the hosts' reboot settings; wait for a failure to show.
		ch.until(90*time.Second, func() bool {
			for _, r := range c.history() {
				if r.Outcome == "failed" {
					return true
				}
			}
			return false
		})
		ch.checkFailureInStatus()
	case faultAPIBursts:
		for i := range 3 {
			time.Sleep(time.Duration(200+ch.intn(800)) * time.Millisecond) // between bursts
			rate := 0.1 + float64(ch.intn(30))/100
			c.burst(t, nomadsim.Fault{PathPrefix: "/v1/", ErrorRate: rate, Status: 500})
			c.burst(t, nomadsim.Fault{PathPrefix: "/v1/var", ErrorRate: rate / 2, Status: 429})
			c.burst(t, nomadsim.Fault{PathPrefix: "/v1/", Latency: time.Duration(10+ch.intn(90)) * time.Millisecond})
			d := time.Duration(500+ch.intn(1500)) * time.Millisecond
			t.Logf("fault api-bursts: burst %d: 500 at %.2f, 429 at %.2f, for %s", i+1, rate, rate/2, d)
			time.Sleep(d) // the burst's duration
			c.sim.ClearFaults()
		}
	case faultNomadLeaderLoss:
		var victim string
		ch.until(120*time.Second, func() bool { victim = ch.rebootingHost(c.serverHosts()); return victim != "" })
		if victim == "" {
			t.Logf("fault nomad-leader-loss: no server host caught in its hooks and delay")
			return
		}
		if err := c.sim.SetLeaderLost(true); err != nil {
			t.Error(err)
			return
		}
		// Longer than the reboot delay: the reboot falls inside the loss.
		d := ch.sc.delay + time.Duration(1000+ch.intn(1500))*time.Millisecond
		t.Logf("fault nomad-leader-loss: Nomad lost its leader while %s prepared its reboot, for %s", victim, d)
		time.Sleep(d) // the fault's duration
		if err := c.sim.SetLeaderLost(false); err != nil {
			t.Errorf("elect a Nomad leader again: %v", err)
		}
	case faultNeverReturns:
		ok := ch.until(120*time.Second, func() bool { return c.plans()[ch.neverBack].Phase == store.PhaseStuck })
		if !ok {
			t.Errorf("fault never-returns: %s, down for good, was not reported stuck", ch.neverBack)
		}
		t.Logf("fault never-returns: %s is stuck (%s); its boot is unblocked", ch.neverBack, c.plans()[ch.neverBack].LastError)
		if err := c.sim.SetBootBlocked(ch.neverBack, false); err != nil {
			t.Error(err)
		}
	case faultRequestHangs:
		// Node calls (drain, eligibility, a node's allocations) hang until the
		// caller's deadline: the coordinator must keep deciding for the others and
		// finish every cycle once the fault ends.
		ch.until(60*time.Second, ch.somePlan(store.PhaseDraining, store.PhaseRejoining))
		rate := 0.2 + float64(ch.intn(30))/100
		c.burst(t, nomadsim.Fault{PathPrefix: "/v1/node/", ErrorRate: rate, Hang: true})
		d := time.Duration(2000+ch.intn(3000)) * time.Millisecond
		t.Logf("fault request-hangs: %.2f of node calls hang, for %s", rate, d)
		time.Sleep(d) // the fault's duration
		c.sim.ClearFaults()
	case faultOperatorDrain:
		ch.operatorDrain()
	case faultOperatorMidCycle:
		ch.operatorMidCycle()
	case faultDrainStuck:
		ok := ch.until(60*time.Second, func() bool {
			for _, p := range c.plans() {
				if p.Phase == store.PhaseBackoff && strings.Contains(p.LastError, "did not finish") {
					return true
				}
			}
			return false
		})
		t.Logf("fault drain-stuck: a drain was aborted at its deadline: %v", ok)
	}
}

// operatorDrain: while another host holds the slot, an operator drains a
// pending host with its system jobs (rollboot's agent stops there), and makes
// the node eligible again a while after the drain completed. Meanwhile the
// node is the operator's: no grant may come (it would drain the node for
// rollboot with no agent left to reboot it). Once it is given back, the host is
// rebooted (checked with every host's at the end of the run).
func (ch *chaos) operatorDrain() {
	c, t := ch.c, ch.t
	var victim string
	ch.until(60*time.Second, func() bool {
		if !ch.somePlan(store.PhaseDraining, store.PhaseDrained, store.PhaseRebooting)() {
			return false
		}
		plans := c.plans()
		for _, i := range rand.New(rand.NewPCG(ch.sc.seed, 3)).Perm(len(c.clients())) {
			if h := c.clients()[i]; plans[h].Phase == store.PhasePending {
				victim = h
				return true
			}
		}
		return false
	})
	if victim == "" {
		t.Logf("fault operator-drain: no pending host while another held the slot")
		return
	}
	n, err := c.sim.Node(victim)
	if err != nil {
		t.Error(err)
		return
	}
	nodes := c.client.Nodes()
	spec := &api.DrainSpec{Deadline: 3 * time.Second, IgnoreSystemJobs: false}
	drainAt := time.Now()
	if _, err := nodes.UpdateDrainOpts(n.ID, &api.DrainOptions{DrainSpec: spec, Meta: map[string]string{"message": "kernel debugging"}}, nil); err != nil {
		t.Logf("fault operator-drain: drain %s failed (%v): not judged", victim, err)
		return
	}
	t.Logf("fault operator-drain: an operator drains %s with its system jobs", victim)
	granted := func(p store.Plan) bool {
		return slices.Contains([]string{store.PhaseDraining, store.PhaseDrained, store.PhaseRebooting, store.PhaseRejoining}, p.Phase)
	}
	ch.until(30*time.Second, func() bool {
		n, err := c.sim.Node(victim)
		return err == nil && n.DrainStrategy == nil && n.SchedulingEligibility == api.NodeSchedulingIneligible
	})
	n, err = c.sim.Node(victim)
	if err != nil || n.DrainStrategy != nil || n.LastDrain == nil {
		t.Errorf("fault operator-drain: the operator's drain of %s did not complete: %+v", victim, n)
		return
	}
	if n.LastDrain.Meta["message"] != "kernel debugging" {
		// A grant decided on a node list read before the operator's drain:
		// rollboot's drain took the node over, and it is in rollboot's cycle.
		t.Logf("fault operator-drain: %s was granted as the operator drained it (drain meta %v): not judged", victim, n.LastDrain.Meta)
		return
	}
	hold := time.Duration(2000+ch.intn(2000)) * time.Millisecond
	var grantedMeanwhile, shown string
	ch.until(hold, func() bool {
		if p := c.plans()[victim]; granted(p) && grantedMeanwhile == "" {
			grantedMeanwhile = fmt.Sprintf("%s at %s (phase %s)", p.GrantID,
				p.Timeline[store.PhaseDraining].Format(time.StampMilli), p.Phase)
		}
		if st, err := c.tryStatus(); err == nil && shown == "" {
			for _, h := range st.Hosts {
				if h.Host == victim && strings.Contains(h.Waiting, "left ineligible by a drain rollboot did not start") {
					shown = h.Waiting
				}
			}
		}
		return false // the whole hold
	})
	if grantedMeanwhile != "" {
		t.Errorf("fault operator-drain: %s was granted %s while the operator's drain held its node (drain sent at %s)",
			victim, grantedMeanwhile, drainAt.Format(time.StampMilli))
	}
	// An API burst may have hidden the plans or the status: what the hold
	// judged is logged above; a rollboot drain over the operator's would show
	// in the node's last drain.
	if n, err := c.sim.Node(victim); err == nil && n.LastDrain != nil && n.LastDrain.Meta["message"] != "kernel debugging" {
		t.Errorf("fault operator-drain: rollboot drained %s while the operator's drain held it (drain meta %v)", victim, n.LastDrain.Meta)
	}
	if shown == "" {
		t.Errorf("fault operator-drain: status never said that %s waits for the operator to give its node back", victim)
	} else {
		t.Logf("fault operator-drain: status of %s during the hold: %s", victim, shown)
	}
	var lastErr error
	if !ch.until(30*time.Second, func() bool { // as an operator would, again after an API burst
		_, lastErr = nodes.ToggleEligibility(n.ID, true, nil)
		return lastErr == nil
	}) {
		t.Errorf("fault operator-drain: give %s back: %v", victim, lastErr)
		return
	}
	t.Logf("fault operator-drain: the operator gave %s back after %s", victim, hold)
}

// operatorMidCycle: an operator acts in Nomad on the node of a host in its
// cycle, at a phase drawn at random: makes it eligible again (drained,
// rebooting: Nomad refuses while it drains), drains it themselves, or cancels
// rollboot's drain (draining). Each ends the attempt (interrupted or aborted)
// unless the host rebooted first; a node the operator drained is given back a
// while after. Every host is still rebooted once by the end of the run.
func (ch *chaos) operatorMidCycle() {
	c, t := ch.c, ch.t
	type act struct {
		action string
		phases []string
	}
	acts := []act{{"eligible", []string{store.PhaseDrained, store.PhaseRebooting}},
		{"drain", []string{store.PhaseDraining, store.PhaseDrained, store.PhaseRebooting}},
		{"cancel", []string{store.PhaseDraining}}}
	a := acts[ch.intn(len(acts))]
	phase := a.phases[ch.intn(len(a.phases))]
	var victim string
	ch.until(90*time.Second, func() bool {
		plans := c.plans()
		for _, h := range c.clients() {
			if plans[h].Phase == phase && (phase != store.PhaseRebooting || ch.rebootingHost([]string{h}) == h) {
				victim = h
				return true
			}
		}
		return false
	})
	if victim == "" {
		t.Logf("fault operator-mid-cycle: no client caught in phase %s", phase)
		return
	}
	n, err := c.sim.Node(victim)
	if err != nil {
		t.Error(err)
		return
	}
	grant := c.plans()[victim].GrantID
	nodes := c.client.Nodes()
	switch a.action {
	case "eligible":
		_, err = nodes.ToggleEligibility(n.ID, true, nil)
	case "drain":
		spec := &api.DrainSpec{Deadline: 3 * time.Second, IgnoreSystemJobs: ch.intn(2) == 0}
		_, err = nodes.UpdateDrainOpts(n.ID, &api.DrainOptions{DrainSpec: spec, Meta: map[string]string{"message": "disk swap"}}, nil)
	case "cancel":
		_, err = nodes.UpdateDrainOpts(n.ID, &api.DrainOptions{MarkEligible: true}, nil) // nomad node drain -disable
	}
	if err != nil {
		t.Logf("fault operator-mid-cycle: %s on %s at %s refused (%v): not judged", a.action, victim, phase, err)
		return
	}
	t.Logf("fault operator-mid-cycle: an operator did %q on %s, its grant %s at phase %s", a.action, victim, grant, phase)
	// The attempt ends (or the host had rebooted first): the grant leaves
	// the cycle's phases, without a resync.
	c.within("the attempt to end after the operator's action", time.Now(), func() bool {
		p := c.plans()[victim]
		return p.GrantID != grant || !slices.Contains([]string{store.PhaseDraining, store.PhaseDrained, store.PhaseRebooting}, p.Phase)
	})
	p := c.plans()[victim]
	t.Logf("fault operator-mid-cycle: %s is %s: %s", victim, p.Phase, p.LastError)
	if a.action != "drain" {
		return
	}
	ch.until(30*time.Second, func() bool {
		n, err := c.sim.Node(victim)
		return err == nil && n.DrainStrategy == nil
	})
	time.Sleep(time.Duration(500+ch.intn(1500)) * time.Millisecond) // the operator's work
	var lastErr error
	if !ch.until(30*time.Second, func() bool {
		_, lastErr = nodes.ToggleEligibility(n.ID, true, nil)
		return lastErr == nil
	}) {
		t.Errorf("fault operator-mid-cycle: give %s back: %v", victim, lastErr)
		return
	}
	t.Logf("fault operator-mid-cycle: the operator gave %s back", victim)
}

// checkFailureInStatus: a failed attempt shows in `rollboot status -json` with
// the step, the exit status and the first line of stderr.
func (ch *chaos) checkFailureInStatus() {
	var seen string
	ch.until(30*time.Second, func() bool {
		st, err := ch.c.tryStatus()
		if err != nil {
			return false // an API burst, say: ask again
		}
		for _, h := range st.Hosts {
			if h.Failure != nil || strings.Contains(h.LastError, "did not reboot") {
				seen = fmt.Sprintf("%s: %s / %+v", h.Host, h.LastError, h.Failure)
				return true
			}
		}
		return false
	})
	if seen == "" {
		ch.t.Errorf("no failed attempt was ever shown by status")
		return
	}
	ch.t.Logf("status showed %s", seen)
}

// checkFaultRun checks a finished run; killed is the host whose agent
// agent-kill killed, if any.
func (c *cluster) checkFaultRun(t *testing.T, sc *scenario, hosts []string, conc int, neverBack, killed string) {
	groups := map[string]string{}
	for _, h := range c.clients() {
		groups[h] = "all"
	}
	res := c.mustHold(invariants.Spec{Group: groups, Concurrency: map[string]int{"all": conc},
		EligibleBefore: allTrue(c.clients()), Reboots: each(hosts, 1)})
	t.Logf("peak out of service %v, reboots %v", res.Peak, res.Reboots)
	for _, e := range c.unexpectedExits() {
		t.Errorf("a process exited by itself: %s", e)
	}
	secrets := map[string]string{"Consul token": consulToken, "Vault token": vaultToken, "Nomad token": mgmtToken(c.sim)}
	c.mu.Lock()
	for name, b := range c.logs {
		for what, s := range secrets {
			if s != "" && strings.Contains(b.String(), s) {
				t.Errorf("the %s appears in the log of %s", what, name)
			}
		}
	}
	c.mu.Unlock()
	failures, failed := 0, map[string]bool{}
	for _, r := range c.history() {
		if r.Outcome != "failed" {
			continue
		}
		failed[r.Host] = true
		if sc.has(faultRequestHangs) && (strings.Contains(r.Error, "did not go down") || strings.Contains(r.Error, "never went down")) {
			// An agent whose last calls before the reboot hung past its time to
			// come back: undone and retried, as a failed attempt (not stuck).
			t.Logf("failed attempt of %s while node calls hung: %s", r.Host, r.Error)
			continue
		}
		failures++
		if sc.has(faultHookFails) && !sc.has(faultRebootFails) && !strings.Contains(r.Error, "exit status 3): sh -c") {
			t.Errorf("failed attempt of %s: %q, want the hook's exit status", r.Host, r.Error)
		}
		if !strings.Contains(r.Error, "disk full") && !strings.Contains(r.Error, "access denied (injected)") {
			t.Errorf("failed attempt of %s: %q, want the first line of stderr", r.Host, r.Error)
		}
		if strings.Contains(r.Error, "more detail") {
			t.Errorf("failed attempt of %s: %q, want the first line of stderr only", r.Host, r.Error)
		}
	}
	want := len(hosts)
	if killed != "" && !failed[killed] {
		// Killed between its grant and its reboot, the agent may have run its
		// failing hook or reboot command and died before it could report the
		// failure: its successor ran it again, and it passed (seed 22).
		t.Logf("no failed attempt of %s, whose agent was killed after its grant", killed)
		want--
	}
	if (sc.has(faultHookFails) || sc.has(faultRebootFails)) && failures < want {
		t.Errorf("%d failed attempts in the history, want one per host (%d)", failures, want)
	}
	if sc.has(faultHookFails) || sc.has(faultRebootFails) {
		// A host that did not reboot is never "stuck".
		for _, r := range c.history() {
			if _, stuck := r.Timeline[store.PhaseStuck]; stuck && r.Host != neverBack && !sc.has(faultLeaderStop) && !sc.has(faultLeaderKill) {
				t.Errorf("%s went through stuck: %+v", r.Host, r.Timeline)
			}
		}
	}
}

// dumpPlans logs every host's plan, record and node, to see why a run failed.
func (c *cluster) dumpPlans() {
	for h, p := range c.plans() {
		rec, _ := c.st.Host(context.Background(), h)
		hh, _ := c.sim.Host(h)
		node := "-"
		if n, err := c.sim.Node(h); err == nil {
			node = n.Status + "/" + n.SchedulingEligibility
		}
		c.t.Logf("%s: phase %s since %s waiting %q error %q grant %s boot(plan) %s boot(rec) %s boot(host) %s up %v node %s hold %q failure %+v",
			h, p.Phase, p.PhaseSince.Format(time.StampMilli), p.Waiting, p.LastError, p.GrantID, p.BootIDAtGrant, rec.BootID,
			hh.BootID, hh.Up, node, rec.HoldReason, rec.Failure)
	}
}

// An operator marks a drained node eligible while its agent waits its reboot
// delay. The agent believes Nomad, not the plan, and holds: rebooting would be a
// reboot without a drain that still holds (invariant 4), since Nomad may have
// placed work on the node. The coordinator sees it from Nomad and ends the
// attempt (history "interrupted", the slot freed); the host, still needing its
// reboot, is queued again, drained again and rebooted: no hold lasts.
func TestOperatorMakesDrainedNodeEligible(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1, resync: productionResync,
		jobs:        []nomadsim.JobSpec{{ID: "exporter", Type: "system"}},
		policy:      "drain {\n  retry_backoff = \"500ms\"\n}",
		rebootExtra: "    delay = \"1500ms\"\n    recheck_interval = \"200ms\""})
	c.start()
	hosts := c.clients()
	c.needReboot(hosts[0])
	ch := &chaos{c: c, t: t}
	var victim string
	if !ch.until(60*time.Second, func() bool { victim = ch.rebootingHost(hosts[:1]); return victim != "" }) {
		t.Fatal("the agent never prepared its reboot")
	}
	n, err := c.sim.Node(victim)
	if err != nil {
		t.Fatal(err)
	}
	before, _ := c.sim.Host(victim)
	if _, err := c.client.Nodes().ToggleEligibility(n.ID, true, nil); err != nil {
		t.Fatal(err)
	}
	var ended store.HistoryRecord
	c.within("the attempt ended on the operator's word", time.Now(), func() bool {
		for _, r := range c.history() {
			if r.Host == victim && r.Outcome == "interrupted" {
				ended = r
				return true
			}
		}
		return false
	})
	if !strings.Contains(ended.Error, "made eligible again") {
		t.Errorf("history of the interrupted attempt says %q, want what the operator did", ended.Error)
	}
	if hh, _ := c.sim.Host(victim); hh.BootID != before.BootID {
		c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts)})
		t.Fatal("the host rebooted while its node was eligible")
	}
	// Still in need of its reboot, it is queued again and rebooted, with no
	// operator action.
	c.waitFor("the host rebooted by a new attempt", 60*time.Second, c.rebootedAll(hosts[:1]))
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: map[string]int{hosts[0]: 1, hosts[1]: 0}})
}
