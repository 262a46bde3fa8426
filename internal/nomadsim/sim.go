// Package nomadsim is an in-process emulator of the Nomad HTTP API.
//
// It serves the real Nomad wire format (it encodes the github.com/hashicorp/nomad/api
// types), so the official api.Client talks to it unchanged. It models a cluster of
// hosts: some run Nomad servers, most run Nomad clients, and each has its own local
// agent address, boot ID and "reboot required" sentinel. The semantics it follows are
// written down in the project's Nomad API reference; every handler cites the Nomad
// source it models. Where the emulator and Nomad differ, the emulator is wrong.
package nomadsim

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim/consulsim"
	"github.com/rollboot/rollboot/internal/nomadsim/vaultsim"
)

// Config describes the emulated cluster. Every duration is configurable so that a
// whole reboot cycle can take about a second in tests.
type Config struct {
	Region     string // default "global"
	Datacenter string // default "dc1"

	// NomadVersion is the Nomad version the emulator claims to be (its agents'
	// build, its clients' nomad.version) and follows where Nomad's behaviour
	// changed between versions (default DefaultNomadVersion; docs/emulator.md).
	NomadVersion string
	// EventBrokerDisabled models servers run with enable_event_broker = false:
	// /v1/event/stream cannot be had, in the shape of NomadVersion
	// (eventstream.go).
	EventBrokerDisabled bool
	// EventBufferSize is the servers' event_buffer_size: how many items the
	// event broker keeps, and so how far behind a subscriber may fall before it
	// is cut off (default DefaultEventBufferSize, Nomad's 100; eventstream.go).
	EventBufferSize int

	// Servers is the number of hosts that run a Nomad server (and no client).
	Servers int
	// Clients is the number of hosts that run a Nomad client.
	Clients int
	// ClientPools, when set, assigns client i the node pool ClientPools[i%len].
	ClientPools []string
	// NoRawExec names client hosts ("client-2", or one AddHost adds later)
	// whose Nomad client leaves the raw_exec driver disabled, Nomad's default: their nodes fingerprint it
	// undetected, "disabled", with no driver.raw_exec attribute (nodes.go), so
	// no allocation of a raw_exec job is placed there (constraints.go).
	NoRawExec []string
	// ClientResources, when set, gives the nodes of the named client hosts
	// ("client-2") the resources their clients fingerprint and reserve
	// (resources.go); the others get DefaultNodeCPU and DefaultNodeMemoryMB.
	// SetNodeResources changes them later.
	ClientResources map[string]NodeResources

	// ACL enables ACL enforcement; the management token is then in Sim.ManagementToken.
	ACL bool

	// HeartbeatTTL is the minimum heartbeat TTL (nomad/config.go MinHeartbeatTTL,
	// 10s; scaled here). Each heartbeat gets it plus a random stagger of up to as
	// much again; a node silent for that TTL plus HeartbeatGrace is marked down or
	// disconnected (heartbeat.go).
	HeartbeatTTL time.Duration
	// HeartbeatGrace is added to every heartbeat TTL before the leader marks a
	// silent node (nomad/config.go HeartbeatGrace: 10s, as long as the minimum
	// TTL). Default 0, so that the fast default timings stay fast; tests of
	// missed heartbeats set Nomad's ratio (HeartbeatGrace = HeartbeatTTL).
	HeartbeatGrace time.Duration
	// InitialHeartbeatStagger bounds the random wait of a client that booted
	// before its first heartbeat (client/client.go initialHeartbeatStagger: 10s,
	// a constant, not the TTL the servers hand out, which grows with the node
	// count: nomad/heartbeat.go resetHeartbeatTimerLocked, RateScaledInterval).
	// Default HeartbeatTTL: the two are equal at Nomad's minimum TTL.
	InitialHeartbeatStagger time.Duration
	// FailoverHeartbeatTTL is the TTL every node gets when a new leader takes
	// over (nomad/config.go FailoverHeartbeatTTL: 5m, 30 times the minimum TTL;
	// heartbeat.go initializeHeartbeatTimers). 0 (the default) keeps each node's
	// last deadline, so that fast tests are not slowed down by elections.
	FailoverHeartbeatTTL time.Duration
	// BootTime is how long a rebooting host stays down.
	BootTime time.Duration
	// MigrateTime is how long one allocation takes to stop (and its replacement to
	// start) during a drain.
	MigrateTime time.Duration
	// MinHealthyTime is the default migrate.min_healthy_time of a service group:
	// how long an allocation must run before its client marks it healthy
	// (nomad/structs/structs.go DefaultMigrateStrategy: 10s). Default 200ms, the
	// scale of the default HeartbeatTTL (200ms for Nomad's 10s minimum TTL).
	MinHealthyTime time.Duration
	// HealthyDeadline is the default migrate.healthy_deadline: an allocation not
	// healthy by then is marked unhealthy (DefaultMigrateStrategy: 5m). Default 6s,
	// on the same scale.
	HealthyDeadline time.Duration
	// ServerStabilizeTime is how long a server that came back takes to catch up
	// its log before autopilot counts it healthy again. Autopilot's own
	// server_stabilization_time, which gates promotions, is
	// AutopilotStabilizationTime.
	ServerStabilizeTime time.Duration
	// ElectionTime is how long the servers take to elect a new leader after the
	// leader failed or quorum came back (Raft election timeout; about 1-2s in Nomad).
	ElectionTime time.Duration

	// AutopilotInterval is how often the leader's autopilot reconciles: promotes
	// stable non-voters and removes dead servers (Nomad AutopilotInterval and
	// Consul's autopilot reconcile interval, 10s; raft-autopilot run.go).
	AutopilotInterval time.Duration
	// AutopilotUpdateInterval is how long a new Consul leader's or Vault active
	// node's autopilot takes to compute its first state: until then their
	// health endpoints answer with an empty, unhealthy state (raftsim
	// autopilot.go). A new Nomad leader computes its state as its autopilot
	// starts (raft-autopilot run.go Start), before it serves.
	AutopilotUpdateInterval time.Duration
	// AutopilotStabilizationTime is how long a non-voter must have been healthy
	// before autopilot promotes it (server_stabilization_time, 10s in Nomad,
	// Consul and Vault; raft-autopilot stable_promoter.go).
	AutopilotStabilizationTime time.Duration
	// KeepDeadServers turns autopilot's cleanup_dead_servers off for Nomad and
	// Consul (it is on by default in both: a failed server is removed from the
	// Raft configuration and rejoins as a non-voter). Vault never cleans up by
	// default (vaultsim).
	KeepDeadServers bool

	// ConsulServers runs a Consul server (with its own local agent listener,
	// Host.ConsulAddr) on every Nomad server host (consulsim).
	ConsulServers bool
	// VaultServers runs a Vault server with integrated storage (Host.VaultAddr) on
	// every Nomad server host (vaultsim).
	VaultServers bool
	// VaultAutoUnseal makes Vault unseal itself at boot (an auto-unseal seal
	// stanza). Off by default: a rebooted Vault node stays sealed until UnsealVault.
	VaultAutoUnseal bool
	// VaultStepDownTime is how long a Vault node that stepped down waits before it
	// tries to take the HA lock again (vault/ha.go manualStepDownSleepPeriod, 10s).
	VaultStepDownTime time.Duration

	// AllowShortLockTTL lets variable locks use a TTL below Nomad's 10s minimum
	// (nomad/structs/variables.go minVariableLockTTL), so that tests can run
	// api.NewLockLeaser fail-overs with TTLs of ~100ms. Off by default: Nomad's range.
	AllowShortLockTTL bool

	// KeepSentinelOnReboot leaves the "reboot required" sentinel in place after a
	// reboot, to test reboot loops. By default a reboot clears it, as an installed
	// kernel update does.
	KeepSentinelOnReboot bool

	// StateDir holds per-host files (sentinel, boot ID). Empty: a temporary folder
	// removed by Close.
	StateDir string

	// Listen is the address of the cluster API. Empty: 127.0.0.1:0.
	Listen string

	// UnencryptedHTTP2 makes every listener also accept HTTP/2 without TLS
	// (prior knowledge), beside HTTP/1.1. Nomad does not (command/agent/http.go
	// NewHTTPServers serves net/http's default protocols: HTTP/2 only over
	// TLS); it is there for one process that runs thousands of simulated
	// hosts' agents (rollboot bench), whose agents then each hold one
	// connection to their host's listener instead of one per request in
	// flight (a plan watch and a record watch block at all times), which at
	// 5,000 hosts is the difference between fitting the open-file limit and
	// not (docs/performance.md, "At 5,000 hosts"). Off by default.
	UnencryptedHTTP2 bool

	// RequestLatency makes every Nomad, Consul and Vault API request wait this
	// long before it is served, as a remote or loaded leader answers (1–50 ms in
	// real clusters); the control API does not wait. The wait is request
	// latency, not the emulator's work: RequestStats counts it in Latency, not
	// in Busy. 0 (the default) adds none; SetRequestLatency and the control API
	// (/sim/v1/latency) change it at run time.
	RequestLatency time.Duration

	// RequestLog, when set, is told of every Nomad, Consul and Vault API
	// request served, a line each (reqstats.go logRequest): when its handler
	// began (after the request latency), how long the handler took, who
	// served it (the cluster's
	// address, or a host's own listener), its method and path, and the index
	// of a blocking query. It shows which requests a process sends one after
	// the other. The control API is not logged.
	RequestLog io.Writer

	// Seed makes random choices (IDs, fault injection) repeatable. 0: random.
	Seed uint64
}

func (c *Config) setDefaults() {
	if c.Region == "" {
		c.Region = "global"
	}
	if c.Datacenter == "" {
		c.Datacenter = "dc1"
	}
	if c.NomadVersion == "" {
		c.NomadVersion = DefaultNomadVersion
	}
	if c.EventBufferSize == 0 {
		c.EventBufferSize = DefaultEventBufferSize // nomad/stream/event_broker.go NewEventBroker
	}
	if c.HeartbeatTTL == 0 {
		c.HeartbeatTTL = 200 * time.Millisecond
	}
	if c.InitialHeartbeatStagger == 0 {
		c.InitialHeartbeatStagger = c.HeartbeatTTL
	}
	if c.BootTime == 0 {
		c.BootTime = 300 * time.Millisecond
	}
	if c.MigrateTime == 0 {
		c.MigrateTime = 50 * time.Millisecond
	}
	if c.MinHealthyTime == 0 {
		c.MinHealthyTime = 200 * time.Millisecond
	}
	if c.HealthyDeadline == 0 {
		c.HealthyDeadline = 6 * time.Second
	}
	if c.ServerStabilizeTime == 0 {
		c.ServerStabilizeTime = 100 * time.Millisecond
	}
	if c.ElectionTime == 0 {
		c.ElectionTime = 50 * time.Millisecond
	}
	if c.AutopilotInterval == 0 {
		c.AutopilotInterval = 100 * time.Millisecond
	}
	if c.AutopilotUpdateInterval == 0 {
		c.AutopilotUpdateInterval = 20 * time.Millisecond
	}
	if c.AutopilotStabilizationTime == 0 {
		c.AutopilotStabilizationTime = 100 * time.Millisecond
	}
	if c.VaultStepDownTime == 0 {
		c.VaultStepDownTime = 100 * time.Millisecond
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:0"
	}
}

// Sim is a running emulated cluster.
type Sim struct {
	cfg Config
	// brokerOff: the servers run without the event broker (eventstream.go),
	// from Config.EventBrokerDisabled or SetEventBrokerDisabled.
	brokerOff atomic.Bool
	// stream holds the event stream's test knobs (SetEventStreamSilent,
	// SetEventSubscriberDelay; eventstream.go).
	stream streamControl

	mu     sync.Mutex
	index  uint64        // the Raft index: bumped by every write
	notify chan struct{} // closed and replaced on every write (wakes blocking queries)
	rng    *rand.Rand
	closed bool

	events []Event
	faults faultSet
	// watches counts blocking queries waiting on their watched data (watch.go).
	watches watchStats
	// reqs times the requests the emulator answers (reqstats.go).
	reqs reqStats
	// logMu keeps the lines of Config.RequestLog whole.
	logMu sync.Mutex
	// latency is the request latency in nanoseconds (Config.RequestLatency),
	// read without the state lock by every request.
	latency atomic.Int64
	// topics are the channels blocking queries sleep on (watch.go).
	topics topics

	// ACL state (acl.go).
	acl aclState

	// namespaces other than "default", by name, and the index of their
	// table (jobregister.go).
	namespaces     map[string]*api.Namespace
	namespaceIndex uint64

	// Hosts and the Nomad cluster on them.
	hosts     map[string]*Host // by name
	hostOrder []string
	// powerGen counts the changes to the hosts' power: a host added, going
	// down, booting (View.PowerGen).
	powerGen uint64

	cluster clusterState       // nodes, jobs, allocations (nodes.go)
	servers serverState        // Nomad's Raft membership, leadership, autopilot (operator.go)
	vars    varState           // Variables and locks (variables.go)
	consul  *consulsim.Cluster // Consul servers on the server hosts (servers.go)
	vault   *vaultsim.Cluster  // Vault servers on the server hosts (servers.go)
	boots   bootBlocks         // hosts that do not come back from a reboot (bootblock.go)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	stateDir    string
	ownStateDir bool

	main *listener
	// control serves the control API on every listener (control.go).
	control http.Handler
	// auxLis are the Consul and Vault listeners; consulAddr and vaultAddr the
	// cluster addresses among them ("" when not configured).
	auxLis                []*listener
	consulAddr, vaultAddr string
}

// Host is one simulated machine.
type Host struct {
	Name string
	// Addr is the address (host:port) of this host's local Nomad agent.
	Addr string
	// ConsulAddr and VaultAddr are the addresses of the host's Consul agent and
	// Vault server ("" when it runs none).
	ConsulAddr string
	VaultAddr  string
	// BootID changes on every boot.
	BootID string
	// Up is false while the host is rebooting.
	Up bool
	// Server is non-nil when the host runs a Nomad server.
	Server *ServerInfo
	// NodeID is the Nomad node ID of the host's client ("" when it runs no client).
	NodeID string
	// Dir holds the host's files: "reboot-required", "boot_id" and "stat".
	Dir string

	Boots int // number of completed boots since the emulator started

	// DrainOnShutdown is the host's client's drain_on_shutdown block (nil:
	// none), set with SetDrainOnShutdown (selfdrain.go).
	DrainOnShutdown *DrainOnShutdown
	// shuttingDown: the host's client is draining itself before the host
	// goes down for a reboot.
	shuttingDown bool

	lis *listener
}

// ServerInfo describes a Nomad server on a host.
type ServerInfo struct {
	ID       string // Raft ID (the server's node ID)
	Name     string // "<host>.<region>"
	RaftAddr string // ip:4647, as Raft and /v1/status/peers show it
	Voter    bool
}

// New builds an emulated cluster and starts serving it. Call Close when done.
func New(cfg Config) (*Sim, error) {
	cfg.setDefaults()
	if _, err := version.NewVersion(cfg.NomadVersion); err != nil {
		return nil, fmt.Errorf("nomad version %q: %w", cfg.NomadVersion, err)
	}
	if cfg.EventBufferSize < 0 {
		// command/agent/agent.go convertServerConfig refuses a negative
		// event_buffer_size (0 becomes the default, NewEventBroker).
		return nil, fmt.Errorf("event buffer size %d: must not be negative", cfg.EventBufferSize)
	}
	for h, nr := range cfg.ClientResources {
		if err := nr.check(h); err != nil {
			return nil, err
		}
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sim{
		cfg:    cfg,
		notify: make(chan struct{}),
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		hosts:  map[string]*Host{},
		ctx:    ctx,
		cancel: cancel,
		index:  1,
	}
	if cfg.StateDir == "" {
		dir, err := os.MkdirTemp("", "nomadsim-")
		if err != nil {
			cancel()
			return nil, fmt.Errorf("state dir: %w", err)
		}
		s.stateDir, s.ownStateDir = dir, true
	} else {
		if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
			cancel()
			return nil, fmt.Errorf("state dir: %w", err)
		}
		s.stateDir = cfg.StateDir
	}
	s.brokerOff.Store(cfg.EventBrokerDisabled)
	s.acl.init(s, cfg.ACL)
	s.namespaces = map[string]*api.Namespace{}
	s.cluster.init()
	s.cluster.wl.triggers.undrainUnblocks = versionAtLeast(cfg.NomadVersion, undrainUnblocksSince)
	s.cluster.stream = newEventBroker(cfg.EventBufferSize, s.nodeEligibilityEventType())
	s.vars.init()
	s.cluster.topics, s.vars.topics = &s.topics, &s.topics
	s.initServers()
	s.latency.Store(int64(cfg.RequestLatency))
	s.control = s.controlHandler()

	main, err := s.listen(cfg.Listen, nil)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.main = main

	s.mu.Lock()
	for i := 0; i < cfg.Servers; i++ {
		if _, err := s.addHostLocked(fmt.Sprintf("server-%d", i+1), true, false, ""); err != nil {
			s.mu.Unlock()
			s.Close()
			return nil, err
		}
	}
	for i := 0; i < cfg.Clients; i++ {
		pool := "default"
		if len(cfg.ClientPools) > 0 {
			pool = cfg.ClientPools[i%len(cfg.ClientPools)]
		}
		if _, err := s.addHostLocked(fmt.Sprintf("client-%d", i+1), false, true, pool); err != nil {
			s.mu.Unlock()
			s.Close()
			return nil, err
		}
	}
	s.electLocked()
	s.mu.Unlock()

	s.startBackground()
	return s, nil
}

// AddHost adds a host at run time: a server, a client in the given node pool, or both.
func (s *Sim) AddHost(name string, server, client bool, pool string) (*Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, err := s.addHostLocked(name, server, client, pool)
	if err != nil {
		return nil, err
	}
	if server {
		s.electLocked()
	}
	return h.snapshot(), nil
}

func (s *Sim) addHostLocked(name string, server, client bool, pool string) (*Host, error) {
	if _, ok := s.hosts[name]; ok {
		return nil, fmt.Errorf("host %q exists", name)
	}
	if pool == "" {
		pool = "default"
	}
	dir := filepath.Join(s.stateDir, "hosts", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	h := &Host{Name: name, Dir: dir, Up: true, BootID: s.uuidLocked()}
	if err := writeBootFiles(dir, h.BootID, time.Now()); err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	lis, err := s.listen("127.0.0.1:0", h)
	if err != nil {
		return nil, err
	}
	h.lis = lis
	h.Addr = lis.addr
	s.hosts[name] = h
	s.hostOrder = append(s.hostOrder, name)
	s.powerGen++
	n := len(s.hostOrder)
	if server {
		h.Server = &ServerInfo{
			ID:       s.uuidLocked(),
			Name:     name + "." + s.cfg.Region,
			RaftAddr: fmt.Sprintf("10.0.%d.%d:4647", n/250, n%250+1),
			Voter:    true,
		}
		if err := s.addServersLocked(h, n); err != nil {
			return nil, err
		}
	}
	if client {
		h.NodeID = s.cluster.registerNodeLocked(s, h, pool)
	}
	s.eventLocked(Event{Type: EventHostAdded, Host: name, NodeID: h.NodeID})
	return h, nil
}

// Address is the URL of the cluster API (as NOMAD_ADDR).
func (s *Sim) Address() string { return "http://" + s.main.addr }

// StateDir is the folder that holds the per-host files.
func (s *Sim) StateDir() string { return s.stateDir }

// Config returns the configuration the emulator runs with (defaults applied).
func (s *Sim) Config() Config { return s.cfg }

// Hosts returns a snapshot of every host, in creation order.
func (s *Sim) Hosts() []Host {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Host, 0, len(s.hostOrder))
	for _, n := range s.hostOrder {
		out = append(out, *s.hosts[n].snapshot())
	}
	return out
}

// Host returns a snapshot of one host.
func (s *Sim) Host(name string) (Host, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[name]
	if !ok {
		return Host{}, false
	}
	return *h.snapshot(), true
}

func (h *Host) snapshot() *Host {
	c := *h
	if h.Server != nil {
		srv := *h.Server
		c.Server = &srv
	}
	c.lis = nil
	return &c
}

// Close stops every background loop and listener.
func (s *Sim) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.bumpLocked() // wake blocking queries
	s.topics.allLocked()
	s.mu.Unlock()
	s.cancel()
	if s.main != nil {
		s.main.close()
	}
	s.mu.Lock()
	// The listeners close side by side: each waits up to its shutdown timeout
	// for queries that cannot end while s.mu is held, so one after the other
	// a cluster of a thousand hosts would take minutes to close.
	var lis []*listener
	for _, h := range s.hosts {
		if h.lis != nil {
			lis = append(lis, h.lis)
		}
	}
	lis = append(lis, s.auxLis...)
	var wg sync.WaitGroup
	for _, l := range lis {
		wg.Go(l.close)
	}
	wg.Wait()
	s.mu.Unlock()
	s.wg.Wait()
	if s.ownStateDir {
		os.RemoveAll(s.stateDir)
	}
}

// bumpLocked advances the Raft index and wakes blocking queries. Every state change
// is one Raft apply in Nomad, so every change gets a new index.
func (s *Sim) bumpLocked() uint64 {
	s.index++
	close(s.notify)
	s.notify = make(chan struct{})
	if s.watches.onNotify == 0 {
		// Queries sleeping on topics are woken by the write itself, under
		// this same lock: none is left to re-check it (watch.go).
		s.watches.checked = s.index
	}
	return s.index
}

// Index is the current Raft index.
func (s *Sim) Index() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index
}

func (s *Sim) uuidLocked() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(s.rng.UintN(256))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// after runs fn under s.mu after d, unless the emulator is closed first.
func (s *Sim) after(d time.Duration, fn func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return
		}
		fn()
	}()
}

// every runs fn under s.mu each d until the emulator is closed.
func (s *Sim) every(d time.Duration, fn func(now time.Time)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case now := <-t.C:
				s.mu.Lock()
				if !s.closed {
					fn(now)
				}
				s.mu.Unlock()
				s.reqs.background(time.Since(now))
			}
		}
	}()
}

// WaitIndex blocks until the Raft index is greater than idx or ctx ends. Tests use it
// to wait on a condition without sleeping.
func (s *Sim) WaitIndex(ctx context.Context, idx uint64) uint64 {
	for {
		s.mu.Lock()
		cur, ch := s.index, s.notify
		s.mu.Unlock()
		if cur > idx {
			return cur
		}
		select {
		case <-ctx.Done():
			return cur
		case <-ch:
		}
	}
}

// WaitFor re-evaluates cond after every state change until it is true or ctx ends.
// cond runs with the emulator locked and must not call back into Sim.
func (s *Sim) WaitFor(ctx context.Context, cond func(v *View) bool) error {
	for {
		s.mu.Lock()
		ok := cond(&View{s: s})
		ch := s.notify
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// View gives read access to the emulator state inside WaitFor.
type View struct{ s *Sim }

// Host returns a host by name.
func (v *View) Host(name string) (Host, bool) {
	h, ok := v.s.hosts[name]
	if !ok {
		return Host{}, false
	}
	return *h.snapshot(), true
}

// PowerGen counts the changes to the hosts' power (a host added, going down,
// booting with a new boot ID): while it stays the same, every host's Up and
// BootID are as they were.
func (v *View) PowerGen() uint64 { return v.s.powerGen }

// Events returns the event log so far.
func (v *View) Events() []Event { return append([]Event(nil), v.s.events...) }

// ---- listeners -----------------------------------------------------------------

type listener struct {
	addr string
	srv  *http.Server
	host *Host // nil for the cluster address
}

func (s *Sim) listen(addr string, h *Host) (*listener, error) {
	return s.listenHandler(addr, h, s.handler(h))
}

// listenHandler serves handler on addr (the Consul and Vault listeners use their own).
func (s *Sim) listenHandler(addr string, h *Host, handler http.Handler) (*listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	l := &listener{addr: ln.Addr().String(), host: h}
	l.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	if s.cfg.UnencryptedHTTP2 {
		l.srv.Protocols = new(http.Protocols)
		l.srv.Protocols.SetHTTP1(true)
		l.srv.Protocols.SetUnencryptedHTTP2(true)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = l.srv.Serve(ln)
	}()
	return l, nil
}

func (l *listener) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := l.srv.Shutdown(ctx); err != nil {
		l.srv.Close()
	}
}

// ---- events --------------------------------------------------------------------

// Event types in the emulator's event log. The log is what an independent checker
// reads to verify rollboot's safety invariants.
const (
	EventHostAdded        = "host.added"
	EventHostRebootStart  = "host.reboot"          // the host went down for a reboot
	EventHostBoot         = "host.boot"            // the host is up with a new boot ID
	EventHostRebootNeeded = "host.reboot-required" // the sentinel was created
	EventNodeDown         = "node.down"
	EventNodeReady        = "node.ready"
	EventDrainStart       = "node.drain.start"
	EventDrainUpdate      = "node.drain.update"
	EventDrainCancel      = "node.drain.cancel"
	EventDrainComplete    = "node.drain.complete"
	EventEligibility      = "node.eligibility"
	EventAllocStop        = "alloc.stop"
	EventAllocStart       = "alloc.start"
	EventServerDown       = "server.down"
	EventServerUp         = "server.up"
	EventLeader           = "server.leader"
	EventVarWrite         = "var.write"
	EventVarDelete        = "var.delete"
	EventLockAcquire      = "lock.acquire"
	EventLockRelease      = "lock.release"
	EventFault            = "fault"
	// EventStreamSilent: SetEventStreamSilent (details: silent).
	EventStreamSilent = "stream.silent"
	// EventSnapshotRestore: RestoreSnapshot.
	EventSnapshotRestore = "server.snapshot-restore"
)

// Event is one entry of the emulator's event log.
type Event struct {
	Seq     int               `json:"seq"`
	Time    time.Time         `json:"time"`
	Index   uint64            `json:"index"`
	Type    string            `json:"type"`
	Host    string            `json:"host,omitempty"`
	NodeID  string            `json:"node_id,omitempty"`
	Details map[string]string `json:"details,omitempty"`
}

func (s *Sim) eventLocked(e Event) {
	e.Seq = len(s.events) + 1
	e.Time = time.Now()
	e.Index = s.index
	s.events = append(s.events, e)
}

// Events returns the event log, optionally only entries after seq.
func (s *Sim) Events(afterSeq int) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if afterSeq < 0 {
		afterSeq = 0
	}
	if afterSeq >= len(s.events) {
		return nil
	}
	return append([]Event(nil), s.events[afterSeq:]...)
}

func (s *Sim) hostByNodeLocked(nodeID string) *Host {
	for _, h := range s.hosts {
		if h.NodeID == nodeID {
			return h
		}
	}
	return nil
}

func (s *Sim) sortedHostsLocked() []*Host {
	out := make([]*Host, 0, len(s.hosts))
	for _, n := range s.hostOrder {
		out = append(out, s.hosts[n])
	}
	return out
}

// startBackground starts the loops that make the cluster live: heartbeats and the
// drainer (nodes.go), the servers' autopilot (servers.go) and lock expiry
// (variables.go).
func (s *Sim) startBackground() {
	s.cluster.start(s)
	s.startServers()
	s.vars.start(s)
}
