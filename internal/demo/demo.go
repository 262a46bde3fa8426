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
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/api"
	vaultapi "github.com/hashicorp/vault/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/deadline"
	"github.com/rollboot/rollboot/internal/discovery"
	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/preview"
	"github.com/rollboot/rollboot/internal/simhost"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/storedpolicy"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// ConfigHCL is the local configuration of the demo's agents.
//
//go:embed demo.hcl
var ConfigHCL []byte

// PolicyHCL is the rollout policy the demo applies before it starts.
//
//go:embed policy.hcl
var PolicyHCL []byte

// Options configure the demo.
type Options struct {
	Out     io.Writer     // progress and summary
	Log     *slog.Logger  // rollboot's own logs (nil: discarded)
	Clients int           // client hosts, split over the pools "web" and "batch"; default 8
	Timeout time.Duration // default 60s
	// UI is where to serve the status page while the demo runs ("": nowhere).
	UI string
	// Keep leaves the emulated cluster and its agents running after the
	// rollout, until ctx ends.
	Keep bool
}

// Summary is the outcome of a demo run.
type Summary struct {
	Hosts      []HostTimes
	Makespan   time.Duration
	LowerBound time.Duration
	Peak       map[string]int
	Violations []invariants.Violation
	// Tolerance is each server cluster's failure tolerance over time.
	Tolerance map[string][]Point
	Problems  []string // anything else that did not hold
}

// HostTimes are one host's phase durations.
type HostTimes struct {
	Host, Group            string
	Drain, Reboot, Rejoin  time.Duration
	Started, Finished      time.Time
	BootBefore, BootAfter  string
	Forced                 bool
	Server                 bool
	RebootsSeenByEmulator  int
	EligibleAfterTheReboot bool
}

// applyPolicy stores the demo's policy as `rollboot policy apply policy.hcl`
// does, and prints what it changes.
func applyPolicy(ctx context.Context, out io.Writer, st *store.Store, client *api.Client) error {
	fmt.Fprintln(out, "$ rollboot policy apply policy.hcl")
	ch, err := storedpolicy.Prepare(ctx, st, client.Nodes(), PolicyHCL, "policy.hcl")
	if err != nil {
		return fmt.Errorf("demo policy: %w", err)
	}
	storedpolicy.WriteDiff(out, ch)
	rec, err := ch.Apply(ctx, st, "rollboot demo", time.Now(), nil)
	if err != nil {
		return fmt.Errorf("apply the demo policy: %w", err)
	}
	fmt.Fprintf(out, "Policy version %d applied.\n\n", rec.Version)
	return nil
}

// OK reports whether every check held.
func (s *Summary) OK() bool { return len(s.Violations) == 0 && len(s.Problems) == 0 }

// Run runs the demo.
func Run(ctx context.Context, opt Options) (*Summary, error) {
	opt = opt.withDefaults()
	base, err := config.LoadBytes(ConfigHCL, "demo.hcl")
	if err != nil {
		return nil, fmt.Errorf("demo configuration: %w", err)
	}
	cl, err := newCluster(opt.Clients)
	if err != nil {
		return nil, err
	}
	defer cl.sim.Close()
	cl.describe(opt.Out)
	clusters, client, st, err := connect(ctx, opt.Out, cl, base)
	if err != nil {
		return nil, err
	}

	var reg *prometheus.Registry // the agents' candidates: the page tells the leader's slots
	if opt.UI != "" {
		reg = telemetry.NewRegistry()
	}
	// The agents run until the end (with Keep, until ctx ends); the rollout
	// has opt.Timeout.
	ag := startAgents(ctx, cl.agentSupervisor(base, clusters, reg, opt.Log))
	defer ag.stop()
	runCtx, cancel := context.WithTimeout(ag.ctx, opt.Timeout)
	defer cancel()

	if err := needAndPlan(runCtx, opt.Out, cl.sim, base, client, clusters, cl.all); err != nil {
		return nil, err
	}
	ui, uiDone := "", func() error { return nil }
	if opt.UI != "" {
		if ui, uiDone, err = serveUI(ag.ctx, opt.UI, client, st, reg, opt.Log); err != nil {
			return nil, err
		}
		defer func() { ag.cancel(); _ = uiDone() }()
		fmt.Fprintf(opt.Out, "Status page: %s\n\n", ui)
	}

	start, tolerance, err := rollOut(runCtx, opt.Out, st, clusters, len(cl.all))
	if err != nil {
		return nil, err
	}
	timedOut := runCtx.Err() != nil && ctx.Err() == nil
	cancel()
	if !opt.Keep {
		ag.stop()
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	hist, err := st.History(context.Background())
	if err != nil {
		return nil, err
	}
	sum := cl.summarize(hist, start, demoConcurrency)
	sum.Tolerance = tolerance()
	if timedOut {
		sum.Problems = append(sum.Problems, fmt.Sprintf("the rollout did not finish within %s", opt.Timeout))
	}
	printSummary(opt.Out, sum)
	if opt.Keep {
		keepMessage(opt.Out, cl.sim.Address(), ui)
		<-ctx.Done()
		ag.stop()
		return sum, uiDone()
	}
	return sum, nil
}

// withDefaults is o with every unset option at its default.
func (o Options) withDefaults() Options {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Clients <= 0 {
		o.Clients = 8
	}
	if o.Timeout <= 0 {
		o.Timeout = 60 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return o
}

// demoPools are the node pools the client hosts are split over, one group of
// the policy each (policy.hcl).
var demoPools = []string{"web", "batch"}

// demoConcurrency is the concurrency of each of the policy's groups
// (policy.hcl).
const demoConcurrency = 2

// cluster is the demo's emulated cluster and its hosts.
type cluster struct {
	sim              *nomadsim.Sim
	servers, clients []nomadsim.Host
	all              []nomadsim.Host   // the servers, then the clients
	groupOf          map[string]string // each client host's group: its node pool
}

// newCluster starts the emulated cluster, 3 server hosts and clients Nomad
// clients in demoPools, with the demo's jobs placed.
func newCluster(clients int) (c *cluster, err error) {
	sim, err := nomadsim.New(nomadsim.Config{
		Servers:       3,
		ConsulServers: true,
		VaultServers:  true,
		// Auto-unseal (as with a cloud KMS) lets the demo run unattended; without
		// it each Vault comes back sealed and its host waits for an unseal.
		VaultAutoUnseal: true,
		Clients:         clients,
		ClientPools:     demoPools,
		HeartbeatTTL:    150 * time.Millisecond,
		BootTime:        400 * time.Millisecond,
		MigrateTime:     100 * time.Millisecond,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			sim.Close()
		}
	}()
	for _, j := range demoJobs() {
		if err := sim.AddJob(j); err != nil {
			return nil, fmt.Errorf("job %s: %w", j.ID, err)
		}
	}
	c = &cluster{sim: sim, groupOf: map[string]string{}}
	for _, h := range sim.Hosts() {
		if h.NodeID != "" {
			c.clients = append(c.clients, h)
		}
		if h.Server != nil {
			c.servers = append(c.servers, h)
		}
	}
	c.all = append(append([]nomadsim.Host(nil), c.servers...), c.clients...)
	for _, h := range c.clients {
		n, err := sim.Node(h.Name)
		if err != nil {
			return nil, err
		}
		c.groupOf[h.Name] = n.NodePool
	}
	return c, nil
}

// demoJobs are the jobs the demo's cluster runs.
func demoJobs() []nomadsim.JobSpec {
	return []nomadsim.JobSpec{
		{ID: "web", Type: "service", NodePool: "web", Groups: []nomadsim.GroupSpec{{Name: "frontend", Count: 6, MigrateMaxParallel: 2}}},
		{ID: "api", Type: "service", NodePool: "batch", Groups: []nomadsim.GroupSpec{{Name: "api", Count: 4, MigrateMaxParallel: 1}}},
		{ID: "nightly-report", Type: "batch", NodePool: "batch", RunTime: 1500 * time.Millisecond, Groups: []nomadsim.GroupSpec{{Name: "report", Count: 2}}},
		{ID: "node-exporter", Type: "system"},
		// rollboot's own agents, deployed as a system job as in production.
		{ID: "rollboot", Type: "system"},
	}
}

// describe tells what the cluster runs and what the policy does with it.
func (c *cluster) describe(out io.Writer) {
	fmt.Fprintf(out, "Emulated cluster at %s: 3 server hosts running Nomad, Consul and Vault servers,\n%d Nomad clients in node pools %s.\n",
		c.sim.Address(), len(c.clients), strings.Join(demoPools, " and "))
	fmt.Fprintf(out, "Jobs: %d service allocations, %d batch, a system job, and the rollboot agents as a system job.\n", 10, 2)
	fmt.Fprintf(out, "Policy: groups web and batch, 2 hosts at a time each; drains ignore system jobs;\n")
	fmt.Fprintf(out, "servers one at a time, behind the quorum gates, leaders handed over first.\n\n")
}

// agentSupervisor runs rollboot's agent on every host of c, as the system job
// "rollboot" (each with its host's files and its host's own Consul and Vault
// agents; its reboots reboot the emulated host).
func (c *cluster) agentSupervisor(base *config.Compiled, clusters *daemon.Clusters, reg *prometheus.Registry,
	log *slog.Logger) *simhost.Supervisor {
	sup := &simhost.Supervisor{Sim: c.sim, Job: "rollboot", Start: func(ctx context.Context, h nomadsim.Host) {
		cfg := *base
		cfg.Nomad.Address = "http://" + h.Addr
		cfg.Agent.Host = h.Name
		cfg.Agent.BootIDFile = filepath.Join(h.Dir, "boot_id")
		cfg.Agent.BootTimeFile = filepath.Join(h.Dir, nomadsim.StatFile)
		cfg.Agent.ServerLockFile = filepath.Join(h.Dir, "server-lock.json")
		cfg.Agent.RecordFile = filepath.Join(h.Dir, "record.json")
		cfg.Agent.SentinelFile = filepath.Join(h.Dir, "reboot-required")
		cfg.Agent.DetectorRoot = h.Dir // the emulated host's files, not the machine's
		// Debian's files too, under the host's folder, so that `sim-ctl
		// need-reboot -packages` gives a need its fingerprint (its wave).
		cfg.Agent.Detectors = []string{"debian"}
		local, err := hostLocal(h)
		if err != nil {
			log.Error("agent", "host", h.Name, "err", err)
			return
		}
		err = daemon.RunAgent(ctx, &cfg, daemon.AgentOptions{
			Log:      log.With("sim_host", h.Name),
			Rebooter: simRebooter{sim: c.sim, host: h.Name},
			Local:    local,
			Clusters: clusters,
			Registry: reg,
		})
		if err != nil && ctx.Err() == nil {
			log.Error("agent stopped", "host", h.Name, "err", err)
		}
	}}
	for _, h := range c.all {
		sup.Hosts = append(sup.Hosts, h.Name)
	}
	return sup
}

// agents are the demo's running agents.
type agents struct {
	ctx    context.Context // theirs: it ends when they are told to stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startAgents runs sup's agents until ctx ends or they are stopped.
func startAgents(ctx context.Context, sup *simhost.Supervisor) *agents {
	a := &agents{}
	a.ctx, a.cancel = context.WithCancel(ctx)
	a.wg.Add(1)
	go func() { defer a.wg.Done(); sup.Run(a.ctx) }()
	return a
}

// stop stops the agents and waits until they have.
func (a *agents) stop() {
	a.cancel()
	a.wg.Wait()
}

// connect makes the demo's clients of cl: the coordinator's of the server
// clusters, and a Nomad client and the store on it as the CLI's, with which it
// applies the demo's policy.
func connect(ctx context.Context, out io.Writer, cl *cluster, base *config.Compiled) (*daemon.Clusters, *api.Client, *store.Store, error) {
	clusters, err := demoClusters(cl.sim)
	if err != nil {
		return nil, nil, nil, err
	}
	client, err := api.NewClient(&api.Config{Address: cl.sim.Address()})
	if err != nil {
		return nil, nil, nil, err
	}
	st := store.New(client.Variables(), base.State.Prefix, "")
	if err := applyPolicy(ctx, out, st, client); err != nil {
		return nil, nil, nil, err
	}
	return clusters, client, st, nil
}

// rollOut resumes the rollout, and prints each phase change until every host
// has finished a reboot or ctx ends. It returns when the rollout started and
// the failure tolerance of each server cluster over it (sampleTolerance:
// complete once ctx ends).
func rollOut(ctx context.Context, out io.Writer, st *store.Store, clusters *daemon.Clusters,
	hosts int) (time.Time, func() map[string][]Point, error) {
	start := time.Now()
	tolerance := sampleTolerance(ctx, clusters, start)
	if _, err := st.UpdateControl(ctx, func(c *store.Control) error { c.Paused, c.PauseReason = false, ""; return nil }); err != nil {
		return start, nil, fmt.Errorf("resume: %w", err)
	}
	fmt.Fprintf(out, "Resumed: the rollout starts.\n\n")
	<-watchProgress(ctx, out, st, start, hosts)
	return start, tolerance, nil
}

// needAndPlan pauses the rollout, makes every host need a reboot, waits until
// every agent has published it, and prints `rollboot plan`: the rollout the
// policy produces. The caller resumes.
func needAndPlan(ctx context.Context, out io.Writer, sim *nomadsim.Sim, cfg *config.Compiled, client *api.Client,
	clusters *daemon.Clusters, all []nomadsim.Host) error {
	st := daemon.Store(cfg, client)
	if _, err := st.UpdateControl(ctx, func(c *store.Control) error {
		c.Paused, c.PauseReason = true, "demo: previewing the plan"
		return nil
	}); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	for _, h := range all {
		if err := sim.SetRebootRequired(h.Name, "kernel update installed"); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "Paused. Every host now needs a reboot (/var/run/reboot-required).\n")
	for idx := uint64(0); ; {
		recs, n, err := st.Hosts(ctx, idx, 5*time.Second)
		if err != nil {
			return fmt.Errorf("wait for the agents to publish their need: %w", err)
		}
		needs := 0
		for _, r := range recs {
			if r.RebootRequired {
				needs++
			}
		}
		if needs == len(all) {
			break
		}
		idx = n
	}
	hist, err := st.History(ctx)
	if err != nil {
		return err
	}
	inForce, version, err := daemon.PolicyInForce(ctx, cfg, st)
	if err != nil {
		return err
	}
	now := time.Now()
	p, err := daemon.Preview(ctx, inForce, client, clusters, hist, now)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n$ rollboot plan\n")
	src := preview.Source{Name: "stored policy", Version: strconv.Itoa(version)}
	if err := preview.WriteText(out, preview.Report{Policy: src, Plan: p}); err != nil {
		return err
	}
	fmt.Fprintln(out)
	return nil
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

// summarize judges the rollout that started at start: the invariants from
// what the emulator saw and the nodes' final state, each host's times from its
// history record (hist), and the makespan against its lower bound.
func (c *cluster) summarize(hist []store.HistoryRecord, start time.Time, concurrency int) *Summary {
	sum := &Summary{}
	events := c.sim.Events(0)
	final := map[string]invariants.Final{}
	for _, h := range c.clients {
		n, err := c.sim.Node(h.Name)
		if err != nil {
			sum.Problems = append(sum.Problems, err.Error())
			continue
		}
		final[h.Name] = invariants.FinalOf(n)
	}
	spec := c.spec(concurrency)
	res := invariants.Check(events, final, spec)
	sum.Violations, sum.Peak = res.Violations, res.Peak

	byHost := sum.rebootsByHost(hist)
	cycles := map[string][]time.Duration{}
	var end time.Time
	for _, h := range c.all {
		r, ok := byHost[h.Name]
		if !ok {
			sum.Problems = append(sum.Problems, h.Name+": no finished reboot")
			continue
		}
		ht := hostTimes(h, r, res.Reboots[h.Name], final[h.Name].Eligible)
		if r.BootIDAfter == "" || r.BootIDAfter == r.BootIDBefore {
			sum.Problems = append(sum.Problems, h.Name+": boot ID did not change")
		}
		sum.Hosts = append(sum.Hosts, ht)
		cycles[r.Group] = append(cycles[r.Group], r.Finished.Sub(ht.Started))
		if r.Finished.After(end) {
			end = r.Finished
		}
	}
	sort.Slice(sum.Hosts, func(i, j int) bool { return sum.Hosts[i].Started.Before(sum.Hosts[j].Started) })
	if !end.IsZero() {
		sum.Makespan = end.Sub(start)
	}
	sum.LowerBound = lowerBound(cycles, concurrency, spec.Concurrency)
	return sum
}

// spec is what the demo knows of its cluster and policy, for the invariants:
// each client group takes concurrency hosts at a time, every client's node was
// eligible before, and every host must reboot once.
func (c *cluster) spec(concurrency int) invariants.Spec {
	spec := invariants.Spec{Group: c.groupOf, Concurrency: map[string]int{}, EligibleBefore: map[string]bool{}, Reboots: map[string]int{}}
	for _, g := range c.groupOf {
		spec.Concurrency[g] = concurrency
	}
	for _, h := range c.all {
		spec.Reboots[h.Name] = 1
	}
	for _, h := range c.clients {
		spec.EligibleBefore[h.Name] = true
	}
	return spec
}

// rebootsByHost are the cycles of hist that rebooted their host, by host. A
// cycle that ended otherwise, or a second reboot of a host, is a problem.
func (s *Summary) rebootsByHost(hist []store.HistoryRecord) map[string]store.HistoryRecord {
	byHost := map[string]store.HistoryRecord{}
	for _, r := range hist {
		if r.Outcome != "rebooted" {
			s.Problems = append(s.Problems, fmt.Sprintf("%s: cycle ended %s", r.Host, r.Outcome))
			continue
		}
		if _, dup := byHost[r.Host]; dup {
			s.Problems = append(s.Problems, r.Host+": rebooted more than once")
		}
		byHost[r.Host] = r
	}
	return byHost
}

// hostTimes are host h's phase durations, from its cycle's history record r,
// with the reboots the emulator saw and whether its node was eligible at the
// end.
func hostTimes(h nomadsim.Host, r store.HistoryRecord, reboots int, eligible bool) HostTimes {
	tl := r.Timeline
	return HostTimes{
		Host: h.Name, Group: r.Group, Forced: r.Forced, BootBefore: r.BootIDBefore, BootAfter: r.BootIDAfter,
		Drain:   tl[store.PhaseDrained].Sub(tl[store.PhaseDraining]),
		Reboot:  tl[store.PhaseRejoining].Sub(tl[store.PhaseDrained]),
		Rejoin:  tl[store.PhaseIdle].Sub(tl[store.PhaseRejoining]),
		Started: tl[store.PhaseDraining], Finished: r.Finished,
		RebootsSeenByEmulator:  reboots,
		EligibleAfterTheReboot: eligible,
		Server:                 h.Server != nil,
	}
}

// lowerBound is the shortest makespan the cycles allow: each group needs
// ceil(hosts/concurrency) back-to-back cycles of its mean cycle time; groups
// run side by side. A group without a concurrency in groups (the server
// hosts) takes one host at a time (their quorum groups).
func lowerBound(cycles map[string][]time.Duration, concurrency int, groups map[string]int) time.Duration {
	var bound time.Duration
	for g, cs := range cycles {
		var total time.Duration
		for _, c := range cs {
			total += c
		}
		mean := total / time.Duration(len(cs))
		conc := concurrency
		if _, ok := groups[g]; !ok {
			conc = 1
		}
		waves := int(math.Ceil(float64(len(cs)) / float64(conc)))
		if lb := time.Duration(waves) * mean; lb > bound {
			bound = lb
		}
	}
	return bound
}

func printSummary(out io.Writer, s *Summary) {
	fmt.Fprintln(out, "\nSummary")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Host\tGroup\tDrain\tReboot\tRejoin\tReboots\tEligible after")
	for _, h := range s.Hosts {
		elig := fmt.Sprint(h.EligibleAfterTheReboot)
		group := h.Group
		if h.Server {
			elig, group = "(no node)", "servers"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", h.Host, group, round(h.Drain), round(h.Reboot), round(h.Rejoin),
			h.RebootsSeenByEmulator, elig)
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
	printTolerance(out, s.Tolerance)
	check(!has(2), "no server rebooted unless its clusters were healthy and could lose it")
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

// Point is a value at a time since the start of the rollout.
type Point struct {
	At    time.Duration
	Value int
}

// demoClusters are the coordinator's clients of the three server clusters.
// Every request they send has a deadline, as in a deployment (package deadline).
func demoClusters(sim *nomadsim.Sim) (*daemon.Clusters, error) {
	n, err := deadline.NomadClient(&api.Config{Address: sim.Address()})
	if err != nil {
		return nil, err
	}
	cc := consulapi.DefaultConfig()
	cc.Address = sim.ConsulAddress()
	c, err := deadline.ConsulClient(cc)
	if err != nil {
		return nil, err
	}
	vc := vaultapi.DefaultConfig()
	vc.Address = sim.VaultAddress()
	v, err := vaultapi.NewClient(deadline.VaultConfig(vc))
	if err != nil {
		return nil, err
	}
	v.SetToken("demo")
	return &daemon.Clusters{Nomad: n, Consul: c, Vault: v}, nil
}

// hostLocal are the clients of a host's own Consul and Vault agents (none on a
// host without them).
func hostLocal(h nomadsim.Host) (*discovery.Local, error) {
	l := &discovery.Local{Hostname: h.Name}
	if h.ConsulAddr != "" {
		cc := consulapi.DefaultConfig()
		cc.Address = "http://" + h.ConsulAddr
		c, err := deadline.ConsulClient(cc)
		if err != nil {
			return nil, err
		}
		l.Consul = c
	}
	if h.VaultAddr != "" {
		vc := vaultapi.DefaultConfig()
		vc.Address = "http://" + h.VaultAddr
		vc.MaxRetries = 0
		v, err := vaultapi.NewClient(deadline.VaultConfig(vc))
		if err != nil {
			return nil, err
		}
		v.SetToken("demo")
		l.Vault = v
	}
	return l, nil
}

// sampleTolerance records each server cluster's failure tolerance, as autopilot
// reports it, whenever it changes, until ctx ends; the returned function gives
// the series (and waits for the sampler to stop).
func sampleTolerance(ctx context.Context, cl *daemon.Clusters, start time.Time) func() map[string][]Point {
	out := map[string][]Point{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(25 * time.Millisecond)
		defer t.Stop()
		for {
			for _, p := range []string{"nomad", "consul", "vault"} {
				h := cl.Read(ctx, p, "")
				if ctx.Err() != nil {
					return // a read cut short by the end is no sample
				}
				if h.Err == nil && len(h.Servers) == 0 {
					continue // a new leader's autopilot before its first pass: no sample
				}
				v := h.FailureTolerance
				if h.Err != nil {
					v = -1 // no answer (no leader): shown as "?"
				}
				if pts := out[p]; len(pts) == 0 || pts[len(pts)-1].Value != v {
					out[p] = append(out[p], Point{At: time.Since(start), Value: v})
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() map[string][]Point {
		<-done
		return out
	}
}

func printTolerance(out io.Writer, tol map[string][]Point) {
	if len(tol) == 0 {
		return
	}
	fmt.Fprintln(out, "Failure tolerance of each server cluster over time (value from time):")
	for _, p := range []string{"nomad", "consul", "vault"} {
		var parts []string
		for _, pt := range tol[p] {
			v := fmt.Sprint(pt.Value)
			if pt.Value < 0 {
				v = "?"
			}
			parts = append(parts, fmt.Sprintf("%s@%.1fs", v, pt.At.Seconds()))
		}
		fmt.Fprintf(out, "  %-6s %s\n", p, strings.Join(parts, " "))
	}
	fmt.Fprintln(out)
}
