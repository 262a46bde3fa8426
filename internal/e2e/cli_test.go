package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// cli runs the rollboot binary against the emulator's cluster address.
func (c *cluster) cli(args ...string) string {
	c.t.Helper()
	if len(args) > 0 && args[0] == "status" && !slices.Contains(args, "--json") {
		// One line per host: the tests look for a reason in it whole, which
		// the 100-column table may wrap.
		args = append(args, "--verbose")
	}
	args = append(args, "--address", c.sim.Address())
	out, stderr, err := c.runUntilState(args)
	if err != nil {
		c.t.Fatalf("rollboot %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

// emptyState is how the CLI refuses a prefix that holds no rollboot state.
const emptyState = "no rollboot state under prefix"

// runUntilState runs the CLI with the management token (when ACLs are on); a
// command run before any process stored anything is refused (emptyState): it
// is run again until the state appears (an agent publishes, a coordinator
// takes the lock), for up to 30 s. Only stdout is returned as out.
func (c *cluster) runUntilState(args []string) (out, stderr string, err error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		idx := c.sim.Index()
		var errb strings.Builder
		cmd := exec.Command(rollbootBin, args...)
		cmd.Stderr = &errb
		if tok := mgmtToken(c.sim); tok != "" {
			cmd.Env = append(os.Environ(), "NOMAD_TOKEN="+tok)
		}
		b, err := cmd.Output()
		if err == nil || !strings.Contains(errb.String(), emptyState) || time.Now().After(deadline) {
			return string(b), errb.String(), err
		}
		// The state appears with a write: wait for the emulator's index to move.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.sim.WaitIndex(ctx, idx)
		cancel()
	}
}

type statusJSON struct {
	Policy struct {
		Stored   int    `json:"stored_version"`
		Leader   string `json:"leader"`
		Enforced int    `json:"enforced_version"`
		Problem  string `json:"problem"`
	} `json:"policy"`
	Paused        bool `json:"paused"`
	MixedVersions []struct {
		Version string `json:"version"`
		Hosts   int    `json:"hosts"`
	} `json:"mixed_versions"`
	Hosts []struct {
		Host         string `json:"host"`
		AgentVersion string `json:"agent_version"`
		Phase        string `json:"phase"`
		Group        string `json:"group"`
		Waiting      string `json:"waiting"`
		LastError    string `json:"last_error"`
		HoldReason   string `json:"hold_reason"`
		Failure      *struct {
			Step       string `json:"step"`
			ExitStatus int    `json:"exit_status"`
			Message    string `json:"message"`
		} `json:"failure"`
	} `json:"hosts"`
	Unbacked []string `json:"unbacked_records"`
}

func (c *cluster) status() statusJSON {
	c.t.Helper()
	s, err := c.tryStatus()
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

// tryStatus runs `rollboot status -json`; it may be called from any goroutine.
func (c *cluster) tryStatus() (statusJSON, error) {
	var s statusJSON
	out, stderr, err := c.runUntilState([]string{"status", "--json", "--address", c.sim.Address()})
	if err != nil {
		return s, fmt.Errorf("status --json: %v\n%s%s", err, out, stderr)
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		return s, fmt.Errorf("status --json: %v\n%s", err, out)
	}
	return s, nil
}

// pause stops new drains (a reboot under way finishes); resume lets the rollout go on.
// A manual request through the CLI reboots a host with no sentinel. Each command
// acts at once with the production resync interval: the coordinator watches the
// control variable.
func TestPauseResumeAndManualRequest(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, resync: productionResync, policy: `group "all" {
  concurrency = 1
}`})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 3 })
	if out := c.cli("pause", "--reason", "change freeze"); !strings.Contains(out, "paused") {
		t.Errorf("pause said %q", out)
	}
	start := time.Now()
	c.cli("request", hosts[0], "--reason", "new kernel")
	c.within("request, while paused: pending and waiting on the pause", start, func() bool {
		for _, h := range c.status().Hosts {
			if h.Host == hosts[0] && h.Phase == store.PhasePending && strings.Contains(h.Waiting, "paused") {
				return true
			}
		}
		return false
	})
	table := c.cli("status")
	for _, want := range []string{"Rollout paused: change freeze", "Host", "Phase", hosts[0], "pending", "manual request: new kernel"} {
		if !strings.Contains(table, want) {
			t.Errorf("status table lacks %q:\n%s", want, table)
		}
	}
	for _, e := range c.sim.Events(0) {
		if e.Type == nomadsim.EventDrainStart {
			t.Fatalf("drain started while paused: %+v", e)
		}
	}
	start = time.Now()
	c.cli("resume")
	c.within("resume: drain start", start, func() bool { return c.drainStarted(hosts[0]) })
	c.waitFor("the requested host to reboot", 60*time.Second, c.rebootedAll(hosts[:1]))
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: map[string]int{hosts[0]: 1, hosts[1]: 0, hosts[2]: 0}})
	// The manual request is consumed: no second reboot.
	ctl, err := c.st.Control(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ctl.Requests[hosts[0]]; ok {
		t.Error("manual request still stored after its reboot")
	}
}

// A host that goes down for its reboot and does not come back is reported stuck
// with its slot kept; `rollboot release` undoes the drain and restores
// eligibility. (A host whose reboot command fails is not stuck: see the fault
// suite.)
func TestStuckHostReleased(t *testing.T) {
	t.Parallel()
	// A standalone coordinator: with the agents as candidates, the last one in
	// service would (rightly) not be drained while the other host is down.
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1, resync: productionResync, coordExtra: `  rejoin_timeout = "2s"`,
		policy: `group "all" {
  concurrency = 1
}`})
	c.start()
	hosts := c.clients()
	if err := c.sim.SetBootBlocked(hosts[0], true); err != nil {
		t.Fatal(err)
	}
	c.needReboot(hosts[0])
	c.waitFor("the host to be stuck", 60*time.Second, func() bool {
		return c.plans()[hosts[0]].Phase == store.PhaseStuck
	})
	// The slot stays taken: the other host of the group waits.
	c.needReboot(hosts[1])
	c.waitFor("the other host to wait for the slot", 30*time.Second, func() bool {
		p := c.plans()[hosts[1]]
		return p.Phase == store.PhasePending
	})
	n, _ := c.sim.Node(hosts[0])
	if n.SchedulingEligibility != "ineligible" {
		t.Fatalf("stuck node eligibility = %s; it should still be drained", n.SchedulingEligibility)
	}
	// The operator gives up on the host for now and frees the slot.
	start := time.Now()
	c.cli("release", hosts[0])
	c.within("release: the stuck host idle and eligible", start, func() bool {
		n, _ := c.sim.Node(hosts[0])
		return !c.plans()[hosts[0]].Active() && n.SchedulingEligibility == "eligible"
	})
	c.waitFor("a history record of the release", 10*time.Second, func() bool {
		for _, r := range c.history() {
			if r.Host == hosts[0] && r.Outcome == "released" {
				return true
			}
		}
		return false
	})
	// The freed slot goes to the other host, which reboots.
	c.waitFor("the other host rebooted", 60*time.Second, c.rebootedAll(hosts[1:]))
}

// drainStarted reports whether a drain of host's node has started.
func (c *cluster) drainStarted(host string) bool {
	h, _ := c.sim.Host(host)
	for _, e := range c.sim.Events(0) {
		if e.Type == nomadsim.EventDrainStart && e.NodeID == h.NodeID {
			return true
		}
	}
	return false
}

// startBrokenAgent runs an agent whose reboot command fails, under the supervisor's
// name for the host, until the test ends.
func (c *cluster) startBrokenAgent(host string) {
	h, _ := c.sim.Host(host)
	cfg := c.configFor(host, "http://"+h.Addr)
	// Replace the reboot command with one that fails.
	i := strings.Index(cfg, "command = [")
	j := strings.Index(cfg[i:], "]\n")
	cfg = cfg[:i] + `command = ["false"]` + cfg[i+j+1:]
	path := c.writeConfig(host+"-broken", cfg)
	cmd := exec.Command(rollbootBin, "agent", "--config", path)
	w := lockedWriter{&c.mu, c.logFor(host + "-broken")}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

// cancel withdraws a request before its drain: the host goes back to idle and is
// not rebooted, and status says its need is ignored; a need detected later is a
// new request, and so is a `rollboot request` made after the cancel.
func TestCancel(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, resync: productionResync})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 2 })
	c.cli("pause")
	start := time.Now()
	c.needReboot(hosts[0])
	c.within("sentinel: pending", start, func() bool { return c.plans()[hosts[0]].Phase == store.PhasePending })
	start = time.Now()
	if out := c.cli("cancel", hosts[0]); !strings.Contains(out, "No manual request of "+hosts[0]+" was made: its agent's current need, if any, is canceled") {
		t.Errorf("cancel said %q", out)
	}
	c.within("cancel: idle again", start, func() bool { return c.plans()[hosts[0]].Phase == store.PhaseIdle })
	if w := c.waitingOf(hosts[0]); !strings.Contains(w, "its need was canceled at") || !strings.Contains(w, "`rollboot request "+hosts[0]+"`") {
		t.Errorf("status of the canceled host says %q, want its need shown canceled and how to ask again", w)
	}
	// The other host: its need canceled, then asked for again by hand.
	c.needReboot(hosts[1])
	c.waitFor("the other host pending", 30*time.Second, func() bool { return c.plans()[hosts[1]].Phase == store.PhasePending })
	c.cli("cancel", hosts[1])
	c.waitFor("the other host idle", 30*time.Second, func() bool { return c.plans()[hosts[1]].Phase == store.PhaseIdle })
	c.cli("request", hosts[1], "--reason", "after all")
	c.cli("resume")
	// Resynced several times since: still idle, never drained.
	c.waitFor("the coordinator to see the resume", 30*time.Second, func() bool {
		return !c.status().Paused
	})
	c.waitFor("the request made after its cancel served", 60*time.Second, c.rebootedAll(hosts[1:]))
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if p := c.plans()[hosts[0]]; p.Phase != store.PhaseIdle {
			t.Fatalf("canceled host moved to %s", p.Phase)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		c.sim.WaitIndex(ctx, c.sim.Index())
		cancel()
	}
	h0, _ := c.sim.Host(hosts[0])
	for _, e := range c.sim.Events(0) {
		if e.Type == nomadsim.EventDrainStart && e.NodeID == h0.NodeID {
			t.Fatalf("drain after cancel: %+v", e)
		}
	}
	// A new need (the sentinel appears again after the cancel) is a new request.
	if err := c.sim.ClearRebootRequired(hosts[0]); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the agent to see the sentinel gone", 30*time.Second, func() bool {
		h, err := c.st.Host(t.Context(), hosts[0])
		return err == nil && !h.RebootRequired
	})
	c.needReboot(hosts[0])
	c.waitFor("the new request served", 60*time.Second, c.rebootedAll(hosts[:1]))
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: map[string]int{hosts[0]: 1, hosts[1]: 1}})
}
