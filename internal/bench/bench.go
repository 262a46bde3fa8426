// Package bench measures rollboot at scale: the real coordinator and agents
// (in this process, one agent per simulated host, as the demo runs them)
// against the Nomad emulator, at given host counts, and prints every figure of
// the scale goals in one table with the goal beside each, and a Kured-style
// baseline for the same work. The machines' timings are scaled (cluster.go):
// Nomad's protocol is not.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Options configure a run.
type Options struct {
	Hosts       []int // host counts (Nomad clients); default 100, 1000, 5000
	Groups      int   // groups, one node pool each; default 10
	Concurrency int   // hosts of a group out of service at once; default 5
	// RolloutMax is the largest host count that runs a full rollout; above
	// it the coordinator alone is measured. Default 5000.
	RolloutMax int
	// IdleMax is the largest host count whose idle load is measured.
	// Default 1000.
	IdleMax int
	// Latencies are the Nomad request latencies (nomadsim
	// Config.RequestLatency) each size's rollouts and the fail-over pass run
	// at, each in turn; the idle load and the coordinator alone are measured
	// with none. Default: none (0).
	Latencies []time.Duration
	// Rollouts is how many rollouts run at each host count and latency: a
	// rollout's figures vary from run to run. Each is judged on its own,
	// but for the makespan ratio, judged on their mean. Default 1.
	Rollouts       int
	RolloutTimeout time.Duration // per rollout; default 10m + 1s per host
	Idle           time.Duration // the idle windows (requests, agent CPU); default DefaultIdle
	Settle         time.Duration // time given to settle before an idle window; default 10s
	// QuietSettle is added to Settle before the idle-load window: the
	// candidates' time to read the census the leader published (one that
	// contends reads it again when its wait on the leader lock ends, at most
	// 2 × lock_ttl later) and go quiet. Default 1m.
	QuietSettle time.Duration
	Passes      int // back-to-back passes timed at the largest size; default 100
	// Only measures part of the figures: "idle" the idle load (and the agent
	// process beside it), "agent" the agent process alone, "rollout" the
	// rollouts alone; "" everything.
	Only string
	// Exe is the rollboot binary, run as child processes to measure the
	// coordinator's and an agent's memory and CPU as the kernel sees them
	// ("": not measured).
	Exe string
	// AgentExe is the binary whose agent process is measured (default: see
	// ReleaseAgent).
	AgentExe string
	// ReleaseAgent, when AgentExe is empty, measures the agent process of a
	// release build of the source tree in the working directory (built with
	// the go command as scripts/release builds it), to measure what ships;
	// Exe when it cannot be built, and the figure says so. Otherwise Exe.
	ReleaseAgent bool
	Out          io.Writer    // progress (nil: discarded)
	Log          *slog.Logger // rollboot's own logs (nil: discarded)
	// RequestLog, when set, gets a line per Nomad request of the rollouts'
	// clusters (nomadsim Config.RequestLog): which requests go one after
	// the other.
	RequestLog io.Writer
}

func (o *Options) defaults() {
	if len(o.Hosts) == 0 {
		o.Hosts = []int{100, 1000, 5000}
	}
	if o.Groups <= 0 {
		o.Groups = 10
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 5
	}
	if o.RolloutMax <= 0 {
		o.RolloutMax = 5000
	}
	if o.IdleMax <= 0 {
		o.IdleMax = 1000
	}
	if len(o.Latencies) == 0 {
		o.Latencies = []time.Duration{0}
	}
	if o.Rollouts <= 0 {
		o.Rollouts = 1
	}
	if o.Idle <= 0 {
		o.Idle = DefaultIdle
	}
	if o.Settle <= 0 {
		o.Settle = 10 * time.Second
	}
	if o.QuietSettle <= 0 {
		o.QuietSettle = time.Minute
	}
	if o.Passes <= 0 {
		o.Passes = 100
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Report is everything a run measured.
type Report struct {
	Options   Options
	Rollouts  []*Rollout
	Failovers []*Failover
	Idle      []*Idle
	Coord     *Coord
	Agent     *AgentProc
}

// Run measures every size in o.Hosts and returns the figures; Print shows them.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	if o.Only != "" && o.Only != "idle" && o.Only != "agent" && o.Only != "rollout" {
		return nil, fmt.Errorf("-only: %q is not a part of the figures (idle, agent or rollout; nothing for every figure)", o.Only)
	}
	sizes := slices.Clone(o.Hosts)
	slices.Sort(sizes)
	if err := checkRollouts(&o, sizes); err != nil {
		return nil, err
	}
	rep := &Report{Options: o}
	progress := func(format string, args ...any) {
		fmt.Fprintf(o.Out, "%s  "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
	}

	// The agent process idles beside the first idle window: both only wait.
	// Its binary is built first, so that the build does not load the machine
	// while anything is measured.
	agentExe, agentWhat, cleanup := agentBinary(ctx, &o, progress)
	defer cleanup()
	agentDone := func() error { return nil }
	if o.Only != "rollout" {
		agentDone = measureAgent(ctx, &o, rep, agentExe, agentWhat)
	}

	for _, n := range sizes {
		if o.Only == "agent" {
			break
		}
		if err := measureSize(ctx, &o, rep, n, progress); err != nil {
			return nil, err
		}
	}
	if o.Only == "" {
		largest := sizes[len(sizes)-1]
		progress("%d hosts: coordinator alone (cold start, passes, peak RSS)", largest)
		co, err := runCoord(ctx, &o, largest)
		if err != nil {
			return nil, fmt.Errorf("coordinator, %d hosts: %w", largest, err)
		}
		rep.Coord = co
	}
	if err := agentDone(); err != nil {
		return nil, fmt.Errorf("agent process: %w", err)
	}
	if o.Only != "" {
		return rep, ctx.Err()
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return rep, nil
}

// checkRollouts fails before anything is measured when the largest rollout
// of sizes would not fit the process's open files.
func checkRollouts(o *Options, sizes []int) error {
	if o.Only != "" && o.Only != "rollout" {
		return nil
	}
	largest := 0
	for _, n := range sizes {
		if n <= o.RolloutMax {
			largest = n
		}
	}
	return checkOpenFiles(largest)
}

// measureAgent starts measuring the agent process of exe (what it is: what)
// into rep.Agent, and returns a function that waits for the measurement to end.
func measureAgent(ctx context.Context, o *Options, rep *Report, exe, what string) (wait func() error) {
	var (
		wg  sync.WaitGroup
		err error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		rep.Agent, err = runAgentProcess(ctx, o, exe)
		if rep.Agent != nil {
			rep.Agent.Binary = what
		}
	}()
	return func() error { wg.Wait(); return err }
}

// measureSize measures a cluster of n hosts: its idle load (up to o.IdleMax
// hosts, unless o.Only is "rollout"), then (unless it is "idle") at each
// request latency o.Rollouts rollouts (up to o.RolloutMax hosts), and a new
// leader's first pass with every host pending.
func measureSize(ctx context.Context, o *Options, rep *Report, n int, progress func(string, ...any)) error {
	if o.Only != "rollout" && n <= o.IdleMax {
		progress("%d hosts: idle cluster, every agent a candidate, %s window", n, o.Idle)
		idle, err := runIdle(ctx, o, n)
		if err != nil {
			return fmt.Errorf("idle, %d hosts: %w", n, err)
		}
		rep.Idle = append(rep.Idle, idle)
	}
	if o.Only == "idle" {
		return nil
	}
	for _, latency := range o.Latencies {
		if n > o.RolloutMax {
			break
		}
		if err := measureRollouts(ctx, o, rep, n, latency, progress); err != nil {
			return err
		}
	}
	progress("%d hosts: a new leader's first pass, every host pending, at request latency %s", n, latencyList(o.Latencies))
	fs, err := runFailover(ctx, o, n, o.Latencies)
	if err != nil {
		return fmt.Errorf("fail-over, %d hosts: %w", n, err)
	}
	rep.Failovers = append(rep.Failovers, fs...)
	return nil
}

// measureRollouts runs o.Rollouts rollouts of n hosts at one request latency.
func measureRollouts(ctx context.Context, o *Options, rep *Report, n int, latency time.Duration, progress func(string, ...any)) error {
	size := sizeLabel(n, latency)
	for run := 1; run <= o.Rollouts; run++ {
		progress("%s: rollout %d of %d, %d groups of concurrency %d", size, run, o.Rollouts, o.Groups, o.Concurrency)
		r, err := runRollout(ctx, o, n, latency)
		if err != nil {
			return fmt.Errorf("rollout %d (%s hosts): %w", run, size, err)
		}
		r.Run, r.Runs = run, o.Rollouts
		rep.Rollouts = append(rep.Rollouts, r)
		progress("%s: rollout took %s (completed: %t)", size, r.Makespan.Round(time.Second), r.Completed)
	}
	return nil
}

// latencyList writes request latencies as the -latency flag takes them.
func latencyList(ls []time.Duration) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.String()
	}
	return strings.Join(parts, ",")
}

// ErrGoalsMissed is returned by the bench command when a goal was not met.
var ErrGoalsMissed = errors.New("bench: some goals were not met")
