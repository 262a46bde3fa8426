// Package daemon wires the configuration to the long-running parts: the agent, the
// coordinator candidate, and the standalone coordinator. The CLI and the demo both
// start rollboot through it, so the demo runs exactly what a host runs.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/agent"
	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/coordinator"
	"github.com/rollboot/rollboot/internal/deadline"
	"github.com/rollboot/rollboot/internal/discovery"
	"github.com/rollboot/rollboot/internal/election"
	"github.com/rollboot/rollboot/internal/hostcheck"
	"github.com/rollboot/rollboot/internal/nodestream"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/silence"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/telemetry"
	"github.com/rollboot/rollboot/internal/workloadread"
)

// Client builds a Nomad API client for the configuration. Every request it sends
// has a deadline (package deadline): one request that never gets an answer cannot
// hold up the agent or the coordinator.
//
// Its requests are measured (telemetry.NomadTransport).
func Client(cfg *config.Compiled) (*api.Client, error) {
	return clientOver(cfg, nil)
}

// clientOver is Client, over rt when it is not nil.
func clientOver(cfg *config.Compiled, rt http.RoundTripper) (*api.Client, error) {
	ac := cfg.Nomad.APIConfig()
	if rt != nil {
		ac.HttpClient = &http.Client{Transport: deadline.Wrap(rt)}
	}
	c, err := deadline.NomadClient(ac)
	if err != nil {
		return nil, fmt.Errorf("nomad client for %s: %w", cfg.Nomad.Address, err)
	}
	// The client keeps ac's http.Client: its transport is wrapped in place. A
	// leading coordinator's writes are fenced by its lease once more as they go
	// out (election.LeaseTransport).
	ac.HttpClient.Transport = election.LeaseTransport(telemetry.NomadTransport(ac.HttpClient.Transport))
	return c, nil
}

// Store returns the state store for the configuration.
func Store(cfg *config.Compiled, c *api.Client) *store.Store {
	return store.New(c.Variables(), cfg.State.Prefix, cfg.Nomad.Namespace)
}

// Coordinator builds a coordinator from the configuration. clusters gives the
// server quorum gates their view of the Nomad, Consul and Vault clusters; nil
// means no server host is ever granted.
func Coordinator(cfg *config.Compiled, c *api.Client, st *store.Store, log *slog.Logger, clusters coordinator.ClusterAccess) *coordinator.Coordinator {
	return coordinator.New(coordinatorOptions(cfg, c, st, log, clusters))
}

// coordinatorOptions are the coordinator's options: the local settings, and the
// stored policy as its source of rules.
func coordinatorOptions(cfg *config.Compiled, c *api.Client, st *store.Store, log *slog.Logger, clusters coordinator.ClusterAccess) coordinator.Options {
	r := coordinatorRules(cfg, 0) // the safe default until the stored policy is read
	return coordinator.Options{
		Deps: coordinator.Deps{
			Nodes:        c.Nodes(),
			NodeEvents:   nodestream.NomadNodeEvents{Client: c},
			Store:        st,
			Clusters:     clusters,
			Jobs:         agentJobs(cfg, c),
			Policy:       &storedPolicy{st: st, local: cfg},
			WorkloadsAPI: workloadread.Nomad{Client: c},
			Allocs:       c.Allocations(),
			ConsulHealth: consulHealth(clusters),
			GateReader:   gateReader(c, clusters),
		},
		Rules: r,
		Runtime: coordinator.Runtime{
			Resync:            cfg.Coordinator.ResyncInterval,
			AgentJob:          cfg.Coordinator.AgentJob,
			AgentJobNamespace: agentJobNamespace(cfg),
			Log:               log.With("component", "coordinator"),
			Identity:          identity(cfg),
			FleetLockIDs:      cfg.FleetLock.AllowedIDs,
		},
	}
}

// groupSpecs are the coordinator's groups: the compiled groups in match order,
// each with the filter expression that Nomad evaluates to list its nodes.
func groupSpecs(p policy.Policy) []rules.GroupSpec {
	specs := make([]rules.GroupSpec, 0, len(p.Groups))
	for _, g := range p.Groups {
		specs = append(specs, rules.GroupSpec{Group: g, Filter: g.FilterExpression()})
	}
	return specs
}

// LeaderLock returns the election lock for the configuration. It has a client of
// its own: api.Client.Locks rewrites the client's retry settings without a lock,
// which would race with (and change) every other request on a shared client.
func LeaderLock(cfg *config.Compiled, st *store.Store) (election.Lock, error) {
	c, err := Client(cfg)
	if err != nil {
		return nil, err
	}
	ttl := cfg.Coordinator.LockTTL
	v := api.Variable{
		Namespace: cfg.Nomad.Namespace,
		Path:      st.LeaderPath(),
		// Lock delay equal to the TTL, as Nomad's defaults (15s and 15s).
		Lock: &api.VariableLock{TTL: ttl.String(), LockDelay: ttl.String()},
	}
	l, err := c.Locks(api.WriteOptions{Namespace: cfg.Nomad.Namespace}, v)
	if err != nil {
		return nil, fmt.Errorf("coordinator lock %s: %w", v.Path, err)
	}
	return l, nil
}

// RunCoordinator runs a coordinator candidate until ctx ends: it leads while it
// holds the election lock.
//
// clusters may be nil: the Consul and Vault clients are then built from their
// usual environment variables (CONSUL_HTTP_ADDR, VAULT_ADDR, their tokens and TLS).
// The coordinator's metrics go to reg (nil: a registry of its own).
func RunCoordinator(ctx context.Context, cfg *config.Compiled, c *api.Client, log *slog.Logger, clusters coordinator.ClusterAccess, reg *prometheus.Registry) error {
	if err := CheckNomadVersion(c.Agent(), log); err != nil {
		return err
	}
	st := Store(cfg, c)
	if clusters == nil {
		cl, err := ClustersFromEnv(c)
		if err != nil {
			return err
		}
		cl.NomadRegion = cfg.Nomad.Region
		clusters = cl
	}
	opts := coordinatorOptions(cfg, c, st, log, clusters)
	opts.Registry = reg
	if n := Notifier(cfg, st, reg, log); n != nil {
		opts.Notifier = n
	}
	if cfg.Coordinator.NodeMeta {
		opts.NodeMeta = NodeMeta(c, reg, log)
	}
	opts.Silencer = silence.New(silence.Options{Store: st, Registry: reg,
		Log: log.With("component", "silence")})
	co := coordinator.New(opts)
	lock, err := LeaderLock(cfg, st)
	if err != nil {
		return err
	}
	sb, err := Standbys(cfg, st, co.CountCandidates)
	if err != nil {
		return err
	}
	if reg != nil {
		g := telemetry.Register(reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: "rollboot_standby",
			Help: "1 while this process holds a standby slot of the coordinator election, else 0."}))
		sb.OnStandby = func(standingBy bool) {
			v := 0.0
			if standingBy {
				v = 1
			}
			g.Set(v)
		}
	}
	checks := startupChecks{cfg: cfg, clusters: clusters, log: log}
	defer checks.wait()
	return election.RunStandby(ctx, lock, st.WatchLeader, sb, log.With("component", "election"), checks.lead(co.Run))
}

// AgentOptions are what the configuration file does not say about an agent.
type AgentOptions struct {
	Log *slog.Logger
	// Rebooter replaces the configured reboot method (the demo and tests use it).
	Rebooter agent.Rebooter
	// Local replaces the clients of the host's local Consul and Vault agents
	// (default: from CONSUL_HTTP_ADDR, VAULT_ADDR and the rest of their usual
	// environment); Clusters replaces the coordinator's cluster clients.
	Local    *discovery.Local
	Clusters coordinator.ClusterAccess
	// Registry receives the coordinator candidate's metrics (nil: none served).
	Registry *prometheus.Registry
	// Started runs once the agent has started (agent.Options.Started).
	Started func()
	// NomadTransport replaces the transport of the agent's Nomad client (nil:
	// the configuration's); every request still gets its deadline. The bench
	// gives its in-process agents one that speaks HTTP/2 (docs/performance.md,
	// "At 5,000 hosts").
	NomadTransport http.RoundTripper
}

// RunAgent runs the agent for the configuration and, when coordinator.enabled, a
// coordinator candidate beside it, until ctx ends. Before its host reboots, the
// agent stops its candidate so that the election lock is released at once.
func RunAgent(ctx context.Context, cfg *config.Compiled, opt AgentOptions) error {
	log := opt.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c, err := clientOver(cfg, opt.NomadTransport)
	if err != nil {
		return err
	}
	host, hostname, err := agentHost(cfg.Agent.Host, os.Hostname)
	if err != nil {
		return err
	}
	reb := opt.Rebooter
	if reb == nil {
		if reb, err = Rebooter(cfg.Agent.Reboot, cfg.Agent.PassEnv...); err != nil {
			return err
		}
	}
	local, err := localAgents(opt.Local, c, host, cfg.Agent.Host != "")
	if err != nil {
		return err
	}
	opts := agentOptions(cfg, c, host, hostname, local, log)
	opts.Rebooter = reb
	opts.Started = opt.Started

	cand := &candidate{parent: ctx, run: func(ctx context.Context) error {
		// "coordinator_host", not "host": the coordinator logs each host it
		// decides for under "host", and a JSON line must not carry a key twice.
		return RunCoordinator(ctx, cfg, c, log.With("coordinator_host", host), opt.Clusters, opt.Registry)
	}}
	if cfg.Coordinator.Enabled {
		cand.start()
	}
	opts.BeforeReboot = func() { _ = cand.stop() }
	opts.RebootFailed = func() {
		if cfg.Coordinator.Enabled {
			cand.start()
		}
	}
	err = agent.New(opts).Run(ctx)
	return errors.Join(err, cand.stop())
}

// agentHost is the host's name in rollboot (agent.host, else the machine's host
// name) and the machine's host name.
func agentHost(configured string, osHostname func() (string, error)) (host, hostname string, err error) {
	hostname, _ = osHostname()
	host = configured
	if host == "" {
		host = hostname
	}
	if host == "" {
		return "", "", errors.New("agent: cannot tell the host name: set agent.host")
	}
	if err := store.CheckHostName(host); err != nil {
		return "", "", fmt.Errorf("agent: %w: set agent.host", err)
	}
	return host, hostname, nil
}

// localAgents are the clients of the host's local Nomad, Consul and Vault agents:
// given (the demo and tests), or Consul and Vault from their usual environment
// (CONSUL_HTTP_ADDR, VAULT_ADDR and the rest), and the agent's own Nomad client,
// with the host's name (its Nomad node is the node of that name).
func localAgents(given *discovery.Local, c *api.Client, host string, hostConfigured bool) (*discovery.Local, error) {
	local := given
	if local == nil {
		l, err := discovery.LocalFromEnv()
		if err != nil {
			return nil, err
		}
		local = &l
	}
	local.Nomad = c // the agent's own connection to its local Nomad agent
	local.Host = host
	if local.Hostname == "" || hostConfigured {
		// Vault's Raft node_id defaults to the host name: the host's name in
		// rollboot is the best guess when VAULT_RAFT_NODE_ID is not set.
		local.Hostname = host
	}
	return local, nil
}

// agentOptions are the agent's options from the configuration, but for its
// rebooter and its coordinator candidate.
func agentOptions(cfg *config.Compiled, c *api.Client, host, hostname string, local *discovery.Local, log *slog.Logger) agent.Options {
	dets, slow, kinds, note := Detectors(cfg.Agent)
	if note != "" {
		log.Warn("reboot detectors", "note", note)
	}
	log.Info("reboot detectors", "kinds", strings.Join(kinds, ","), "root", cfg.Agent.DetectorRoot)
	return agent.Options{
		Servers:      ServerProbe{Local: *local},
		Host:         host,
		Hostname:     hostname,
		Store:        Store(cfg, c),
		BootIDFile:   cfg.Agent.BootIDFile,
		RecordFile:   cfg.Agent.RecordFile,
		BootTimeFile: cfg.Agent.BootTimeFile,
		FleetLockID:  AgentFleetLockID(cfg.Agent, log),
		Detectors:    dets,
		SlowIndexes:  slow,
		SlowEvery:    cfg.Agent.SentinelCommandInterval,
		Delay:        cfg.Agent.Reboot.Delay,
		PreHooks:     cfg.Agent.Reboot.PreHooks,
		PostHooks:    cfg.Agent.Reboot.PostHooks,
		HookTimeout:  cfg.Agent.Reboot.HookTimeout,
		PassEnv:      cfg.Agent.PassEnv,
		Candidate:    cfg.Coordinator.Enabled,
		Log:          log.With("component", "agent"),
		// Who the host is: what its local Nomad agent runs, and the node of its
		// name (agent.Identity).
		Local:        c.Agent(),
		NodeList:     c.Nodes(),
		NomadVersion: AgentNomadVersion(c.Agent(), host, log),
		// The final go/no-go: the node as Nomad reports it, and for a server host
		// its clusters' health through the host's local agents.
		Nodes:        c.Nodes(),
		Clusters:     &Clusters{Nomad: c, Consul: local.Consul, Vault: local.Vault},
		AgentJob:     agentJob(),
		RecheckEvery: cfg.Agent.Reboot.RecheckInterval,
		// A server host's reboot locks (agent/serverlock.go), in the namespace
		// of rollboot's other variables; a server counts as back once stable
		// for the default server_stable_for (the policy's is the coordinator's).
		ServerLocks:    c.Variables(),
		Namespace:      cfg.Nomad.Namespace,
		ServerLockFile: cfg.Agent.ServerLockFile,
		ServerLockTTL:  cfg.Agent.ServerLockTTL,
	}
}

// agentJob is the Nomad job the agent runs as, "<namespace>/<job>", from the
// variables Nomad sets in every task's environment; "" outside Nomad.
func agentJob() string {
	job := os.Getenv("NOMAD_JOB_ID")
	if job == "" {
		return ""
	}
	ns := os.Getenv("NOMAD_NAMESPACE")
	if ns == "" {
		ns = "default"
	}
	return ns + "/" + job
}

// candidate is the coordinator candidate beside an agent; it stops before the
// host reboots (releasing the lock at once) and stands again if the reboot fails.
type candidate struct {
	parent context.Context
	run    func(ctx context.Context) error

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func (c *candidate) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(c.parent)
	done := make(chan struct{})
	c.cancel, c.done = cancel, done
	go func() {
		defer close(done)
		if err := c.run(ctx); err != nil {
			c.mu.Lock()
			c.err = errors.Join(c.err, err)
			c.mu.Unlock()
		}
	}()
}

// stop stops the candidate, if it runs, and returns the errors it ended with.
func (c *candidate) stop() error {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.cancel, c.done = nil, nil
	c.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Detectors builds the configured detectors; slow lists the indexes of those that
// run on the sentinel command interval rather than every half second.
func Detectors(ac config.AgentConfig) (dets []agent.Detector, slow []int, kinds []string, note string) {
	sys := agent.System{Root: ac.DetectorRoot, Timeout: ac.DetectorTimeout, PassEnv: ac.PassEnv, KernelOnly: ac.KernelOnly}
	kinds, note = agent.ResolveKinds(ac.Detectors, sys)
	sentinel := ac.SentinelFile
	if slices.Contains(kinds, agent.KindDebian) && sentinel == sys.Path(agent.DebianSentinel) {
		sentinel = "" // the debian detector watches it, and reads its packages
	}
	if sentinel != "" {
		dets = append(dets, agent.FileDetector{Path: sentinel})
	}
	if len(ac.SentinelCommand) > 0 {
		slow = append(slow, len(dets))
		dets = append(dets, agent.CommandDetector{Argv: ac.SentinelCommand, Timeout: ac.SentinelCommandTimeout, PassEnv: ac.PassEnv})
	}
	for _, k := range kinds {
		d, err := agent.NewDetector(k, sys)
		if err != nil { // the configuration's check knows every kind
			note = strings.TrimPrefix(note+"; "+err.Error(), "; ")
			continue
		}
		if k != agent.KindDebian { // a file watched (Notifier); the others run programs or list folders
			slow = append(slow, len(dets))
		}
		dets = append(dets, d)
	}
	return dets, slow, kinds, note
}

// Rebooter builds the configured reboot method; a reboot command gets the
// secret-bearing variables named in passEnv (agent.pass_env) and no others.
func Rebooter(rc config.RebootConfig, passEnv ...string) (agent.Rebooter, error) {
	switch rc.Method {
	case config.RebootMethodCommand:
		return agent.CommandRebooter{Argv: rc.Command, PassEnv: passEnv}, nil
	case config.RebootMethodSignal:
		return agent.SignalRebooter{Signal: rc.Signal}, nil
	case config.RebootMethodLogind:
		return agent.LogindRebooter{}, nil
	}
	return nil, fmt.Errorf("unknown reboot method %q", rc.Method)
}

// agentJobs is the jobs API the coordinator reads the agent job's allocations
// with; nil when coordinator.agent_job is "" (no presence check).
func agentJobs(cfg *config.Compiled, c *api.Client) hostcheck.JobsAPI {
	if cfg.Coordinator.AgentJob == "" {
		return nil
	}
	return c.Jobs()
}

func agentJobNamespace(cfg *config.Compiled) string {
	if cfg.Coordinator.AgentJobNamespace != "" {
		return cfg.Coordinator.AgentJobNamespace
	}
	return cfg.Nomad.Namespace
}
