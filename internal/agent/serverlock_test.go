package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/discovery"
	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simhost"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

func TestServerLockPath(t *testing.T) {
	tests := []struct {
		name, product, cluster, want string
	}{
		{"a Nomad region", "nomad", "global", "rollboot/serverlock/nomad-global"},
		{"dots, as the store stores host names", "vault", "vault.example.com", "rollboot/serverlock/vault-vault~example~com"},
		{"anything else Nomad refuses in a path", "consul", "dc 1/a", "rollboot/serverlock/consul-dc~1~a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := serverLockPath("rollboot", tt.product, tt.cluster); got != tt.want {
				t.Errorf("serverLockPath = %q, want %q", got, tt.want)
			}
		})
	}
}

// Every host takes its clusters' locks in one order, whatever the order of its
// servers: two hosts never wait for each other.
func TestLockClustersInPathOrder(t *testing.T) {
	servers := []store.Server{{Product: "vault", Cluster: "v", ID: "3"}, {Product: "consul", Cluster: "dc1", ID: "2"},
		{Product: "nomad", Cluster: "global", ID: "1"}}
	var got []string
	for _, s := range lockClusters("rollboot", servers) {
		got = append(got, s.Product)
	}
	if want := []string{"consul", "nomad", "vault"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// nomadProbe is a host's discovery of its Nomad server.
type nomadProbe struct{ srv store.Server }

func (p nomadProbe) Discover(context.Context, discovery.NomadSelf) ([]string, []store.Server, error) {
	return []string{store.RoleNomadServer}, []store.Server{p.srv}, nil
}
func (nomadProbe) VaultSealed(context.Context) (bool, error)             { return false, nil }
func (nomadProbe) ConsulMaintenance(context.Context, bool, string) error { return nil }

// nomadCluster reads the Nomad cluster's health through the host's agent.
type nomadCluster struct{ op health.NomadAutopilot }

func (c nomadCluster) Read(ctx context.Context, _, cluster string) health.ClusterHealth {
	return health.ReadNomad(ctx, c.op, cluster)
}

// slowRebooter is a reboot whose host goes down only after shutdown, as a host
// stopping its services does: the reboot command returns at once and the
// host's servers run on meanwhile.
type slowRebooter struct {
	sim      *nomadsim.Sim
	host     string
	shutdown time.Duration
	wg       *sync.WaitGroup
}

func (r slowRebooter) Reboot(context.Context) error {
	r.wg.Go(func() {
		<-time.After(r.shutdown)
		_ = r.sim.Reboot(r.host)
	})
	return nil
}

// serverEnv runs an agent on each of two server hosts of a three-server Nomad
// cluster, as the hosts run them: each dies with its host and starts again at
// boot. Their lock files stay across the reboots.
type serverEnv struct {
	sim   *nomadsim.Sim
	st    *store.Store
	hosts []nomadsim.Host
	files map[string]string // lock file by host
	ttl   time.Duration
	log   *syncbuf.Buffer
	// rebooter replaces slowRebooter when set.
	rebooter Rebooter
}

func newServerEnv(t *testing.T, ttl time.Duration) *serverEnv {
	t.Helper()
	sim, err := nomadsim.New(nomadsim.Config{Servers: 3, AllowShortLockTTL: true, BootTime: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	c, err := api.NewClient(&api.Config{Address: sim.Address()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	e := &serverEnv{sim: sim, st: store.New(c.Variables(), "rollboot", ""), hosts: sim.Hosts()[:2],
		files: map[string]string{}, ttl: ttl, log: &syncbuf.Buffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agents' logs:\n%s", e.log.String())
		}
	})
	dir := t.TempDir()
	for _, h := range e.hosts {
		e.files[h.Name] = filepath.Join(dir, h.Name, "server-lock.json")
	}
	return e
}

// start runs the agents until the test ends. Each host has an idle plan
// first, as the coordinator stores for a host it first sees (phase stepIdle):
// an agent whose host has no plan waits after a write of another plan near
// its own (watchPlan).
func (e *serverEnv) start(t *testing.T) {
	t.Helper()
	for _, h := range e.hosts {
		if _, err := e.st.PutPlan(context.Background(), store.Plan{Host: h.Name, Phase: store.PhaseIdle}); err != nil {
			t.Fatal(err)
		}
	}
	var reboots sync.WaitGroup
	sup := &simhost.Supervisor{Sim: e.sim, Hosts: []string{e.hosts[0].Name, e.hosts[1].Name},
		Start: func(ctx context.Context, h nomadsim.Host) {
			c, err := api.NewClient(&api.Config{Address: "http://" + h.Addr})
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			_ = New(e.options(h, c, &reboots)).Run(ctx)
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sup.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done; reboots.Wait() })
}

func (e *serverEnv) options(h nomadsim.Host, c *api.Client, reboots *sync.WaitGroup) Options {
	var reb Rebooter = slowRebooter{sim: e.sim, host: h.Name, shutdown: time.Second, wg: reboots}
	if e.rebooter != nil {
		reb = e.rebooter
	}
	return Options{Host: h.Name, Store: store.New(c.Variables(), "rollboot", ""), Local: c.Agent(), NodeList: c.Nodes(),
		BootIDFile: filepath.Join(h.Dir, nomadsim.BootIDFile),
		Servers:    nomadProbe{store.Server{Product: "nomad", Cluster: "global", ID: h.Server.ID}},
		Clusters:   nomadCluster{c.Operator()}, ServerLocks: c.Variables(), ServerLockFile: e.files[h.Name],
		ServerLockTTL: e.ttl, ServerStableFor: 100 * time.Millisecond,
		Rebooter:  reb,
		PollEvery: 20 * time.Millisecond, RecheckEvery: 50 * time.Millisecond, RetryAfter: 100 * time.Millisecond,
		DownTimeout: time.Minute,
		Log:         slog.New(slog.NewTextHandler(e.log, nil)).With("agent", h.Name)}
}

// grantBoth grants both hosts a reboot at once, as admission fed a forged record
// might: plans drained for their current boots.
func (e *serverEnv) grantBoth(t *testing.T) {
	t.Helper()
	e.grant(t, e.hosts...)
}

// grant grants hosts a reboot: plans drained for their current boots. It
// waits for every host's record first, then writes the plans one right after
// the other, so that granted together the hosts check their go/no-go together:
// a host granted once another's server went down would be held by the quorum
// gate before it reached the other's lock.
func (e *serverEnv) grant(t *testing.T, hosts ...nomadsim.Host) {
	t.Helper()
	ctx := context.Background()
	plans := make([]store.Plan, len(hosts))
	for i, h := range hosts {
		rec := waitRecord(t, e.st, h.Name, "the agent's record", func(r store.HostRecord) bool { return len(r.Servers) == 1 })
		at, err := e.st.Plan(ctx, h.Name)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		plans[i] = store.Plan{Host: h.Name, Phase: store.PhaseDrained, ManualRequest: true,
			GrantID: "g-" + h.Name, BootIDAtGrant: rec.BootID, ModifyIndex: at.ModifyIndex}
	}
	for _, p := range plans {
		if _, err := e.st.PutPlan(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
}

// waitLockHold waits until one host holds its reboot for the other's lock, and
// returns the holder of the lock (the host that goes first). Both hosts going
// down first fails the test.
func (e *serverEnv) waitLockHold(t *testing.T) nomadsim.Host {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if down := e.wentDown(); len(down) == len(e.hosts) {
			t.Fatalf("both servers went down, neither holding for the other's lock: %v", down)
		}
		for i, h := range e.hosts {
			rec, err := e.st.Host(context.Background(), h.Name)
			if err != nil || !strings.Contains(rec.HoldReason, " held by ") {
				continue
			}
			first := e.hosts[1-i]
			want := fmt.Sprintf(`server lock of nomad "global" held by %s (grant g-%s)`, first.Name, first.Name)
			if rec.HoldReason != want {
				t.Fatalf("hold reason %q, want %q", rec.HoldReason, want)
			}
			return first
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		e.sim.WaitIndex(ctx, e.sim.Index())
		cancel()
	}
	t.Fatal("no host held its reboot for the other's lock")
	return nomadsim.Host{}
}

// wentDown lists the hosts that went down for a reboot so far, in order.
func (e *serverEnv) wentDown() []string {
	var down []string
	for _, ev := range e.sim.Events(0) {
		if ev.Type == nomadsim.EventHostRebootStart && !slices.Contains(down, ev.Host) {
			down = append(down, ev.Host)
		}
	}
	return down
}

// waitEvent waits for the first event after seq that matches, and returns it.
func (e *serverEnv) waitEvent(t *testing.T, what string, match func(nomadsim.Event) bool) nomadsim.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var found nomadsim.Event
	err := e.sim.WaitFor(ctx, func(v *nomadsim.View) bool {
		for _, ev := range v.Events() {
			if match(ev) {
				found = ev
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return found
}

func isEvent(typ, host string) func(nomadsim.Event) bool {
	return func(ev nomadsim.Event) bool { return ev.Type == typ && ev.Host == host }
}

// checkSecondReboot: the second host went down only after the first was back,
// with its cluster healthy and able to lose a server.
func (e *serverEnv) checkSecondReboot(t *testing.T, first, second string) nomadsim.Event {
	t.Helper()
	down := e.waitEvent(t, second+" going down", isEvent(nomadsim.EventHostRebootStart, second))
	back := e.waitEvent(t, first+" back", isEvent(nomadsim.EventHostBoot, first))
	ft, _ := strconv.Atoi(down.Details["nomad_failure_tolerance"])
	if back.Seq > down.Seq || down.Details["nomad_healthy"] != "true" || ft < 1 {
		t.Fatalf("%s went down (event %d: %v) before %s was back (event %d) or with its cluster unable to lose it",
			second, down.Seq, down.Details, first, back.Seq)
	}
	return down
}

// voterAt reports whether host's Nomad server was a voter at event seq, as
// autopilot's changes to the Raft configuration tell.
func voterAt(events []nomadsim.Event, host string, seq int) bool {
	voter := true
	for _, ev := range events {
		if ev.Seq >= seq || ev.Host != host || ev.Details["product"] != "nomad" {
			continue
		}
		switch ev.Type {
		case nomadsim.EventServerRemoved, nomadsim.EventServerRejoined:
			voter = false
		case nomadsim.EventServerPromoted:
			voter = true
		}
	}
	return voter
}

// waitNoLockFile waits for host's lock file to be removed: its locks released.
func (e *serverEnv) waitNoLockFile(t *testing.T, host string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for exists(t, e.files[host]) {
		if time.Now().After(deadline) {
			t.Fatalf("%s's lock file is still there", host)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		e.sim.WaitIndex(ctx, e.sim.Index())
		cancel()
	}
}

// Two servers of one cluster granted at once (admission fooled) never are down
// together: the one that takes the cluster's lock reboots, slowly (its server
// runs on while the host shuts down, so the other's quorum gate still passes),
// and the other holds, saying who holds the lock, until the first is back, its
// cluster healthy and the lock released; then it reboots in turn and releases
// the lock once back.
func TestServerLockKeepsTwoServersApart(t *testing.T) {
	e := newServerEnv(t, 2*time.Second)
	e.start(t)
	e.grantBoth(t)
	first := e.waitLockHold(t)
	second := e.hosts[0]
	if second.Name == first.Name {
		second = e.hosts[1]
	}
	down := e.checkSecondReboot(t, first.Name, second.Name)
	released := e.waitEvent(t, "the first lock released", func(ev nomadsim.Event) bool {
		return ev.Type == nomadsim.EventLockRelease && ev.Details["reason"] == "released"
	})
	if released.Seq > down.Seq {
		t.Fatalf("%s went down before %s released the lock", second.Name, first.Name)
	}
	if !voterAt(e.sim.Events(0), first.Name, released.Seq) {
		t.Fatalf("%s released the lock before its server was a voter again", first.Name)
	}
	e.waitEvent(t, second.Name+" back", isEvent(nomadsim.EventHostBoot, second.Name))
	for _, h := range e.hosts {
		e.waitNoLockFile(t, h.Name)
	}
	for _, ev := range e.sim.Events(0) {
		if ev.Type == nomadsim.EventLockRelease && ev.Details["reason"] != "released" {
			t.Errorf("a server lock was not released by its holder: %+v", ev)
		}
	}
}

// A lock file lost while its host is down (a disk replaced, a wiped /var/lib)
// leaves the lock to its TTL: the agent back does not release it, Nomad frees it
// 2×TTL plus its lock delay after the last renewal, and only then does the other
// server reboot.
func TestLostServerLockFileExpiresByTTL(t *testing.T) {
	e := newServerEnv(t, 500*time.Millisecond)
	for _, h := range e.hosts {
		if err := e.sim.SetBootBlocked(h.Name, true); err != nil {
			t.Fatal(err)
		}
	}
	e.start(t)
	e.grantBoth(t)
	first := e.waitLockHold(t)
	second := e.hosts[0]
	if second.Name == first.Name {
		second = e.hosts[1]
	}
	e.waitEvent(t, first.Name+" going down", isEvent(nomadsim.EventHostRebootStart, first.Name))
	if err := os.Remove(e.files[first.Name]); err != nil {
		t.Fatal(err)
	}
	for _, h := range e.hosts {
		if err := e.sim.SetBootBlocked(h.Name, false); err != nil {
			t.Fatal(err)
		}
	}
	down := e.checkSecondReboot(t, first.Name, second.Name)
	expired := e.waitEvent(t, "the lock to expire", func(ev nomadsim.Event) bool {
		return ev.Type == nomadsim.EventLockRelease && ev.Details["reason"] == "expired"
	})
	if expired.Seq > down.Seq {
		t.Fatalf("%s went down (event %d) before the lost lock expired (event %d)", second.Name, down.Seq, expired.Seq)
	}
	for _, ev := range e.sim.Events(0)[:expired.Seq-1] {
		if ev.Type == nomadsim.EventLockRelease {
			t.Fatalf("the lock was released before it expired, without its file: %+v", ev)
		}
	}
}

// An attempt that ends without a reboot (the reboot command failed) gives its
// cluster's lock back once its server passes the post-reboot gate, and the
// failure is reported as usual.
func TestFailedRebootReleasesTheServerLock(t *testing.T) {
	e := newServerEnv(t, 2*time.Second)
	e.rebooter = &flakyRebooter{ch: make(chan struct{}, 1)}
	e.start(t)
	h := e.hosts[0]
	e.grant(t, h)
	rec := waitRecord(t, e.st, h.Name, "the failure", func(r store.HostRecord) bool { return r.Failure != nil })
	if rec.Failure.Step != store.StepReboot {
		t.Fatalf("failure %+v", rec.Failure)
	}
	e.waitEvent(t, "the lock taken", func(ev nomadsim.Event) bool { return ev.Type == nomadsim.EventLockAcquire })
	e.waitEvent(t, "the lock released", func(ev nomadsim.Event) bool {
		return ev.Type == nomadsim.EventLockRelease && ev.Details["reason"] == "released"
	})
	e.waitNoLockFile(t, h.Name)
}
