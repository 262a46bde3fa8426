package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/discovery"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simhost"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/storedpolicy"
	"github.com/rollboot/rollboot/internal/watch"
)

// Nomad variable writes per rebooted host stay at most 10 and do not grow with
// the group: every host of one group (concurrency 1) needs a reboot, and the
// writes are counted until the first rebooted hosts are back. A host that waits
// writes its need to its record and is planned pending (two writes of its own,
// for its own reboot later); any write to it beyond those is a cost of the
// others' hand-offs, charged to the rebooted hosts. Before waiting reasons were
// kept out of the plans, each hand-off rewrote the plan of every waiting host
// (and each step of a cycle wrote its plan twice): 17 writes per rebooted host
// with 5 hosts, 31 with 50.
func TestWritesPerRebootedHostIndependentOfGroupSize(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two rollouts")
	}
	const rebooted = 3
	small := writesPerRebootedHost(t, 5, rebooted)
	large := writesPerRebootedHost(t, 50, rebooted)
	t.Logf("writes per rebooted host: %.1f with 5 hosts in the group, %.1f with 50", small, large)
	if small > 10 || large > 10 {
		t.Errorf("writes per rebooted host %.1f (5 hosts) and %.1f (50 hosts), want at most 10", small, large)
	}
	if large > small+1 {
		t.Errorf("writes per rebooted host grow with the group: %.1f with 5 hosts, %.1f with 50", small, large)
	}
}

// writesPerRebootedHost runs agents (each with a coordinator candidate) on
// hosts clients of one group, makes every host need a reboot, and returns the
// variable writes per rebooted host once n hosts have rebooted and are idle.
func writesPerRebootedHost(t *testing.T, hosts, n int) float64 {
	t.Helper()
	sim, err := nomadsim.New(nomadsim.Config{Clients: hosts, ClientPools: []string{"web"},
		HeartbeatTTL: 150 * time.Millisecond, BootTime: 300 * time.Millisecond, MigrateTime: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	// The group is the stored policy's, applied as `rollboot policy apply` does.
	pc, err := api.NewClient(&api.Config{Address: sim.Address()})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	pst := store.New(pc.Variables(), "rollboot", "")
	ch, err := storedpolicy.Prepare(ctx, pst, pc.Nodes(), []byte("group \"web\" {\n  filter = \"NodePool == \\\"web\\\"\"\n}\n"), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Apply(ctx, pst, "test", time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	sup := &simhost.Supervisor{Sim: sim, Start: func(ctx context.Context, h nomadsim.Host) {
		cc := compile(t, fmt.Sprintf(`
nomad { address = "http://%s" }
agent {
  host = %q
  boot_id_file = %q
  sentinel_file = %q
  record_file = %q
  reboot { delay = "0s" }
}
coordinator {
  enabled = true
  lock_ttl = "10s"
  resync_interval = "250ms"
  agent_job = ""
}
`, h.Addr, h.Name, filepath.Join(h.Dir, "boot_id"), filepath.Join(h.Dir, "reboot-required"), filepath.Join(h.Dir, "record.json")))
		_ = RunAgent(ctx, cc, AgentOptions{
			Log:      slog.New(slog.DiscardHandler),
			Rebooter: rebootFunc(func() error { return sim.Reboot(h.Name) }),
			Local:    &discovery.Local{},
			Clusters: &Clusters{},
		})
	}}
	for _, h := range sim.Hosts() {
		if h.NodeID != "" {
			sup.Hosts = append(sup.Hosts, h.Name)
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); sup.Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Every agent has published its record, and the coordinator has stored
	// what it creates once in a cluster's life: each host's first plan, the
	// control variable and the requests' marker (store/absent.go).
	if err := sim.WaitFor(ctx, func(v *nomadsim.View) bool {
		return len(varWrites(v, "rollboot/hosts/")) >= hosts && len(varWrites(v, "rollboot/plan/")) >= hosts &&
			len(varWrites(v, "rollboot/control")) >= 1 && len(varWrites(v, "rollboot/requests/")) >= 1
	}); err != nil {
		t.Fatalf("agents did not publish, or the coordinator did not plan them: %v", err)
	}
	start := 0
	_ = sim.WaitFor(ctx, func(v *nomadsim.View) bool { start = len(v.Events()); return true })
	for _, h := range sup.Hosts {
		if err := sim.SetRebootRequired(h, "kernel update"); err != nil {
			t.Fatal(err)
		}
	}
	// n hosts rebooted, and their plans written idle after it.
	client, err := api.NewClient(&api.Config{Address: sim.Address()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	st := store.New(client.Variables(), "rollboot", "")
	var booted []string
	for {
		if err := sim.WaitFor(ctx, func(v *nomadsim.View) bool {
			booted = booted[:0]
			for _, e := range v.Events()[start:] {
				if e.Type == nomadsim.EventHostBoot {
					booted = append(booted, e.Host)
				}
			}
			return len(booted) >= n
		}); err != nil {
			t.Fatalf("%d hosts did not reboot: %v", n, err)
		}
		idle := 0
		for _, h := range booted[:n] {
			if p, err := st.Plan(ctx, h); err == nil && p.Phase == store.PhaseIdle {
				idle++
			}
		}
		if idle == n {
			break
		}
		if !watch.Sleep(ctx, 50*time.Millisecond) {
			t.Fatalf("the %d hosts that rebooted did not become idle", n)
		}
	}
	writes := map[string]int{}
	_ = sim.WaitFor(ctx, func(v *nomadsim.View) bool {
		booted = booted[:0]
		for _, e := range v.Events()[start:] {
			switch e.Type {
			case nomadsim.EventHostBoot:
				booted = append(booted, e.Host)
			case nomadsim.EventVarWrite:
				writes[e.Details["path"]]++
			}
		}
		return true
	})
	out := map[string]bool{}
	for _, h := range booted {
		out[h] = true
	}
	// Hosts granted and not back yet are left out: their cycle is half counted.
	inFlight := map[string]bool{}
	for _, h := range sup.Hosts {
		if p, err := st.Plan(ctx, h); err == nil && !out[h] && p.Phase != store.PhasePending {
			inFlight[h] = true
		}
	}
	total := 0
	for path, k := range writes {
		host := path[strings.LastIndex(path, "/")+1:]
		switch {
		// The leader lock and the coordinator's enforcement record are written once
		// per leadership term (and on a policy change), not per host; a shard of
		// the copies for a new leader once its stale entries add up, which the
		// burst of every host's need here does at once: in a rollout it comes to
		// 0.1 per rebooted host (docs/performance.md, the copies).
		case path == "rollboot/leader" || path == "rollboot/coordinator" || strings.HasPrefix(path, "rollboot/copies/") || inFlight[host]:
		case !out[host] && (strings.HasPrefix(path, "rollboot/hosts/") || strings.HasPrefix(path, "rollboot/plan/")):
			total += max(0, k-1) // its need, or its pending plan: its own
		default:
			total += k
		}
	}
	return float64(total) / float64(len(booted))
}

// varWrites lists the paths of variable writes under prefix.
func varWrites(v *nomadsim.View, prefix string) []string {
	var out []string
	for _, e := range v.Events() {
		if e.Type == nomadsim.EventVarWrite && strings.HasPrefix(e.Details["path"], prefix) {
			out = append(out, e.Details["path"])
		}
	}
	return out
}
