package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/discovery"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/storedpolicy"
)

type rebootFunc func() error

func (f rebootFunc) Reboot(context.Context) error { return f() }

// Agents with a coordinator candidate beside each, wired from one compiled
// configuration, reboot a host of a configured group: a candidate is elected,
// drains the node, and that host's agent calls its rebooter. Each RunAgent then
// stops with every goroutine it started (TestMain checks for leaks).
func TestRunAgentReboots(t *testing.T) {
	for _, meta := range []bool{true, false} {
		t.Run(fmt.Sprintf("node_meta %t", meta), func(t *testing.T) { runAgentReboots(t, meta) })
	}
}

// runAgentReboots: with coordinator.node_meta, the leader publishes the
// drained host's phase on its node; without, nothing.
func runAgentReboots(t *testing.T, nodeMeta bool) {
	sim, err := nomadsim.New(nomadsim.Config{Clients: 2, ClientPools: []string{"web"},
		HeartbeatTTL: 150 * time.Millisecond, BootTime: 300 * time.Millisecond, MigrateTime: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	var hosts []nomadsim.Host
	for _, h := range sim.Hosts() {
		if h.NodeID != "" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) != 2 {
		t.Fatalf("%d clients", len(hosts))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The group is the stored policy's, applied as `rollboot policy apply` does.
	c, err := api.NewClient(&api.Config{Address: sim.Address()})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(c.Variables(), "rollboot", "")
	ch, err := storedpolicy.Prepare(ctx, st, c.Nodes(), []byte("group \"web\" {\n  filter = \"NodePool == \\\"web\\\"\"\n}\n"), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if len(ch.Moves) != 2 || ch.Moves[0].To != "web" {
		t.Errorf("moves = %+v, want both hosts to web", ch.Moves)
	}
	if _, err := ch.Apply(ctx, st, "test", time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	rebooted := make(chan string, len(hosts))
	errs := make(chan error, len(hosts))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, h := range hosts {
		// With a candidate beside each agent, the last candidate in service is
		// never drained: two agents, so that one host may go.
		cc := compile(t, fmt.Sprintf(`
nomad { address = "http://%s" }
agent {
  host = %q
  boot_id_file = %q
  sentinel_file = %q
  record_file = %q
}
coordinator {
  enabled = true
  lock_ttl = "10s"
  resync_interval = "200ms"
  agent_job = ""
  node_meta = %t
}
`, h.Addr, h.Name, filepath.Join(h.Dir, "boot_id"), filepath.Join(h.Dir, "reboot-required"), filepath.Join(h.Dir, "record.json"), nodeMeta))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- RunAgent(ctx, cc, AgentOptions{
				Log:      slog.New(slog.DiscardHandler),
				Rebooter: rebootFunc(func() error { rebooted <- h.Name; return nil }),
				Local:    &discovery.Local{},
				Clusters: &Clusters{},
			})
		}()
	}
	target := hosts[0].Name
	if err := sim.SetRebootRequired(target, "kernel update"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-rebooted:
		if got != target {
			t.Fatalf("%s rebooted, want %s", got, target)
		}
	case err := <-errs:
		t.Fatalf("RunAgent stopped before the reboot: %v", err)
	case <-ctx.Done():
		t.Fatal("no reboot within 30s")
	}
	n, err := sim.Node(target)
	if err != nil {
		t.Fatal(err)
	}
	if n.SchedulingEligibility != "ineligible" || n.LastDrain == nil || n.LastDrain.Meta["drained_by"] != "rollboot" {
		t.Errorf("the node was not drained by rollboot before the reboot: %s, last drain %+v", n.SchedulingEligibility, n.LastDrain)
	}
	// The node stays ready (the test's rebooter does not reboot it): with
	// node_meta, its phase is published within seconds; without, it never is.
	phase := func() string {
		n, err := sim.Node(target)
		if err != nil {
			t.Fatal(err)
		}
		return n.Meta["rollboot_phase"]
	}
	deadline := time.Now().Add(10 * time.Second)
	if !nodeMeta {
		deadline = time.Now().Add(2 * time.Second)
	}
	for phase() == "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := phase(); (got != "") != nodeMeta {
		t.Errorf("node_meta %t: rollboot_phase %q on the node", nodeMeta, got)
	}
	cancel()
	for range hosts {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("RunAgent: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("RunAgent did not stop")
		}
	}
}

// An agent that cannot build its local clients stops at start, and its
// coordinator candidate never runs (it used to start first and outlive the
// error until ctx ended: TestMain would find its goroutines).
func TestRunAgentLocalClientsError(t *testing.T) {
	t.Setenv("VAULT_CACERT", filepath.Join(t.TempDir(), "missing-ca.pem"))
	cc := compile(t, "nomad { address = \"http://127.0.0.1:1\" }\nagent { host = \"web-1\" }\ncoordinator { enabled = true }")
	err := RunAgent(context.Background(), cc, AgentOptions{Rebooter: rebootFunc(func() error { return nil })})
	if err == nil || !strings.Contains(err.Error(), "vault client") {
		t.Fatalf("RunAgent = %v, want the vault client's error", err)
	}
}

// An agent on a client of a Nomad too old stops at start, with an error that
// names the version its node lists.
func TestRunAgentRefusesAnOldClient(t *testing.T) {
	sim, err := nomadsim.New(nomadsim.Config{Clients: 1, NomadVersion: "1.6.5"})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	var h nomadsim.Host
	for _, x := range sim.Hosts() {
		if x.NodeID != "" {
			h = x
		}
	}
	cc := compile(t, fmt.Sprintf("nomad { address = \"http://%s\" }\nagent {\n  host = %q\n  boot_id_file = %q\n  record_file = %q\n}\n",
		h.Addr, h.Name, filepath.Join(h.Dir, "boot_id"), filepath.Join(h.Dir, "record.json")))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = RunAgent(ctx, cc, AgentOptions{Log: slog.New(slog.DiscardHandler), Local: &discovery.Local{},
		Rebooter: rebootFunc(func() error { return nil })})
	want := "nomad 1.6.5 (the client version of node " + h.Name + ") is too old"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("RunAgent = %v, want %q", err, want)
	}
}
