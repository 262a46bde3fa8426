package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/api"
	vaultapi "github.com/hashicorp/vault/api"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/discovery"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simhost"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/storedpolicy"
)

// Scaled timings of the emulated machines: one second of the bench stands for
// timeScale seconds of a real cluster, the scale of the emulator's defaults
// (its 200ms heartbeat TTL for Nomad's 10s). Every timing of the machines and
// of Nomad's heartbeats is on that one scale, so that they race as they do on
// a real cluster: a reboot outlasts the heartbeat TTL, the node is marked down,
// and it is ready again at its first heartbeat after the boot. Nomad's own
// protocol (blocking queries, locks, drains) is unchanged, and so is rollboot:
// its own costs (a pass, a write) are not scaled, so they weigh timeScale
// times more against a cycle than on a real cluster.
const (
	timeScale = 50
	bootTime  = time.Minute / timeScale // a real host: 1-5 minutes; the shortest
	// heartbeatGrace: nomad/config.go HeartbeatGrace, 10s.
	heartbeatGrace = 10 * time.Second / timeScale
	// initialStagger: the longest wait of a client that booted before its
	// first heartbeat (client/client.go initialHeartbeatStagger, 10s).
	initialStagger = 10 * time.Second / timeScale
	migrateTime    = 50 * time.Millisecond // one allocation stopping and its replacement starting (2.5s)
	// eventBufferSize: Nomad's event buffer holds event_buffer_size items
	// (100), a count; how long a subscriber may lag before it is cut off is
	// that count over the rate of writes, which the scale makes timeScale
	// times higher. The subscriber's own delays (a pass holding the node
	// list, the CPU) are not scaled, so with 100 items the coordinator's
	// stream was cut off in every 1,000-host rollout, after a lag 50 times
	// shorter than a real cluster allows it, and it followed the nodes one
	// by one for 30 s each time. The buffer is scaled with the writes. The
	// emulator's buffer holds node events alone, Nomad's every topic's
	// (nomadsim/eventstream.go), so a real cluster's margin is smaller than
	// either figure says: the bench reports each cut-off (Rollout.StreamDropped).
	eventBufferSize = 100 * timeScale
)

// heartbeatTTL is the TTL Nomad's servers hand out to the clients of a
// cluster of that many nodes: MinHeartbeatTTL (10s), or more once the nodes
// would heartbeat more than MaxHeartbeatsPerSecond (50) times a second
// (nomad/heartbeat.go resetHeartbeatTimerLocked, lib.RateScaledInterval), scaled.
func heartbeatTTL(nodes int) time.Duration {
	const maxHeartbeatsPerSecond = 50
	ttl := max(10*time.Second, time.Duration(nodes)*time.Second/maxHeartbeatsPerSecond)
	return ttl / timeScale
}

// cluster is an emulated cluster with one rollboot agent per client host, and
// the bench's own view of it.
type cluster struct {
	sim     *nomadsim.Sim
	hosts   []nomadsim.Host // the clients, in order
	groupOf map[string]string
	cfg     *config.Compiled
	policy  string       // the local configuration file cfg was compiled from
	st      *store.Store // the bench's own reads, counted apart (own)
	api     *api.Client  // the same, for what the store does not offer
	own     *countingTransport
	log     *slog.Logger

	stop func() // stops the agents and the coordinator, then the emulator
}

// clusterSpec is what a cluster runs.
type clusterSpec struct {
	hosts, groups, concurrency int
	// candidates: every agent stands in the coordinator election (the one-job
	// deployment) with the production timings; otherwise one coordinator runs
	// beside agents that do not stand, with the scaled timings.
	candidates bool
	agents     bool // run the agents (false: the records are written by the bench)
	log        *slog.Logger
	requestLog io.Writer // nomadsim Config.RequestLog (nil: none)
}

func groupName(i int) string { return fmt.Sprintf("g%02d", i+1) }

// localHCL is the local configuration every process of the cluster runs with.
func localHCL(spec clusterSpec) []byte {
	var b strings.Builder
	b.WriteString("state {\n  prefix = \"rollboot\"\n}\nagent {\n  reboot {\n    delay = \"0s\"\n  }\n}\n")
	if spec.candidates {
		// Production timings: only what an operator writes in a one-job deployment.
		b.WriteString("coordinator {\n  enabled = true\n  agent_job = \"\"\n}\n")
	} else {
		b.WriteString(`coordinator {
  enabled         = false
  agent_job       = ""
  lock_ttl        = "10s"
  resync_interval = "1s"
}
`)
	}
	return []byte(b.String())
}

// policyHCL is the rollout policy the bench stores, as `rollboot policy apply`
// does, before the agents start.
func policyHCL(spec clusterSpec) []byte {
	var b strings.Builder
	// Every cycle's history is kept: the figures are computed from it.
	history := max(200, spec.hosts)
	if spec.candidates {
		fmt.Fprintf(&b, "coordinator {\n  history_size = %d\n}\n", history)
	} else {
		fmt.Fprintf(&b, `coordinator {
  history_size    = %d
  rejoin_timeout  = "60s"
}
drain {
  deadline          = "120s"
  on_timeout        = "abort"
  retry_backoff     = "1s"
  retry_max_backoff = "10s"
}
`, history)
	}
	for i := 0; i < spec.groups; i++ {
		fmt.Fprintf(&b, "group %q {\n  filter      = \"NodePool == \\\"%s\\\"\"\n  concurrency = %d\n}\n",
			groupName(i), groupName(i), spec.concurrency)
	}
	return []byte(b.String())
}

// storePolicy stores the bench's policy in the emulated cluster.
func storePolicy(ctx context.Context, sim *nomadsim.Sim, src []byte) error {
	client, err := api.NewClient(&api.Config{Address: sim.Address()})
	if err != nil {
		return err
	}
	defer client.Close()
	st := store.New(client.Variables(), "rollboot", "")
	ch, err := storedpolicy.Prepare(ctx, st, client.Nodes(), src, "bench-policy.hcl")
	if err != nil {
		return fmt.Errorf("bench policy: %w", err)
	}
	if _, err := ch.Apply(ctx, st, "rollboot bench", time.Now(), nil); err != nil {
		return fmt.Errorf("store the bench policy: %w", err)
	}
	return nil
}

// startCluster starts the emulator and, when spec.agents, one agent per client
// host (in this process, as goroutines: each with its own Nomad client talking
// to its host's own listener, and dying with its host at a reboot).
func startCluster(ctx context.Context, spec clusterSpec) (*cluster, error) {
	local := localHCL(spec)
	cfg, err := config.LoadBytes(local, "bench.hcl")
	if err != nil {
		return nil, fmt.Errorf("bench configuration: %w", err)
	}
	pools := make([]string, spec.groups)
	for i := range pools {
		pools[i] = groupName(i)
	}
	sim, err := nomadsim.New(nomadsim.Config{
		Servers:                 1,
		Clients:                 spec.hosts,
		ClientPools:             pools,
		HeartbeatTTL:            heartbeatTTL(spec.hosts),
		HeartbeatGrace:          heartbeatGrace,
		InitialHeartbeatStagger: initialStagger,
		BootTime:                bootTime,
		MigrateTime:             migrateTime,
		EventBufferSize:         eventBufferSize,
		RequestLog:              spec.requestLog,
		Seed:                    13,
		UnencryptedHTTP2:        true, // agentTransport
	})
	if err != nil {
		return nil, err
	}
	if err := storePolicy(ctx, sim, policyHCL(spec)); err != nil {
		sim.Close()
		return nil, err
	}
	// One service job per group, one allocation per four hosts: every drain
	// migrates something, as on a real cluster.
	for _, p := range pools {
		count := max(1, spec.hosts/spec.groups/4)
		job := nomadsim.JobSpec{ID: "svc-" + p, Type: "service", NodePool: p,
			Groups: []nomadsim.GroupSpec{{Name: "app", Count: count, MigrateMaxParallel: max(1, spec.concurrency)}}}
		if err := sim.AddJob(job); err != nil {
			sim.Close()
			return nil, fmt.Errorf("job %s: %w", job.ID, err)
		}
	}
	c := &cluster{sim: sim, cfg: cfg, policy: string(local), groupOf: map[string]string{}, log: spec.log, own: &countingTransport{base: http.DefaultTransport}}
	for _, h := range sim.Hosts() {
		if h.NodeID == "" {
			continue
		}
		n, err := sim.Node(h.Name)
		if err != nil {
			sim.Close()
			return nil, err
		}
		c.hosts = append(c.hosts, h)
		c.groupOf[h.Name] = n.NodePool
	}
	own, err := api.NewClient(&api.Config{Address: sim.Address(), HttpClient: &http.Client{Transport: c.own}})
	if err != nil {
		sim.Close()
		return nil, err
	}
	c.st = store.New(own.Variables(), cfg.State.Prefix, "")
	c.api = own

	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if spec.agents {
		sup := &simhost.Supervisor{Sim: sim, Start: c.runAgent}
		for _, h := range c.hosts {
			sup.Hosts = append(sup.Hosts, h.Name)
		}
		wg.Add(1)
		go func() { defer wg.Done(); sup.Run(runCtx) }()
	}
	c.stop = func() {
		cancel()
		wg.Wait()
		sim.Close()
	}
	return c, nil
}

// runAgent runs one host's agent for one boot.
func (c *cluster) runAgent(ctx context.Context, h nomadsim.Host) {
	cfg := *c.cfg
	cfg.Nomad.Address = "http://" + h.Addr
	cfg.Agent.Host = h.Name
	cfg.Agent.BootIDFile = filepath.Join(h.Dir, "boot_id")
	cfg.Agent.BootTimeFile = filepath.Join(h.Dir, nomadsim.StatFile)
	cfg.Agent.ServerLockFile = filepath.Join(h.Dir, "server-lock.json")
	cfg.Agent.RecordFile = filepath.Join(h.Dir, "record.json")
	cfg.Agent.SentinelFile = filepath.Join(h.Dir, "reboot-required")
	cfg.Agent.DetectorRoot = h.Dir // the emulated host's files, not the machine's
	clusters, err := c.clusters()
	if err != nil {
		c.log.Error("agent", "host", h.Name, "err", err)
		return
	}
	tr, closeConns := agentTransport()
	// The process dies with the boot, its connections with it: they would
	// otherwise stay open until they time out, one more per rebooted host.
	defer closeConns()
	err = daemon.RunAgent(ctx, &cfg, daemon.AgentOptions{
		Log:            c.log.With("sim_host", h.Name),
		Rebooter:       simRebooter{sim: c.sim, host: h.Name},
		Local:          &discovery.Local{Hostname: h.Name},
		Clusters:       clusters,
		NomadTransport: tr,
	})
	if err != nil && ctx.Err() == nil {
		c.log.Error("agent stopped", "host", h.Name, "err", err)
	}
}

// agentTransport is the transport of one in-process agent's Nomad client:
// HTTP/2 without TLS, which the emulator's listeners accept in the bench
// (nomadsim.Config.UnencryptedHTTP2), so that all of an agent's requests
// share one connection. Over HTTP/1.1 each request in flight holds its own:
// an agent's plan watch and record watch block at all times, and another
// request beside them opens a third, each connection two open files in this
// process (both its ends), about 7 files per host with the host's listener,
// 35,000 at 5,000 hosts, over the 20,000 a machine commonly allows. With one
// connection it is 3 per host. The requests and their round trips are the
// same; what differs is HTTP/2's framing, as cheap per request as HTTP/1.1's.
// closeConns closes every connection it opened, as the death of the agent's
// process does.
func agentTransport() (tr *http.Transport, closeConns func()) {
	tr = http.DefaultTransport.(*http.Transport).Clone()
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetUnencryptedHTTP2(true)
	var (
		mu     sync.Mutex
		conns  []net.Conn
		closed bool
	)
	dial := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if closed {
			conn.Close()
			return nil, net.ErrClosed
		}
		conns = append(conns, conn)
		return conn, nil
	}
	return tr, func() {
		mu.Lock()
		defer mu.Unlock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
	}
}

// runCoordinator runs the one coordinator (a candidate of its own, not beside
// an agent) until ctx ends, with its metrics on reg.
func (c *cluster) runCoordinator(ctx context.Context, reg *prometheus.Registry) error {
	cfg := *c.cfg
	cfg.Nomad.Address = c.sim.Address()
	client, err := daemon.Client(&cfg)
	if err != nil {
		return err
	}
	clusters, err := c.clusters()
	if err != nil {
		return err
	}
	return daemon.RunCoordinator(ctx, &cfg, client, c.log, clusters, reg)
}

// clusters are the coordinator's clients of the server clusters. The bench's
// cluster runs no Consul or Vault and reboots no server host, so only the
// Nomad client is ever asked.
func (c *cluster) clusters() (*daemon.Clusters, error) {
	n, err := api.NewClient(&api.Config{Address: c.sim.Address()})
	if err != nil {
		return nil, err
	}
	cc := consulapi.DefaultConfig()
	cc.Address = "127.0.0.1:1"
	con, err := consulapi.NewClient(cc)
	if err != nil {
		return nil, err
	}
	vc := vaultapi.DefaultConfig()
	vc.Address = "http://127.0.0.1:1"
	v, err := vaultapi.NewClient(vc)
	if err != nil {
		return nil, err
	}
	return &daemon.Clusters{Nomad: n, Consul: con, Vault: v}, nil
}

// waitRecords waits until every client host's agent has written its record.
func (c *cluster) waitRecords(ctx context.Context, timeout time.Duration) error {
	return c.waitRecordsN(ctx, len(c.hosts), timeout)
}

// waitRecordsN waits until n host records exist.
func (c *cluster) waitRecordsN(ctx context.Context, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var idx uint64
	for {
		recs, next, err := c.st.Hosts(ctx, idx, 5*time.Second)
		if err == nil && len(recs) >= n {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%d of %d agents wrote their host record within %s", len(recs), n, timeout)
		}
		if err != nil {
			idx = 0
			time.Sleep(100 * time.Millisecond)
			continue
		}
		idx = next
	}
}

// simRebooter reboots a simulated host: its processes die, its node misses
// heartbeats, and it comes back with a new boot ID.
type simRebooter struct {
	sim  *nomadsim.Sim
	host string
}

func (r simRebooter) Reboot(context.Context) error { return r.sim.Reboot(r.host) }

// countingTransport counts the requests the bench itself sends, so that they can
// be told apart from rollboot's in the emulator's figures.
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Uint64
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.base.RoundTrip(r)
}
