package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// The trust suite: a host holding only the agent token writes records that lie
// (docs/architecture.md, "Trust"). Each attack is judged by its outcome, with the
// shipped ACL policies and minted tokens: the servers of one cluster are never
// two down at once, no node is rebooted without a drain, no slot is freed before
// its host went down, hosts that really need a reboot get one, and the
// coordinator's memory stays within its job's.

// slowReboot is a reboot command that returns at once and brings the host down
// after `after`, as `systemctl reboot` does on a real machine: the agent's final
// go/no-go has passed long before the host is gone.
func slowReboot(after time.Duration) []string {
	return []string{"/bin/sh", "-c", fmt.Sprintf(
		`(sleep %.1f; exec "$0" sim-ctl reboot --address "$1" "$2") >/dev/null 2>&1 &`, after.Seconds()),
		"{{bin}}", "{{sim}}", "{{host}}"}
}

// trustCluster is a cluster with ACLs on, the agents and one standalone
// coordinator running with minted tokens, and a client holding the agent
// token: the attacker.
func trustCluster(t *testing.T, o clusterOpts) (*cluster, *store.Store) {
	t.Helper()
	o.acl, o.coordinators = true, 1
	c := newCluster(t, o)
	tokens := mintTokens(t, c.client)
	c.opts.agentToken, c.opts.coordToken = tokens["rollboot-agent"], tokens["rollboot-coordinator"]
	c.opts.serverAgentToken = tokens["rollboot-agent-server"]
	c.start()
	ag, err := api.NewClient(&api.Config{Address: c.sim.Address(), SecretID: c.opts.agentToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ag.Close)
	c.waitFor("a coordinator leads", 30*time.Second, func() bool { return c.leader() != "" })
	return c, store.New(ag.Variables(), "rollboot", "")
}

// forge rewrites host's record with change, with the agent token, again and
// again until ctx ends: the host's own agent puts its record back each time,
// so the coordinator sees the forged and the true record in turn.
func forge(ctx context.Context, wg *sync.WaitGroup, st *store.Store, host string, change func(*store.HostRecord)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			// It rewrites the record the host's agent published (one made up
			// from nothing, with no boot ID, is left for another test).
			if rec, err := st.Host(ctx, host); err == nil && rec.BootID != "" {
				change(&rec)
				_, _ = st.PutHost(ctx, rec) // a conflict: the next round reads again
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
}

// Two Nomad server hosts whose records an attacker keeps rewriting without
// their roles and servers, in a group with room for both, with reboots that take
// seconds to bring a host down: the coordinator takes their servers from the
// clusters, and each server host's agent holds its cluster's reboot lock, so
// the two are never down at once.
func TestTrustForgedServerRecordsKeepQuorum(t *testing.T) {
	t.Parallel()
	c, ag := trustCluster(t, clusterOpts{servers: 3, clients: 1, autoUnseal: true,
		rebootCommand: slowReboot(2 * time.Second),
		policy: `group "clients" {
  filter = "NodePool == \"default\""
}
group "servers" {
  hosts_without_node = ["server-1", "server-2", "server-3"]
  concurrency = 2
}`, coordExtra: `  server_stable_for = "200ms"`})
	servers := c.serverHosts()
	victims := servers[:2]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, h := range victims {
		forge(ctx, &wg, ag, h, func(r *store.HostRecord) {
			r.Roles, r.Servers = nil, nil
			r.RebootRequired, r.Reason = true, "forged: no servers here"
			if r.RequestedAt.IsZero() {
				r.RequestedAt = time.Now().UTC()
			}
		})
	}
	c.needReboot(victims...)
	c.waitFor("both server hosts rebooted", 120*time.Second, c.rebootedAll(victims))
	cancel()
	wg.Wait()
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(c.clients()), Reboots: map[string]int{
		victims[0]: 1, victims[1]: 1, servers[2]: 0, c.clients()[0]: 0}})
	// (The coordinator token cannot move the Nomad leadership: only a
	// management token can, docs/deploy.md; a leader reboots as leader and its
	// cluster elects another, so checkServerReboots does not apply here.)
	assertNeverTwoDown(t, c, servers)
}

// assertNeverTwoDown checks from the emulator's events that no two of hosts
// were down (between their reboot and their boot) at once.
func assertNeverTwoDown(t *testing.T, c *cluster, hosts []string) {
	t.Helper()
	down := map[string]bool{}
	for _, e := range c.sim.Events(0) {
		switch e.Type {
		case nomadsim.EventHostRebootStart:
			for h, d := range down {
				if d && h != e.Host && contains(hosts, e.Host) && contains(hosts, h) {
					t.Errorf("event %d: %s went down while %s was still down", e.Seq, e.Host, h)
				}
			}
			down[e.Host] = true
		case nomadsim.EventHostBoot:
			down[e.Host] = false
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Records of hosts that do not exist, one per group and each asking for a
// reboot, stall nothing: they are left out before any view, metric or status
// line, and the real hosts of every group are rebooted.
func TestTrustGhostsStallNoGroup(t *testing.T) {
	t.Parallel()
	c, ag := trustCluster(t, clusterOpts{clients: 4, pools: []string{"a", "b"}, policy: `
group "a" {
  filter = "NodePool == \"a\""
}
group "b" {
  filter = "NodePool == \"b\""
}`})
	ctx := t.Context()
	for _, g := range []string{"a", "b", "default"} {
		ghost := store.HostRecord{Host: "ghost-" + g, Group: g, BootID: "ghost", RebootRequired: true,
			Reason: "forged", RequestedAt: time.Now().Add(-time.Hour).UTC(), Roles: []string{store.RoleNomadClient}}
		if _, err := ag.PutHost(ctx, ghost); err != nil {
			t.Fatalf("the agent token may write any host record, but: %v", err)
		}
	}
	hosts := c.clients()
	c.needReboot(hosts...)
	c.waitFor("every real host rebooted", 90*time.Second, c.rebootedAll(hosts))
	for name := range c.plans() {
		if strings.HasPrefix(name, "ghost-") {
			t.Errorf("the coordinator keeps a plan for %s", name)
		}
	}
	st := c.status()
	for _, h := range st.Hosts {
		if strings.HasPrefix(h.Host, "ghost-") {
			t.Errorf("status shows %s", h.Host)
		}
	}
	if len(st.Unbacked) != 3 {
		t.Errorf("status counts %d unbacked records, want 3", len(st.Unbacked))
	}
	// Each ghost is logged once, not once per pass.
	log := c.logText(c.leader())
	for _, g := range []string{"a", "b", "default"} {
		if n := strings.Count(log, "host=ghost-"+g+"\n"); n != 1 {
			t.Errorf("ghost-%s logged %d times, want once", g, n)
		}
	}
	c.mustHold(invariants.Spec{Group: c.groupsByPool(), Concurrency: map[string]int{"a": 1, "b": 1},
		EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
}

// A client's record rewritten without its node ID (or with another's), asking
// for a reboot: the record is refused, no grant is made without a drain, and no
// hook runs on the victim while its node is eligible.
func TestTrustRecordWithoutNodeIsRefused(t *testing.T) {
	t.Parallel()
	c, ag := trustCluster(t, clusterOpts{clients: 3, policy: `group "all" {
  concurrency = 2
}`, rebootExtra: `    pre_hooks = [["/bin/sh", "-c", "echo ran >> {{host_dir}}/hook-ran"]]`})
	hosts := c.clients()
	victim, other := hosts[0], hosts[1]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	otherNode := nodeIDOf(t, c, other)
	forge(ctx, &wg, ag, victim, func(r *store.HostRecord) {
		r.NodeID, r.RebootRequired, r.Reason = "", true, "forged: no node"
		if r.RequestedAt.IsZero() {
			r.RequestedAt = time.Now().UTC()
		}
	})
	c.waitFor("the forged record reported", 30*time.Second, func() bool {
		return strings.Contains(c.logText(c.leader()), "names no node_id, but the host has Nomad node")
	})
	// Meanwhile a real need elsewhere goes through as usual.
	c.needReboot(hosts[2])
	c.waitFor(hosts[2]+" rebooted", 60*time.Second, c.rebootedAll([]string{hosts[2]}))
	// Another node's ID, now.
	cancel()
	wg.Wait()
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	forge(ctx, &wg, ag, victim, func(r *store.HostRecord) {
		r.NodeID, r.RebootRequired, r.Reason = otherNode, true, "forged: another node"
	})
	time.Sleep(2 * time.Second) // the attack runs for a while: nothing may happen
	cancel()
	wg.Wait()
	h, _ := c.sim.Host(victim)
	if _, err := os.Stat(filepath.Join(h.Dir, "hook-ran")); err == nil {
		t.Errorf("a pre-reboot hook ran on %s", victim)
	}
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: map[string]int{victim: 0, other: 0, hosts[2]: 1}})
}

// A record for a name that is no host claims the current Nomad leader's raft
// ID: the coordinator hands no leadership over, and grants nothing to it.
func TestTrustForgedRaftIDMovesNoLeader(t *testing.T) {
	t.Parallel()
	c, ag := trustCluster(t, clusterOpts{servers: 3, clients: 1, autoUnseal: true})
	leader := nomadLeader(t, c)
	ghost := store.HostRecord{Host: "ghost-leader", BootID: "ghost", RebootRequired: true, Reason: "forged",
		RequestedAt: time.Now().Add(-time.Hour).UTC(), Roles: []string{store.RoleNomadServer},
		Servers: []store.Server{{Product: "nomad", Cluster: "global", ID: leader}}}
	if _, err := ag.PutHost(t.Context(), ghost); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the ghost left out", 30*time.Second, func() bool {
		return strings.Contains(c.logText(c.leader()), "host=ghost-leader")
	})
	// A real client's reboot meanwhile: passes run and decide.
	client := c.clients()[0]
	c.needReboot(client)
	c.waitFor(client+" rebooted", 60*time.Second, c.rebootedAll([]string{client}))
	for _, e := range c.sim.Events(0) {
		if e.Type == nomadsim.EventLeader && e.Details["previous"] == leader {
			t.Errorf("leadership moved: %+v", e)
		}
	}
	if now := nomadLeader(t, c); now != leader {
		t.Errorf("the Nomad leader changed from %s to %s", leader, now)
	}
	if _, ok := c.plans()["ghost-leader"]; ok {
		t.Error("the coordinator keeps a plan for the ghost")
	}
}

// A new boot ID forged while the host is still shutting down: the slot is not
// freed, nor eligibility restored, before the host actually went down.
func TestTrustForgedBootIDFreesNoSlotEarly(t *testing.T) {
	t.Parallel()
	c, ag := trustCluster(t, clusterOpts{clients: 2, policy: `group "all" {
  concurrency = 1
}`, rebootCommand: slowReboot(3 * time.Second)})
	hosts := c.clients()
	victim := hosts[0]
	c.needReboot(victim)
	c.waitFor(victim+" rebooting", 60*time.Second, func() bool { return c.plans()[victim].Phase == store.PhaseRebooting })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	forge(ctx, &wg, ag, victim, func(r *store.HostRecord) { r.BootID = "forged-" + strconv.Itoa(os.Getpid()) })
	c.waitFor(victim+" rebooted", 60*time.Second, c.rebootedAll([]string{victim}))
	cancel()
	wg.Wait()
	// From the emulator's log: the node's eligibility came back only after the
	// host went down.
	wentDown := 0
	for _, e := range c.sim.Events(0) {
		if e.Host == victim && e.Type == nomadsim.EventHostRebootStart && wentDown == 0 {
			wentDown = e.Seq
		}
		if e.Type == nomadsim.EventEligibility && e.Details["eligibility"] == "eligible" && nodeHost(c, e) == victim &&
			(wentDown == 0 || e.Seq < wentDown) {
			t.Errorf("event %d: %s made eligible before it went down (event %d)", e.Seq, victim, wentDown)
		}
	}
	if wentDown == 0 {
		t.Fatalf("%s never went down", victim)
	}
	c.mustHold(invariants.Spec{Group: map[string]string{hosts[0]: "all", hosts[1]: "all"}, Concurrency: map[string]int{"all": 1},
		EligibleBefore: allTrue(hosts), Reboots: map[string]int{victim: 1, hosts[1]: 0}})
}

func nodeHost(c *cluster, e nomadsim.Event) string {
	if e.Host != "" {
		return e.Host
	}
	for _, h := range c.sim.Hosts() {
		if h.NodeID != "" && h.NodeID == e.NodeID {
			return h.Name
		}
	}
	return ""
}

// 2,000 forged records for names that are no hosts: the coordinator leaves them
// out, stays within its job's memory (deploy/nomad/rollboot-coordinator.nomad.hcl,
// memory = 128), exports no series for them, and still reboots a real host.
func TestTrustForgedRecordsFloodStaysWithinMemory(t *testing.T) {
	t.Parallel()
	c, ag := trustCluster(t, clusterOpts{clients: 2, coordOnly: `telemetry {
  listen = "127.0.0.1:0"
}`})
	ctx := t.Context()
	const n = 2000
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				rec := store.HostRecord{Host: fmt.Sprintf("forged-%04d", i), BootID: "x", RebootRequired: true,
					Reason: strings.Repeat("x", 200), RequestedAt: time.Now().UTC(), Roles: []string{store.RoleNomadClient}}
				if _, err := ag.PutHost(ctx, rec); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("forge: %v", err)
	}
	client := c.clients()[0]
	c.needReboot(client)
	c.waitFor(client+" rebooted", 90*time.Second, c.rebootedAll([]string{client}))
	c.waitFor("every forged record counted", 30*time.Second, func() bool {
		return strings.Count(c.logText(c.leader()), "host record left out") >= n
	})
	peak := peakRSS(t, c, c.leader())
	t.Logf("coordinator peak RSS with %d forged records: %.1f MB", n, float64(peak)/(1<<20))
	if peak > 128<<20 {
		t.Errorf("coordinator peak RSS %d MB, over its job's memory of 128 MB", peak>>20)
	}
	if len(c.plans()) > 2 {
		t.Errorf("%d plans: the forged hosts got plans", len(c.plans()))
	}
}

// peakRSS is a coordinator process's peak resident set (VmHWM).
func peakRSS(t *testing.T, c *cluster, name string) int64 {
	t.Helper()
	c.mu.Lock()
	cmd := c.coords[name]
	c.mu.Unlock()
	if cmd == nil {
		t.Fatalf("no coordinator %q", name)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// nomadLeader is the raft ID of the Nomad leader, as autopilot reports it.
func nomadLeader(t *testing.T, c *cluster) string {
	t.Helper()
	h, _, err := c.client.Operator().AutopilotServerHealth(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range h.Servers {
		if s.Leader {
			return s.ID
		}
	}
	t.Fatal("no Nomad leader")
	return ""
}

// A host the operator listed without a node that never comes back keeps no
// slot (abandoned, with a history record); once it is gone for good,
// `rollboot forget` with the operator token deletes its record, and the
// coordinator its plan: it leaves status. Forgetting a host whose node is up is
// refused.
func TestTrustForgetAndAbandon(t *testing.T) {
	t.Parallel()
	c, ag := trustCluster(t, clusterOpts{clients: 1, policy: `group "storage" {
  filter = "NodePool == \"none\""
  hosts_without_node = ["nas-1"]
}`, coordExtra: `  rejoin_timeout = "2s"`})
	ctx := t.Context()
	nas := store.HostRecord{Host: "nas-1", BootID: "nas-boot", RebootRequired: true, Reason: "kernel",
		RequestedAt: time.Now().UTC(), Roles: []string{"storage"}}
	if _, err := ag.PutHost(ctx, nas); err != nil {
		t.Fatal(err)
	}
	// Nothing reboots nas-1 (it has no agent here): its grant times out and its
	// slot is freed instead of held stuck.
	stuck := false
	c.waitFor("nas-1 abandoned", 60*time.Second, func() bool {
		stuck = stuck || c.plans()["nas-1"].Phase == store.PhaseStuck
		for _, h := range c.history() {
			if h.Host == "nas-1" && h.Outcome == "abandoned" {
				return true
			}
		}
		return false
	})
	if stuck {
		t.Error("nas-1 was held stuck, keeping its group's slot")
	}
	// Its need gone, its next attempt ends the same way and it goes idle.
	nas, err := ag.Host(ctx, "nas-1")
	if err != nil {
		t.Fatal(err)
	}
	nas.RebootRequired = false
	if _, err := ag.PutHost(ctx, nas); err != nil {
		t.Fatal(err)
	}
	c.waitFor("nas-1 idle", 60*time.Second, func() bool { return c.plans()["nas-1"].Phase == store.PhaseIdle })
	tokens := mintTokens(t, c.client)
	out, err := c.cliAs(tokens["rollboot-operator"], "forget", c.clients()[0])
	if err == nil || !strings.Contains(out, "still has Nomad node") {
		t.Errorf("forget of a host whose node is up: %v\n%s", err, out)
	}
	out, err = c.cliAs(tokens["rollboot-operator"], "forget", "nas-1")
	if err != nil {
		t.Fatalf("forget nas-1: %v\n%s", err, out)
	}
	if _, err := c.st.Host(ctx, "nas-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("nas-1's record after forget: %v", err)
	}
	c.waitFor("nas-1's plan deleted", 30*time.Second, func() bool {
		_, ok := c.plans()["nas-1"]
		return !ok
	})
	for _, h := range c.status().Hosts {
		if h.Host == "nas-1" {
			t.Error("status still shows nas-1")
		}
	}
}

// A need written into another host's record (any agent token can) makes no
// host reboot: the coordinator, which cannot tell it from a real one, grants
// and drains, but the host's own agent sees no need of its own and refuses the
// grant, which is undone (eligibility back) and backs off.
func TestTrustForgedNeedRebootsNobody(t *testing.T) {
	t.Parallel()
	c, ag := trustCluster(t, clusterOpts{clients: 2, policy: `group "all" {
  concurrency = 1
}`})
	hosts := c.clients()
	victim := hosts[0]
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	forge(ctx, &wg, ag, victim, func(r *store.HostRecord) {
		r.RebootRequired, r.Reason = true, "forged need"
		if r.RequestedAt.IsZero() {
			r.RequestedAt = time.Now().UTC()
		}
	})
	c.waitFor("the grant refused by the victim's agent", 60*time.Second, func() bool {
		for _, h := range c.history() {
			if h.Host == victim && h.Outcome == "failed" && strings.Contains(h.Error, "does not see") {
				return true
			}
		}
		return false
	})
	cancel()
	wg.Wait()
	c.waitFor(victim+" eligible and idle again", 60*time.Second, func() bool {
		n, err := c.sim.Node(victim)
		p := c.plans()[victim]
		return err == nil && n.SchedulingEligibility == api.NodeSchedulingEligible && n.DrainStrategy == nil &&
			(p.Phase == store.PhaseIdle || p.Phase == store.PhaseBackoff)
	})
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: map[string]int{victim: 0, hosts[1]: 0}})
}
