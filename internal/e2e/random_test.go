package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simhost"
)

// TestRandomFaults runs whole rollouts with agents in-process (cheaper than child
// processes, so several runs fit) under random faults: API errors (500 and 429) on
// the node and variable endpoints, added latency, and agents (coordinator
// candidates among them) killed at random moments. The faults stop after a while;
// then every host must finish exactly one reboot, and the invariants must have held
// throughout. ROLLBOOT_FAULT_SEED=<n> replays one run.
func TestRandomFaults(t *testing.T) {
	skipInShort(t)
	seeds := []uint64{1, 2, 3, 4}
	if s := os.Getenv("ROLLBOOT_FAULT_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []uint64{n}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			randomRollout(t, seed)
		})
	}
}

func randomRollout(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed*7919))
	clients := 4 + rng.IntN(5)
	conc := 1 + rng.IntN(2)
	sim, err := nomadsim.New(nomadsim.Config{
		Clients: clients, ClientPools: []string{"a", "b"},
		HeartbeatTTL: 100 * time.Millisecond, BootTime: time.Duration(200+rng.IntN(400)) * time.Millisecond,
		MigrateTime: time.Duration(30+rng.IntN(100)) * time.Millisecond, Seed: seed,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	for _, j := range []nomadsim.JobSpec{
		{ID: "svc", Type: "service", Groups: []nomadsim.GroupSpec{{Name: "g", Count: clients, MigrateMaxParallel: 1 + rng.IntN(2)}}},
		{ID: "sys", Type: "system"},
		{ID: agentJob, Type: "system"},
	} {
		if err := sim.AddJob(j); err != nil {
			t.Fatal(err)
		}
	}
	policy := fmt.Sprintf(`
coordinator {
  rejoin_timeout = "60s"
}
drain {
  deadline = "30s"
  retry_backoff = "200ms"
}
group "a" {
  filter = "NodePool == \"a\""
  concurrency = %d
}
group "b" {
  filter = "NodePool == \"b\""
  concurrency = %d
}
`, conc, conc)
	// Every agent a coordinator candidate: no coordinator runs beside them.
	base, err := config.LoadBytes([]byte("coordinator {\n  enabled = true\n  lock_ttl = \"10s\"\n  resync_interval = \"100ms\"\n}\n"), "random.hcl")
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, sim: sim, st: storeFor(t, sim), client: apiClientFor(t, sim)}
	c.applyPolicy(policy)
	var hosts []string
	groups := map[string]string{}
	for _, h := range sim.Hosts() {
		if h.NodeID != "" {
			hosts = append(hosts, h.Name)
			n, _ := sim.Node(h.Name)
			groups[h.Name] = n.NodePool
		}
	}
	sup := &simhost.Supervisor{Sim: sim, Hosts: hosts, Job: agentJob, Start: func(ctx context.Context, h nomadsim.Host) {
		cfg := *base
		cfg.Nomad.Address = "http://" + h.Addr
		cfg.Agent.Host = h.Name
		cfg.Agent.BootIDFile = filepath.Join(h.Dir, "boot_id")
		cfg.Agent.ServerLockFile = filepath.Join(h.Dir, "server-lock.json")
		cfg.Agent.RecordFile = filepath.Join(h.Dir, "record.json")
		cfg.Agent.SentinelFile = filepath.Join(h.Dir, "reboot-required")
		_ = daemon.RunAgent(ctx, &cfg, daemon.AgentOptions{Rebooter: rebootFunc(func() error { return sim.Reboot(h.Name) })})
	}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); sup.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	rate := 0.05 + rng.Float64()*0.2
	for _, f := range []nomadsim.Fault{
		{PathPrefix: "/v1/node", ErrorRate: rate, Status: 500},
		{PathPrefix: "/v1/var", Method: "PUT", ErrorRate: rate, Status: 500},
		{PathPrefix: "/v1/vars", ErrorRate: rate / 2, Status: 429},
		{PathPrefix: "/v1/", Latency: time.Duration(rng.IntN(20)) * time.Millisecond},
	} {
		if err := sim.InjectFault(f); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d: %d clients, concurrency %d, error rate %.2f", seed, clients, conc, rate)
	for _, h := range hosts {
		if err := sim.SetRebootRequired(h, "random"); err != nil {
			t.Fatal(err)
		}
	}
	// Kill random agents (crashes, not reboots) while the faults last.
	faultsEnd := time.Now().Add(3 * time.Second)
	for time.Now().Before(faultsEnd) {
		wait(time.Duration(200+rng.IntN(600)) * time.Millisecond)
		sup.Kill(hosts[rng.IntN(len(hosts))], true)
	}
	sim.ClearFaults()

	c.sup = sup
	defer func() {
		if !t.Failed() {
			return
		}
		for h, p := range c.plans() {
			n, _ := sim.Node(h)
			hr, _ := c.st.Host(context.Background(), h)
			t.Logf("%s: phase %s waiting %q error %q boot(plan) %s boot(rec) %s node %s/%s", h, p.Phase, p.Waiting,
				p.LastError, p.BootIDAtGrant, hr.BootID, n.Status, n.SchedulingEligibility)
		}
	}()
	c.waitFor("every host rebooted after the faults ended", 120*time.Second, c.rebootedAll(hosts))
	conc2 := map[string]int{"a": conc, "b": conc}
	res := c.mustHold(invariants.Spec{Group: groups, Concurrency: conc2, EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
	t.Logf("peaks %v", res.Peak)
}

type rebootFunc func() error

func (f rebootFunc) Reboot(context.Context) error { return f() }

func wait(d time.Duration) {
	t := time.NewTimer(d)
	<-t.C
}
