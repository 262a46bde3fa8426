package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// Rollout is what one full rollout measured.
type Rollout struct {
	Hosts, Groups, Concurrency int
	Run, Runs                  int    // this rollout's number (from 1) of the Runs at its host count
	Completed                  bool   // every host rebooted once and is idle again
	Problem                    string // why not, when not

	Makespan   time.Duration // from the sentinels to the last cycle's end
	LowerBound time.Duration // max over groups of ceil(hosts/concurrency) x mean cycle
	Excess     Excess        // where the group that ended last spent the time its slots were not busy
	Floor      Floor         // the ratio the cycles allow with nothing between them
	Parts      CycleParts    // the cycles' parts: the machines' and rollboot's
	MeanCycle  time.Duration // draining to idle, over every host
	Cycles     []time.Duration

	Latency time.Duration // every Nomad request waited this long (nomadsim Config.RequestLatency)

	HandOff        []time.Duration // a group's slot freeing to the next host's drain, as Nomad saw the writes (handOffs)
	HandOffPasses  []time.Duration // the same, from the times the deciding passes recorded in the history
	SentinelToPend []time.Duration // the sentinel appearing to the host's plan pending

	VarWrites  int            // variable writes and deletes (the leader lock's excluded)
	WritesBy   map[string]int // by kind of variable: plan, hosts, history, requests, ...
	LockWrites int            // the election's writes: its locks (acquire, renew, release) and census

	Requests uint64 // requests rollboot sent to the emulator, coordinator and agents
	// Renewals are the requests of Requests that were idle watches asking
	// again: blocking queries whose wait ran out with no change
	// (nomadsim.RequestStats.RanOut). They are the idle load, judged on its
	// own, and grow with the rollout's length, not with its reboots: a rollout
	// longer than Nomad's wait (5 minutes) has the idle hosts' watches renewed
	// in it, a production rollout of hours many times over.
	Renewals uint64
	// StreamDropped: the node event stream's subscriptions the emulator cut
	// off as too slow during the rollout; the coordinator followed the nodes
	// with blocking queries after each, for RetryAfter.
	StreamDropped int64
	Emulator      nomadsim.RequestStats // the emulator's own time
	Wall          time.Duration         // wall time of the measured part

	// CoordCPU is the coordinator's CPU time over the measured part, and
	// ProcessCPU the whole process's (the agents and the emulator with it),
	// from a CPU profile (cpulabel.go); CPUNote says why not, when not.
	CoordCPU, ProcessCPU time.Duration
	CPUNote              string
}

// Rebooted is how many hosts the rollout rebooted: its cycles.
func (r *Rollout) Rebooted() int { return len(r.Cycles) }

// Label names the rollout in the table: its host count, its request latency
// when it has one, and which of the rollouts at that count it is when there
// are several: "1000 at 50ms (2/3)".
func (r *Rollout) Label() string {
	if r.Runs <= 1 {
		return sizeLabel(r.Hosts, r.Latency)
	}
	return fmt.Sprintf("%s (%d/%d)", sizeLabel(r.Hosts, r.Latency), r.Run, r.Runs)
}

// sizeLabel names a host count and request latency: "1000", "1000 at 50ms".
func sizeLabel(hosts int, latency time.Duration) string {
	if latency <= 0 {
		return fmt.Sprint(hosts)
	}
	return fmt.Sprintf("%d at %s", hosts, latency)
}

// runRollout makes every host need a reboot at once and waits until every one
// has rebooted and is idle again; from the sentinels on, every Nomad request
// waits latency before it is served (nomadsim Config.RequestLatency).
func runRollout(ctx context.Context, o *Options, hosts int, latency time.Duration) (*Rollout, error) {
	c, stopCoord, err := startRolloutCluster(ctx, o, hosts)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	// The cluster settled with no latency: a new cluster's set-up (every
	// agent's first record, every node's metadata published one by one) is
	// not what a rollout on a cluster that has run for a while waits for.
	if err := c.sim.SetRequestLatency(latency); err != nil {
		return nil, err
	}

	r := &Rollout{Hosts: hosts, Groups: o.Groups, Concurrency: o.Concurrency, Latency: latency, WritesBy: map[string]int{}}
	c.sim.ResetRequestStats()
	ownBefore := c.own.n.Load()
	firstEvent := len(c.sim.Events(0))
	droppedBefore := c.sim.EventStream().Dropped
	prof, profErr := startCPUProfile()
	defer prof.close() // when it returns early
	start := time.Now()
	setAt := make(map[string]time.Time, len(c.hosts))
	for _, h := range c.hosts {
		setAt[h.Name] = time.Now()
		if err := c.sim.SetRebootRequired(h.Name, "kernel update installed"); err != nil {
			return nil, err
		}
	}
	deadline := o.RolloutTimeout
	if deadline <= 0 {
		deadline = 10*time.Minute + time.Duration(hosts)*time.Second
	}
	done, problem := c.waitCycles(ctx, firstEvent, deadline, func(n int) {
		fmt.Fprintf(o.Out, "%s  %s: %d cycles finished after %s\n", time.Now().UTC().Format("15:04:05"), sizeLabel(hosts, latency), n,
			time.Since(start).Round(time.Second))
	})
	r.Wall = time.Since(start)
	r.Emulator = c.sim.RequestStats()
	r.Requests = r.Emulator.Requests - (c.own.n.Load() - ownBefore)
	r.Renewals = r.Emulator.RanOut
	r.StreamDropped = c.sim.EventStream().Dropped - droppedBefore
	r.measureCPU(prof, profErr)
	if err := c.sim.SetRequestLatency(0); err != nil { // the bench's reads that follow are not measured
		return nil, err
	}
	if done {
		done, problem = c.waitInService(ctx, 2*time.Minute)
	}
	r.Completed, r.Problem = done, problem
	events := c.sim.Events(firstEvent)
	for _, e := range events {
		countWrite(r, e)
	}
	stopCoord()
	hist, err := c.st.History(context.Background())
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	r.measureCycles(hist, c.groupOf, setAt, start)
	r.Parts = cycleParts(hist, events, c.groupOf, start, r.Concurrency, r.LowerBound)
	r.HandOff = handOffs(events, hist, c.st.Prefix(), c.groupOf, r.Concurrency)
	if done {
		if p := checkOnce(hist, c.hosts); p != "" {
			r.Completed, r.Problem = false, p
		}
	}
	return r, nil
}

// startRolloutCluster starts a cluster of hosts with their agents and its one
// coordinator (its goroutines labelled for the CPU profile), and waits until
// every agent wrote its record and the coordinator settled. c.stop stops the
// coordinator too; stopCoord stops it alone, earlier.
func startRolloutCluster(ctx context.Context, o *Options, hosts int) (c *cluster, stopCoord func(), err error) {
	c, err = startCluster(ctx, clusterSpec{hosts: hosts, groups: o.Groups, concurrency: o.Concurrency, agents: true, log: o.Log,
		requestLog: o.RequestLog})
	if err != nil {
		return nil, nil, err
	}
	reg := prometheus.NewRegistry()
	coordCtx, stopCoord := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		withCPULabel(coordCtx, "coordinator", func(ctx context.Context) {
			if err := c.runCoordinator(ctx, reg); err != nil && ctx.Err() == nil {
				o.Log.Error("coordinator stopped", "err", err)
			}
		})
	}()
	stopCluster := c.stop
	c.stop = func() {
		stopCoord()
		wg.Wait()
		stopCluster()
	}
	if err := c.waitRecords(ctx, 2*time.Minute+time.Duration(hosts)*50*time.Millisecond); err != nil {
		c.stop()
		return nil, nil, err
	}
	// The rollout starts once the coordinator has taken in every record and
	// published every node's metadata: the new leader's cold start is measured
	// apart (coord.go), not in the makespan.
	if err := waitSettled(ctx, reg, 500*time.Millisecond, time.Minute+time.Duration(hosts)*10*time.Millisecond); err != nil {
		c.stop()
		return nil, nil, err
	}
	return c, stopCoord, nil
}

// measureCPU takes the coordinator's CPU time from the rollout's CPU profile
// (cpulabel.go), or says why it has none.
func (r *Rollout) measureCPU(prof *cpuProfile, startErr error) {
	if startErr != nil {
		r.CPUNote = fmt.Sprintf("no CPU profile of the rollout (%v; -cpu-profile takes the profiler)", startErr)
		return
	}
	var err error
	if r.CoordCPU, r.ProcessCPU, err = prof.stop("coordinator"); err != nil {
		r.CPUNote = err.Error()
	}
}

// waitCycles waits until every host has a history record (its cycle ended), or
// deadline passes; every 15s it tells progress how many cycles ended. It
// counts the history records written in the emulator's event log from the
// event after firstEvent on, in process: the bench sends no request of its
// own while the rollout is measured, so the emulator's request figures are
// rollboot's alone.
func (c *cluster) waitCycles(ctx context.Context, firstEvent int, deadline time.Duration, progress func(finished int)) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	lastShown := time.Now()
	histPrefix := c.st.Prefix() + "/history/"
	ended := map[string]bool{}
	seen := firstEvent
	for {
		select {
		case <-ctx.Done():
			return false, fmt.Sprintf("the rollout did not finish within %s", deadline)
		case <-t.C:
		}
		events := c.sim.Events(seen)
		seen += len(events)
		for _, e := range events {
			// The history keeps every cycle (history_size, policyHCL).
			if p := e.Details["path"]; e.Type == nomadsim.EventVarWrite && strings.HasPrefix(p, histPrefix) {
				ended[p] = true
			}
		}
		if time.Since(lastShown) >= 15*time.Second {
			progress(len(ended))
			lastShown = time.Now()
		}
		if len(ended) >= len(c.hosts) {
			return true, ""
		}
	}
}

// waitInService waits until every node is back in service as Nomad sees it:
// ready, eligible, not draining (a cycle's history is written as its node is
// given back). It asks the emulator in process: a thousand reads through the
// API would be the bench's own load.
func (c *cluster) waitInService(ctx context.Context, timeout time.Duration) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		out := ""
		for _, h := range c.hosts {
			n, err := c.sim.Node(h.Name)
			if err != nil {
				return false, err.Error()
			}
			if n.Status != api.NodeStatusReady || n.SchedulingEligibility != api.NodeSchedulingEligible || n.DrainStrategy != nil {
				out = fmt.Sprintf("node of %s is %s, %s, draining %t", h.Name, n.Status, n.SchedulingEligibility, n.DrainStrategy != nil)
				break
			}
		}
		if out == "" {
			return true, ""
		}
		if err := sleep(ctx, time.Second); err != nil {
			return false, "every cycle ended, but not every node was back in service: " + out
		}
	}
}

// checkOnce reports a host that did not reboot exactly once.
func checkOnce(hist []store.HistoryRecord, hosts []nomadsim.Host) string {
	n := map[string]int{}
	for _, r := range hist {
		if r.Outcome == "rebooted" {
			n[r.Host]++
		}
	}
	for _, h := range hosts {
		if n[h.Name] != 1 {
			return fmt.Sprintf("%s rebooted %d times", h.Name, n[h.Name])
		}
	}
	return ""
}

// countWrite counts one emulator event if it is a variable write.
func countWrite(r *Rollout, e nomadsim.Event) {
	switch e.Type {
	case nomadsim.EventVarWrite, nomadsim.EventVarDelete:
	case nomadsim.EventLockAcquire, nomadsim.EventLockRelease:
		r.LockWrites++
		return
	default:
		return
	}
	path := strings.TrimPrefix(e.Details["path"], "rollboot/")
	kind, _, _ := strings.Cut(path, "/")
	if kind == "leader" || kind == "standby" || kind == "election" || kind == "coordinator" {
		// The election's: lock renewals, the candidate census, and who leads
		// with which policy (written when a coordinator starts to lead: once,
		// and inside the measured part when the election ends late).
		r.LockWrites++
		return
	}
	r.VarWrites++
	r.WritesBy[kind]++
}

// rolloutCycle reports whether h is a cycle of the rollout that started at
// start (a reboot that ended after it), and when its drain started.
func rolloutCycle(h store.HistoryRecord, start time.Time) (drained time.Time, ok bool) {
	s := h.Timeline[store.PhaseDraining]
	return s, h.Outcome == "rebooted" && !s.IsZero() && !h.Finished.Before(start)
}

// measureCycles computes the makespan, its lower bound, the hand-off latencies
// as the passes recorded them and sentinel-to-pending latencies from the
// history records.
func (r *Rollout) measureCycles(hist []store.HistoryRecord, groupOf map[string]string, setAt map[string]time.Time, start time.Time) {
	byGroup := map[string][]span{}
	var end time.Time
	var total time.Duration
	for _, h := range hist {
		s, ok := rolloutCycle(h, start)
		if !ok {
			continue
		}
		byGroup[groupOf[h.Host]] = append(byGroup[groupOf[h.Host]], span{s, h.Finished})
		d := h.Finished.Sub(s)
		r.Cycles = append(r.Cycles, d)
		total += d
		if h.Finished.After(end) {
			end = h.Finished
		}
		if set, ok := setAt[h.Host]; ok {
			p := h.Timeline[store.PhasePending]
			if p.IsZero() || p.After(s) {
				p = s // granted at once: no pass saw it pending
			}
			r.SentinelToPend = append(r.SentinelToPend, max(0, p.Sub(set)))
		}
	}
	if len(r.Cycles) == 0 {
		return
	}
	r.MeanCycle = total / time.Duration(len(r.Cycles))
	r.Makespan = end.Sub(start)
	cycles := make(map[string][]time.Duration, len(byGroup))
	for group, cs := range byGroup {
		var sum time.Duration
		starts := make([]time.Time, 0, len(cs))
		ends := make([]time.Time, 0, len(cs))
		lengths := make([]time.Duration, 0, len(cs))
		for _, c := range cs {
			lengths = append(lengths, c.end.Sub(c.start))
			sum += c.end.Sub(c.start)
			starts = append(starts, c.start)
			ends = append(ends, c.end)
		}
		mean := sum / time.Duration(len(cs))
		waves := int(math.Ceil(float64(len(cs)) / float64(r.Concurrency)))
		r.LowerBound = max(r.LowerBound, time.Duration(waves)*mean)
		// The k-th drain of a group (k >= concurrency) took the slot the
		// (k-concurrency)-th cycle to end freed: slots are handed first come,
		// first served, and every host asked at the start.
		slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
		slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
		for k := r.Concurrency; k < len(starts); k++ {
			r.HandOffPasses = append(r.HandOffPasses, max(0, starts[k].Sub(ends[k-r.Concurrency])))
		}
		if ends[len(ends)-1].Equal(end) {
			r.Excess = slotExcess(cs, r.Concurrency, start)
			r.Excess.Group = group
		}
		cycles[group] = lengths
	}
	r.Floor = makespanFloor(cycles, r.Concurrency, r.LowerBound, floorReplays)
}
