package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

type checksJSON struct {
	Hosts []struct {
		Host          string `json:"host"`
		Phase         string `json:"phase"`
		AgentMissing  string `json:"agent_missing"`
		RecordIgnored string `json:"record_ignored"`
	} `json:"hosts"`
	Ignored []store.BadRecord `json:"ignored_records"`
}

func (c *cluster) checks() checksJSON {
	c.t.Helper()
	var s checksJSON
	out := c.cli("status", "--json")
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		c.t.Fatalf("status --json: %v\n%s", err, out)
	}
	return s
}

// TestAgentMissingIsReported: an agent killed without its host rebooting (the
// sentinel created meanwhile) is reported missing by status and the coordinator
// within seconds, and its host is not drained while nobody could reboot it.
func TestAgentMissingIsReported(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 1})
	c.start()
	hosts := c.clients()
	victim := hosts[1]
	c.waitFor("agents to publish", 60*time.Second, func() bool { return len(c.checks().Hosts) == 3 })
	for _, h := range c.checks().Hosts {
		if h.AgentMissing != "" {
			t.Fatalf("%s reported missing while its agent runs: %s", h.Host, h.AgentMissing)
		}
	}

	// The agent's process dies; Nomad's client restarts it only after its restart
	// delay, so its allocation is pending meanwhile.
	c.sup.Kill(victim, false)
	if err := c.sim.SetTaskRunning(victim, agentJob, false); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	c.needReboot(victim)
	missing := ""
	c.waitFor("status to report the agent missing", 60*time.Second, func() bool {
		for _, h := range c.checks().Hosts {
			if h.Host == victim {
				missing = h.AgentMissing
			}
		}
		return missing != ""
	})
	t.Logf("status reported %s missing %s after its agent died: %s", victim, time.Since(killed).Round(10*time.Millisecond), missing)
	if !strings.Contains(missing, "pending") {
		t.Errorf("agent_missing = %q, want the allocation's state", missing)
	}
	table := c.cli("status")
	if !strings.Contains(table, "agent missing") {
		t.Errorf("status table does not say the agent is missing:\n%s", table)
	}
	c.waitFor("the coordinator to log it", 60*time.Second, func() bool {
		return strings.Contains(c.logText("coordinator-1"), "agent missing")
	})

	// Back: the report clears.
	c.sup.Restart(victim)
	if err := c.sim.SetTaskRunning(victim, agentJob, true); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the report to clear", 60*time.Second, func() bool {
		for _, h := range c.checks().Hosts {
			if h.Host == victim {
				return h.AgentMissing == ""
			}
		}
		return false
	})
}

// TestShadowingRecordIsIgnored: a record written under another host's name that
// names client-1's node (and asks for a reboot) is ignored and reported; client-1
// is never drained for it, and the owner's agent restores its record.
func TestShadowingRecordIsIgnored(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 1, policy: `group "all" {
  concurrency = 3
}`})
	c.start()
	hosts := c.clients()
	target, owner := hosts[0], hosts[1]
	c.waitFor("agents to publish", 60*time.Second, func() bool { return len(c.checks().Hosts) == 3 })
	ctx := context.Background()
	n1, err := c.sim.Node(target)
	if err != nil {
		t.Fatal(err)
	}
	// Stop the owner's agent first, so the forged record stays long enough to be
	// seen by the coordinator and by status.
	c.sup.Kill(owner, false)
	rec, err := c.st.Host(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	forged := rec
	forged.NodeID, forged.RebootRequired, forged.Reason, forged.RequestedAt = n1.ID, true, "forged", time.Now().UTC()
	if _, err := c.st.PutHost(ctx, forged); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the coordinator to ignore the record", 60*time.Second, func() bool {
		return strings.Contains(c.logText("coordinator-1"), "host record ignored")
	})
	s := c.checks()
	found := false
	for _, b := range s.Ignored {
		found = found || (b.Host == owner && strings.Contains(b.Err, target))
	}
	if !found {
		t.Errorf("status does not report the shadowing record: %+v", s.Ignored)
	}
	// Several reconcile passes later, client-1's node was never drained.
	deadline := time.Now().Add(3 * time.Second)
	c.waitFor("a few reconcile passes", 10*time.Second, func() bool { return time.Now().After(deadline) })
	for _, e := range c.sim.Events(0) {
		if e.Type == nomadsim.EventDrainStart {
			t.Fatalf("a drain started for a forged record: %+v", e)
		}
	}
	if p := c.plans()[owner]; p.Phase != "" && p.Phase != store.PhaseIdle {
		t.Errorf("the forged need was acted on: %s is %s", owner, p.Phase)
	}
	// The owner's agent comes back and restores its own record.
	c.sup.Restart(owner)
	c.waitFor("the owner's agent to restore its record", 60*time.Second, func() bool {
		r, err := c.st.Host(ctx, owner)
		return err == nil && r.NodeID == rec.NodeID && !r.RebootRequired
	})
}

// TestNoAgentMissingDuringRollout: a rolling reboot takes every agent down in
// turn (its allocation is lost with the node, placed again once the node is
// eligible); none of that is a missing agent.
func TestNoAgentMissingDuringRollout(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 1})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 60*time.Second, func() bool { return len(c.checks().Hosts) == 3 })
	c.needReboot(hosts...)
	c.waitFor("every host to reboot", 120*time.Second, c.rebootedAll(hosts))
	if log := c.logText("coordinator-1"); strings.Contains(log, "agent missing") {
		i := strings.Index(log, "agent missing")
		t.Errorf("a rollout reported a missing agent: %s", log[max(0, i-200):min(len(log), i+300)])
	}
}

// TestBadVariablesDoNotStopTheFleet: a host record that does not decode and a
// control variable with unreadable entries (and a request an older version left
// in it) are reported by status; the readable request is still carried out, and
// `rollboot control reset` repairs the control state.
func TestBadVariablesDoNotStopTheFleet(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 1})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 60*time.Second, func() bool { return len(c.checks().Hosts) == 3 })
	vars := c.client.Variables()
	if _, _, err := vars.Create(&api.Variable{Path: "rollboot/hosts/ghost",
		Items: map[string]string{"host": "ghost", "reboot_required": "maybe"}}, nil); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Format(time.RFC3339Nano)
	if _, _, err := vars.Create(&api.Variable{Path: "rollboot/control", Items: map[string]string{
		"paused":   "false",
		"requests": `{"` + hosts[0] + `":{"at":"` + at + `","by":"old-version"},"` + hosts[1] + `":{"at":"soon"}}`,
	}}, nil); err != nil {
		t.Fatal(err)
	}
	out := c.cli("status")
	for _, want := range []string{"Ignored host records:", "ghost", "Unreadable control entries", `"soon"`} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	// The readable old request is honoured: that host reboots, the others do not.
	c.waitFor(hosts[0]+" to reboot for the old request", 120*time.Second, c.rebootedAll(hosts[:1]))
	for _, r := range c.history() {
		if r.Host != hosts[0] {
			t.Errorf("%s rebooted: %+v", r.Host, r)
		}
	}
	c.waitFor("the request to be removed once carried out", 30*time.Second, func() bool {
		ctl, err := c.st.Control(context.Background())
		return err == nil && len(ctl.Requests) == 0
	})
	if out := c.cli("control", "reset"); !strings.Contains(out, "Dropped:") || !strings.Contains(out, "repaired") {
		t.Errorf("control reset said:\n%s", out)
	}
	if s := c.cli("status"); strings.Contains(s, "Unreadable control entries") {
		t.Errorf("control problems left after reset:\n%s", s)
	}
	if !strings.Contains(c.logText("coordinator-1"), "host record ignored") {
		t.Error("the coordinator did not log the bad record")
	}
}
