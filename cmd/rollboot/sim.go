//go:build !norollbootsim

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

// simFlags are the flags of `rollboot sim`.
type simFlags struct {
	listen        string
	servers       int
	clients       int
	acl           bool
	stateDir      string
	pools         string
	noRawExec     string
	bootTime      time.Duration
	heartbeatTTL  time.Duration
	hbGrace       time.Duration
	failoverTTL   time.Duration
	migrateTime   time.Duration
	keepSentinel  bool
	nomadVersion  string
	noEventBroker bool
	eventBuffer   int
	jobs          bool
	seed          uint64
}

func (f *simFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.listen, "listen", "127.0.0.1:4646", "address of the emulated cluster API (NOMAD_ADDR)")
	fs.IntVar(&f.servers, "servers", 3, "number of hosts running a Nomad server")
	fs.IntVar(&f.clients, "clients", 6, "number of hosts running a Nomad client")
	fs.BoolVar(&f.acl, "acl", false, "enforce ACLs (the management token is printed)")
	fs.StringVar(&f.stateDir, "state-dir", "", "folder for the per-host files (default: a temporary folder removed on exit)")
	fs.StringVar(&f.pools, "pools", "", "comma-separated node pools, assigned to clients in turn (default: \"default\")")
	fs.StringVar(&f.noRawExec, "no-raw-exec", "", "comma-separated client hosts (client-2) whose Nomad client leaves the raw_exec driver disabled")
	fs.DurationVar(&f.bootTime, "boot-time", 2*time.Second, "how long a rebooting host stays down")
	fs.DurationVar(&f.heartbeatTTL, "heartbeat-ttl", time.Second, "minimum heartbeat TTL: each heartbeat gets it plus up to as much again")
	fs.DurationVar(&f.hbGrace, "heartbeat-grace", 0, "grace added to every heartbeat TTL before a silent node is marked (Nomad: as long as the minimum TTL)")
	fs.DurationVar(&f.failoverTTL, "failover-heartbeat-ttl", 0, "heartbeat TTL every node gets after a leader change (Nomad: 30 minimum TTLs; 0: not stretched)")
	fs.DurationVar(&f.migrateTime, "migrate-time", 200*time.Millisecond, "how long an allocation takes to stop or start")
	fs.BoolVar(&f.keepSentinel, "keep-sentinel", false, "keep the reboot-required sentinel across reboots (reboot loops)")
	fs.BoolVar(&f.jobs, "jobs", false, "register a default set of service, batch and system jobs")
	fs.StringVar(&f.nomadVersion, "nomad-version", nomadsim.DefaultNomadVersion, "the Nomad version the emulator claims to be and follows where Nomad's behaviour differs between versions")
	fs.BoolVar(&f.noEventBroker, "disable-event-broker", false, "serve no event stream, as servers with enable_event_broker = false (in the shape of -nomad-version)")
	fs.IntVar(&f.eventBuffer, "event-buffer-size", nomadsim.DefaultEventBufferSize, "the servers' event_buffer_size: how far behind an event stream subscriber may fall before it is cut off")
	fs.Uint64Var(&f.seed, "seed", 0, "seed for IDs and fault injection (0: random)")
}

func (f *simFlags) config() (nomadsim.Config, error) {
	if f.servers < 0 || f.clients < 0 || f.servers+f.clients == 0 {
		return nomadsim.Config{}, errors.New("--servers and --clients: need at least one host, and no negative counts")
	}
	for name, d := range map[string]time.Duration{"boot-time": f.bootTime, "heartbeat-ttl": f.heartbeatTTL, "migrate-time": f.migrateTime} {
		if d <= 0 {
			return nomadsim.Config{}, fmt.Errorf("--%s %v: must be positive", name, d)
		}
	}
	for name, d := range map[string]time.Duration{"heartbeat-grace": f.hbGrace, "failover-heartbeat-ttl": f.failoverTTL} {
		if d < 0 {
			return nomadsim.Config{}, fmt.Errorf("--%s %v: must not be negative", name, d)
		}
	}
	if f.eventBuffer < 0 {
		return nomadsim.Config{}, fmt.Errorf("--event-buffer-size %d: must not be negative", f.eventBuffer)
	}
	cfg := nomadsim.Config{
		Listen:               f.listen,
		Servers:              f.servers,
		Clients:              f.clients,
		ACL:                  f.acl,
		StateDir:             f.stateDir,
		BootTime:             f.bootTime,
		HeartbeatTTL:         f.heartbeatTTL,
		HeartbeatGrace:       f.hbGrace,
		FailoverHeartbeatTTL: f.failoverTTL,
		MigrateTime:          f.migrateTime,
		KeepSentinelOnReboot: f.keepSentinel,
		NomadVersion:         f.nomadVersion,
		EventBrokerDisabled:  f.noEventBroker,
		EventBufferSize:      f.eventBuffer,
		Seed:                 f.seed,
	}
	for _, h := range strings.Split(f.noRawExec, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		var i int
		if _, err := fmt.Sscanf(h, "client-%d", &i); err != nil || h != fmt.Sprintf("client-%d", i) || i < 1 || i > f.clients {
			return nomadsim.Config{}, fmt.Errorf("--no-raw-exec %q: %q is not a client host (client-1 to client-%d)", f.noRawExec, h, f.clients)
		}
		cfg.NoRawExec = append(cfg.NoRawExec, h)
	}
	if f.pools != "" {
		for _, p := range strings.Split(f.pools, ",") {
			if p = strings.TrimSpace(p); p == "" {
				return nomadsim.Config{}, fmt.Errorf("--pools %q: empty pool name", f.pools)
			}
			cfg.ClientPools = append(cfg.ClientPools, strings.TrimSpace(p))
		}
	}
	return cfg, nil
}

func newSimCmd() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run the Nomad API emulator (nomadsim) as a standalone cluster",
		Long: `Run nomadsim, the in-process emulator of the Nomad HTTP API, as a standalone
cluster for demos and manual testing. Point NOMAD_ADDR (and NOMAD_TOKEN with
--acl) at the printed cluster address; use the control API under /sim/v1/ to
reboot hosts, set reboot-required sentinels, inject faults and add jobs
(see docs/emulator.md). Flags may be written with one or two dashes.`,
		Example: `  rollboot sim --servers 3 --clients 6 --acl --jobs
  rollboot sim -listen 127.0.0.1:4646 -pools a,b -boot-time 2s -migrate-time 200ms`,
		// Flags are parsed in RunE so that Go-style single-dash long flags
		// (-listen) work as well as --listen.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cmd.Flags().Parse(singleDashToDouble(args, cmd.Flags())); err != nil {
				return err
			}
			if help, _ := cmd.Flags().GetBool("help"); help {
				return cmd.Help()
			}
			if rest := cmd.Flags().Args(); len(rest) > 0 {
				return fmt.Errorf("rollboot sim takes no argument, got %q (flags start with -; rollboot sim -h lists them)", rest)
			}
			cfg, err := f.config()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runSim(ctx, cmd.OutOrStdout(), cfg, f.jobs)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// singleDashToDouble rewrites "-listen" and "-listen=x" as "--listen..." for every
// long flag of fs, so that Go-style flags work with cobra.
func singleDashToDouble(args []string, fs *pflag.FlagSet) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(a) > 2 {
			name, _, _ := strings.Cut(a[1:], "=")
			if fs.Lookup(name) != nil {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}

// runSim starts the emulator, prints how to reach it and serves until ctx ends.
func runSim(ctx context.Context, w io.Writer, cfg nomadsim.Config, withJobs bool) error {
	s, err := nomadsim.New(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	if withJobs {
		for _, j := range defaultSimJobs(cfg) {
			if err := s.AddJob(j); err != nil {
				return fmt.Errorf("job %s: %w", j.ID, err)
			}
		}
	}

	fmt.Fprintf(w, "Nomad emulator running. Cluster address: %s\n", s.Address())
	fmt.Fprintf(w, "Control API: %s%s (see docs/emulator.md)\n\n", s.Address(), nomadsim.ControlPrefix)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tROLE\tAGENT ADDRESS\tNODE ID\tPOOL\tFOLDER")
	for _, h := range s.HostStatuses() {
		role := []string{}
		if h.Server != nil {
			role = append(role, "server")
		}
		if h.NodeID != "" {
			role = append(role, "client")
		}
		node, pool := h.NodeID, h.NodePool
		if node == "" {
			node, pool = "-", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\thttp://%s\t%s\t%s\t%s\n", h.Name, strings.Join(role, "+"), h.Addr, node, pool, h.Dir)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nexport NOMAD_ADDR=%s\n", s.Address())
	if cfg.ACL {
		fmt.Fprintf(w, "Management token: %s\nexport NOMAD_TOKEN=%s\n", s.ManagementToken(), s.ManagementToken())
	}
	if withJobs {
		var names []string
		for _, j := range s.Jobs() {
			names = append(names, j.ID+" ("+j.Type+")")
		}
		fmt.Fprintf(w, "Jobs: %s\n", strings.Join(names, ", "))
	}
	fmt.Fprintln(w, "Serving until interrupted (Ctrl-C).")
	<-ctx.Done()
	fmt.Fprintln(w, "Shutting down.")
	return nil
}

// defaultSimJobs is the job set of --jobs: two services with migrate
// max_parallel 1, a long batch job and a system job on every client.
func defaultSimJobs(cfg nomadsim.Config) []nomadsim.JobSpec {
	web := max(cfg.Clients/2, 1)
	return []nomadsim.JobSpec{
		{ID: "web", Type: "service", Groups: []nomadsim.GroupSpec{{Name: "frontend", Count: web, MigrateMaxParallel: 1}}},
		{ID: "api", Type: "service", Groups: []nomadsim.GroupSpec{
			{Name: "api", Count: 2, MigrateMaxParallel: 1},
			{Name: "cache", Count: 1, MigrateMaxParallel: 1},
		}},
		{ID: "nightly-report", Type: "batch", RunTime: 30 * cfg.BootTime, Groups: []nomadsim.GroupSpec{{Name: "report", Count: 1}}},
		{ID: "node-exporter", Type: "system"},
	}
}
