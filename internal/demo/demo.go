// Package demo runs a whole rolling reboot on an embedded, emulated Nomad cluster:
// the same agents and coordinator a real deployment runs, one agent per simulated
// host, with the emulator standing in for Nomad and the machines. It ends with a
// summary and an independent check of the safety invariants.
package demo

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simhost"
	"github.com/rollboot/rollboot/internal/store"
)

// ConfigHCL is the policy the demo runs with.
//
//go:embed demo.hcl
var ConfigHCL []byte

// Options configure the demo.
type Options struct {
	Out     io.Writer     // progress and summary
	Log     *slog.Logger  // rollboot's own logs (nil: discarded)
	Clients int           // client hosts, split over the pools "web" and "batch"; default 8
	Timeout time.Duration // default 60s
}

// Summary is the outcome of a demo run.
type Summary struct {
	Hosts      []HostTimes
	Makespan   time.Duration
	LowerBound time.Duration
	Peak       map[string]int
	Violations []invariants.Violation
	Problems   []string // anything else that did not hold
}

// HostTimes are one host's phase durations.
type HostTimes struct {
	Host, Group            string
	Drain, Reboot, Rejoin  time.Duration
	Started, Finished      time.Time
	BootBefore, BootAfter  string
	Forced                 bool
	RebootsSeenByEmulator  int
	EligibleAfterTheReboot bool
}

// OK reports whether every check held.
func (s *Summary) OK() bool { return len(s.Violations) == 0 && len(s.Problems) == 0 }

// Run runs the demo.
func Run(ctx context.Context, opt Options) (*Summary, error) {
	if opt.Out == nil {
		opt.Out = io.Discard
	}
	if opt.Clients <= 0 {
		opt.Clients = 8
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 60 * time.Second
	}
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, err := config.LoadBytes(ConfigHCL, "demo.hcl")
	if err != nil {
		return nil, fmt.Errorf("demo configuration: %w", err)
	}
	pools := []string{"web", "batch"}
	sim, err := nomadsim.New(nomadsim.Config{
		Servers:      3,
		Clients:      opt.Clients,
		ClientPools:  pools,
		HeartbeatTTL: 150 * time.Millisecond,
		BootTime:     400 * time.Millisecond,
		MigrateTime:  100 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	jobs := []nomadsim.JobSpec{
		{ID: "web", Type: "service", NodePool: "web", Groups: []nomadsim.GroupSpec{{Name: "frontend", Count: 6, MigrateMaxParallel: 2}}},
		{ID: "api", Type: "service", NodePool: "batch", Groups: []nomadsim.GroupSpec{{Name: "api", Count: 4, MigrateMaxParallel: 1}}},
		{ID: "nightly-report", Type: "batch", NodePool: "batch", RunTime: 1500 * time.Millisecond, Groups: []nomadsim.GroupSpec{{Name: "report", Count: 2}}},
		{ID: "node-exporter", Type: "system"},
		// rollboot's own agents, deployed as a system job as in production.
		{ID: "rollboot", Type: "system"},
	}
	for _, j := range jobs {
		if err := sim.AddJob(j); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
	}

	var clients []nomadsim.Host
	for _, h := range sim.Hosts() {
		if h.NodeID != "" {
			clients = append(clients, h)
		}
	}
	groupOf := map[string]string{}
	for _, h := range clients {
		n, err := sim.Node(h.Name)
		if err != nil {
			return nil, err
		}
		groupOf[h.Name] = n.NodePool
	}
	fmt.Fprintf(opt.Out, "Emulated Nomad cluster at %s: 3 servers, %d clients in node pools %s.\n",
		sim.Address(), len(clients), strings.Join(pools, " and "))
	fmt.Fprintf(opt.Out, "Jobs: %d service allocations, %d batch, a system job, and the rollboot agents as a system job.\n", 10, 2)
	fmt.Fprintf(opt.Out, "Policy: groups web and batch, 2 hosts at a time each; drains ignore system jobs.\n\n")

	sup := &simhost.Supervisor{Sim: sim, Job: "rollboot", Start: func(ctx context.Context, h nomadsim.Host) {
		cfg := *base
		cfg.Nomad.Address = "http://" + h.Addr
		cfg.Agent.Host = h.Name
		cfg.Agent.BootIDFile = filepath.Join(h.Dir, "boot_id")
		cfg.Agent.SentinelFile = filepath.Join(h.Dir, "reboot-required")
		err := daemon.RunAgent(ctx, &cfg, daemon.AgentOptions{
			Log:      log.With("sim_host", h.Name),
			Rebooter: simRebooter{sim: sim, host: h.Name},
		})
		if err != nil && ctx.Err() == nil {
			log.Error("agent stopped", "host", h.Name, "err", err)
		}
	}}
	for _, h := range clients {
		sup.Hosts = append(sup.Hosts, h.Name)
	}
	runCtx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); sup.Run(runCtx) }()
	defer wg.Wait()
	defer cancel()

	client, err := api.NewClient(&api.Config{Address: sim.Address()})
	if err != nil {
		return nil, err
	}
	st := store.New(client.Variables(), base.State.Prefix, "")

	start := time.Now()
	for _, h := range clients {
		if err := sim.SetRebootRequired(h.Name, "kernel update installed"); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(opt.Out, "Every client host now needs a reboot (/var/run/reboot-required).\n\n")

	done := watchProgress(runCtx, opt.Out, st, start, len(clients))
	<-done
	timedOut := runCtx.Err() != nil && ctx.Err() == nil
	cancel()
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	hist, err := st.History(context.Background())
	if err != nil {
		return nil, err
	}
	sum := summarize(sim, clients, groupOf, hist, start, 2)
	if timedOut {
		sum.Problems = append(sum.Problems, fmt.Sprintf("the rollout did not finish within %s", opt.Timeout))
	}
	printSummary(opt.Out, sum)
	return sum, nil
}

// simRebooter reboots a simulated host: its processes die, its node misses
// heartbeats, and it comes back with a new boot ID.
type simRebooter struct {
	sim  *nomadsim.Sim
	host string
}

func (r simRebooter) Reboot(context.Context) error { return r.sim.Reboot(r.host) }

// watchProgress prints each phase change until every host has finished a reboot.
func watchProgress(ctx context.Context, out io.Writer, st *store.Store, start time.Time, hosts int) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := map[string]string{}
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			plans, err := st.Plans(ctx)
			if err != nil {
				continue
			}
			names := make([]string, 0, len(plans))
			for n := range plans {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				p := plans[n]
				if last[n] != p.Phase {
					fmt.Fprintf(out, "  %6.2fs  %-9s %-6s %s\n", time.Since(start).Seconds(), n, p.Group, p.Phase)
					last[n] = p.Phase
				}
			}
			hist, err := st.History(ctx)
			if err == nil && len(hist) >= hosts && allIdle(plans) {
				return
			}
		}
	}()
	return done
}

func allIdle(plans map[string]store.Plan) bool {
	for _, p := range plans {
		if p.Phase != store.PhaseIdle {
			return false
		}
	}
	return true
}

func summarize(sim *nomadsim.Sim, clients []nomadsim.Host, groupOf map[string]string, hist []store.HistoryRecord,
	start time.Time, concurrency int) *Summary {
	sum := &Summary{}
	events := sim.Events(0)
	final := map[string]invariants.Final{}
	spec := invariants.Spec{Group: groupOf, Concurrency: map[string]int{}, EligibleBefore: map[string]bool{}, Reboots: map[string]int{}}
	for _, g := range groupOf {
		spec.Concurrency[g] = concurrency
	}
	for _, h := range clients {
		spec.EligibleBefore[h.Name] = true
		spec.Reboots[h.Name] = 1
		n, err := sim.Node(h.Name)
		if err != nil {
			sum.Problems = append(sum.Problems, err.Error())
			continue
		}
		final[h.Name] = invariants.FinalOf(n)
	}
	res := invariants.Check(events, final, spec)
	sum.Violations, sum.Peak = res.Violations, res.Peak

	byHost := map[string]store.HistoryRecord{}
	for _, r := range hist {
		if r.Outcome != "rebooted" {
			sum.Problems = append(sum.Problems, fmt.Sprintf("%s: cycle ended %s", r.Host, r.Outcome))
			continue
		}
		if _, dup := byHost[r.Host]; dup {
			sum.Problems = append(sum.Problems, r.Host+": rebooted more than once")
		}
		byHost[r.Host] = r
	}
	cycles := map[string][]time.Duration{}
	count := map[string]int{}
	var end time.Time
	for _, h := range clients {
		r, ok := byHost[h.Name]
		if !ok {
			sum.Problems = append(sum.Problems, h.Name+": no finished reboot")
			continue
		}
		tl := r.Timeline
		ht := HostTimes{
			Host: h.Name, Group: r.Group, Forced: r.Forced, BootBefore: r.BootIDBefore, BootAfter: r.BootIDAfter,
			Drain:   tl[store.PhaseDrained].Sub(tl[store.PhaseDraining]),
			Reboot:  tl[store.PhaseRejoining].Sub(tl[store.PhaseDrained]),
			Rejoin:  tl[store.PhaseIdle].Sub(tl[store.PhaseRejoining]),
			Started: tl[store.PhaseDraining], Finished: r.Finished,
			RebootsSeenByEmulator:  res.Reboots[h.Name],
			EligibleAfterTheReboot: final[h.Name].Eligible,
		}
		if r.BootIDAfter == "" || r.BootIDAfter == r.BootIDBefore {
			sum.Problems = append(sum.Problems, h.Name+": boot ID did not change")
		}
		sum.Hosts = append(sum.Hosts, ht)
		cycles[r.Group] = append(cycles[r.Group], r.Finished.Sub(ht.Started))
		count[r.Group]++
		if r.Finished.After(end) {
			end = r.Finished
		}
	}
	sort.Slice(sum.Hosts, func(i, j int) bool { return sum.Hosts[i].Started.Before(sum.Hosts[j].Started) })
	if !end.IsZero() {
		sum.Makespan = end.Sub(start)
	}
	// Lower bound: each group needs ceil(hosts/concurrency) back-to-back cycles of
	// its mean cycle time; groups run side by side.
	for g, cs := range cycles {
		var total time.Duration
		for _, c := range cs {
			total += c
		}
		mean := total / time.Duration(len(cs))
		waves := int(math.Ceil(float64(count[g]) / float64(concurrency)))
		if lb := time.Duration(waves) * mean; lb > sum.LowerBound {
			sum.LowerBound = lb
		}
	}
	return sum
}

func printSummary(out io.Writer, s *Summary) {
	fmt.Fprintln(out, "\nSummary")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Host\tGroup\tDrain\tReboot\tRejoin\tReboots\tEligible after")
	for _, h := range s.Hosts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%v\n", h.Host, h.Group, round(h.Drain), round(h.Reboot), round(h.Rejoin),
			h.RebootsSeenByEmulator, h.EligibleAfterTheReboot)
	}
	tw.Flush()
	ratio := 0.0
	if s.LowerBound > 0 {
		ratio = float64(s.Makespan) / float64(s.LowerBound)
	}
	fmt.Fprintf(out, "\nMakespan %s; lower bound %s (hosts / concurrency x mean cycle, per group); ratio %.2f\n",
		round(s.Makespan), round(s.LowerBound), ratio)
	groups := make([]string, 0, len(s.Peak))
	for g := range s.Peak {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		fmt.Fprintf(out, "Group %s: at most %d hosts out of service at once\n", g, s.Peak[g])
	}
	fmt.Fprintln(out)
	check := func(ok bool, what string) {
		mark := "ok  "
		if !ok {
			mark = "FAIL"
		}
		fmt.Fprintf(out, "[%s] %s\n", mark, what)
	}
	has := func(inv int) bool {
		for _, v := range s.Violations {
			if v.Invariant == inv {
				return true
			}
		}
		return false
	}
	check(!has(5) && len(s.Problems) == 0, "every host rebooted exactly once")
	check(!has(1), "concurrency never exceeded in any group")
	check(!has(3), "every node is eligible again and none is left draining")
	check(!has(4), "no host rebooted before its drain completed")
	for _, v := range s.Violations {
		fmt.Fprintf(out, "  violation: %s\n", v)
	}
	for _, p := range s.Problems {
		fmt.Fprintf(out, "  problem: %s\n", p)
	}
}

func round(d time.Duration) string {
	return d.Round(10 * time.Millisecond).String()
}

// ErrChecksFailed is returned by the demo command when a check did not hold.
var ErrChecksFailed = errors.New("demo: some checks failed")
