//go:build !norollbootsim

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rollboot/rollboot/internal/bench"
)

func newBenchCmd(lf *logFlags) *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure rollboot at scale against the embedded Nomad emulator",
		Long: `Run the real coordinator and agents (one per simulated host, in this process) against the
embedded Nomad emulator at each host count, and print one table of the scale figures with the
goal beside each: makespan against its lower bound, slot hand-off and sentinel-to-pending
latencies, a new leader's first pass with every host pending, Nomad requests and variable
writes per rebooted host, the coordinator's CPU per rebooted host, Nomad requests on an idle
cluster, the coordinator's cold start, pass time and peak memory, an agent's memory and idle
CPU, and the emulator's own share of the time; then a Kured-style baseline for the same work and
the requests by route. The machines' timings are scaled 1:50 (a boot of 1.2 s); Nomad's protocol
is not. Host counts above -rollout-max measure the coordinator alone. With -latency each host
count's rollouts and first passes run once per Nomad request latency. With -rollouts N each
rollout runs N times, the makespan goal judged on their mean: a rollout's figures vary from run
to run. Not a test: the exit status is 1 when a goal was missed, figures depend on the machine
(docs/performance.md).`,
		Args: noArgs("bench"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return f.run(cmd, lf)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// benchFlags are the flags of `rollboot bench`: bench.Options, and what the
// command does around the run.
type benchFlags struct {
	o          bench.Options
	hosts      string
	latency    string
	logFile    string
	requestLog string
	cpuProfile string
}

func (f *benchFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.hosts, "hosts", "100,1000,5000", "host counts to measure, comma-separated")
	fs.IntVar(&f.o.Groups, "groups", 10, "groups (one node pool each)")
	fs.IntVar(&f.o.Concurrency, "concurrency", 5, "hosts of a group rebooting at once")
	fs.IntVar(&f.o.Rollouts, "rollouts", 1, "rollouts at each host count and latency, each judged on its own but the makespan, judged on their mean")
	fs.IntVar(&f.o.RolloutMax, "rollout-max", 5000, "largest host count that runs a full rollout; above it the coordinator alone is measured")
	fs.IntVar(&f.o.IdleMax, "idle-max", 1000, "largest host count whose idle load is measured")
	fs.StringVar(&f.latency, "latency", "0", "Nomad request latencies the rollouts and a new leader's first pass run at, each in turn, comma-separated (0,10ms,50ms)")
	fs.DurationVar(&f.o.Idle, "idle", bench.DefaultIdle, "length of the idle windows (requests on an idle cluster, agent CPU); shorter than Nomad's longest blocking wait (5m19s), it misses the watches' asks")
	fs.DurationVar(&f.o.Settle, "settle", 10*time.Second, "time given to settle before each idle window")
	fs.StringVar(&f.o.Only, "only", "", "measure only part of the figures: idle (the idle load and the agent process), agent (the agent process) or rollout (the rollouts and a new leader's first pass)")
	fs.StringVar(&f.o.AgentExe, "agent-exe", "", "the rollboot binary whose agent process is measured (default: a release build of the source tree in the working directory, built with go as scripts/release builds it; this binary when that fails)")
	fs.IntVar(&f.o.Passes, "passes", 100, "reconcile passes timed at the largest host count")
	fs.StringVar(&f.logFile, "log-file", "", "write rollboot's own logs to this file")
	fs.StringVar(&f.requestLog, "request-log", "", "write a line per Nomad request of the rollouts to this file: when, how long, which listener, method and path (which requests go one after the other)")
	fs.StringVar(&f.cpuProfile, "cpu-profile", "", "write a CPU profile of the whole run (emulator, agents, coordinator) to this file")
}

// run runs the benchmark, prints its report, and fails when a goal was missed.
// rollboot's own logs go to -log-file, logged as lf says.
func (f *benchFlags) run(cmd *cobra.Command, lf *logFlags) error {
	o := f.o
	var err error
	if o.Hosts, err = parseHostCounts(f.hosts); err != nil {
		return err
	}
	if o.Latencies, err = parseLatencies(f.latency); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the rollboot binary: %w", err)
	}
	o.Exe = exe
	o.ReleaseAgent = true
	o.Out = cmd.ErrOrStderr()
	if f.logFile != "" {
		file, err := os.Create(f.logFile)
		if err != nil {
			return err
		}
		defer file.Close()
		if o.Log, err = lf.logger(file); err != nil {
			return err
		}
	}
	if f.requestLog != "" {
		file, err := os.Create(f.requestLog)
		if err != nil {
			return err
		}
		defer file.Close()
		w := bufio.NewWriter(file)
		defer w.Flush()
		o.RequestLog = w
	}
	if f.cpuProfile != "" {
		file, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer file.Close()
		if err := pprof.StartCPUProfile(file); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, o)
	if err != nil {
		return err
	}
	rep.Print(cmd.OutOrStdout())
	if rep.Failed() {
		return bench.ErrGoalsMissed
	}
	return nil
}

// parseHostCounts reads -hosts, a comma-separated list of host counts.
func parseHostCounts(s string) ([]int, error) {
	var counts []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-hosts: %q is not a host count (a list like 100,1000,5000)", f)
		}
		counts = append(counts, n)
	}
	return counts, nil
}

// parseLatencies reads -latency, a comma-separated list of request latencies.
func parseLatencies(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d < 0 {
			return nil, fmt.Errorf("-latency: %q is not a request latency (a list like 0,10ms,50ms)", f)
		}
		out = append(out, d)
	}
	return out, nil
}
