package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

type planJSON struct {
	Groups []struct {
		Name      string `json:"name"`
		Durations struct {
			Samples int    `json:"samples"`
			Source  string `json:"source"`
		} `json:"durations"`
		Hosts []struct {
			Host     string    `json:"host"`
			Position int       `json:"position"`
			Starts   bool      `json:"starts"`
			WaitKind string    `json:"wait_kind"`
			Reason   string    `json:"reason"`
			Start    time.Time `json:"start"`
			Finish   time.Time `json:"finish"`
		} `json:"hosts"`
	} `json:"groups"`
	Finish time.Time `json:"finish"`
}

type planReportJSON struct {
	Plan  planJSON `json:"plan"`
	After planJSON `json:"candidate_plan"`
	Diff  struct {
		Changes []struct {
			Host       string    `json:"host"`
			StartAfter time.Time `json:"start_after"`
		} `json:"changes"`
	} `json:"diff"`
}

// `rollboot plan` shows each group's queue as the coordinator would serve it:
// the host that starts now, the one behind it held by the group's concurrency,
// and the hosts of a group whose window is closed, with estimates from the
// durations recorded in history. It writes nothing, and the coordinator then
// does what it said. With -policy it shows how a candidate policy changes it.
func TestPlanPreviewsWithoutWriting(t *testing.T) {
	t.Parallel()
	opens := time.Now().UTC().Add(3 * time.Hour)
	// A group with no windows listed gets every window: web names one always open.
	window := fmt.Sprintf(`window "always" {
  start = "00:00"
  end = "24:00"
  time_zone = "UTC"
}
window "later" {
  start = %q
  end = %q
  time_zone = "UTC"
}`, opens.Format("15:04"), opens.Add(time.Hour).Format("15:04"))
	policy := func(webConcurrency int) string {
		return fmt.Sprintf(`drain {
  deadline = "20s"
}
group "web" {
  filter = "NodePool == \"web\""
  concurrency = %d
  windows = ["always"]
}
group "batch" {
  filter = "NodePool == \"batch\""
  concurrency = 1
  windows = ["later"]
}
%s`, webConcurrency, window)
	}
	c := newCluster(t, clusterOpts{clients: 6, pools: []string{"web", "batch"}, coordinators: 1, policy: policy(1)})
	c.start()
	var web, batch []string
	for _, h := range c.clients() {
		if c.groupsByPool()[h] == "web" {
			web = append(web, h)
		} else {
			batch = append(batch, h)
		}
	}
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == 6 })

	// One cycle of web in the history, for the estimates.
	c.needReboot(web[0])
	c.waitFor("the first web host to reboot", 60*time.Second, c.rebootedAll(web[:1]))
	// With no coordinator running, the needs below stay as the agents publish them.
	c.mu.Lock()
	c.killed["coordinator-1"] = true
	cmd := c.coords["coordinator-1"]
	c.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM) // releases the lock for coordinator-2
	pid := cmd.Process.Pid
	c.waitFor("coordinator-1 to stop", 30*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })

	c.needReboot(web[1], web[2], batch[0], batch[1])
	c.waitFor("the agents to publish their needs", 30*time.Second, func() bool {
		recs, _, err := c.st.Hosts(t.Context(), 0, 0)
		n := 0
		for _, r := range recs {
			if r.RebootRequired {
				n++
			}
		}
		return err == nil && n == 4
	})

	cfg := c.writeConfig("plan", c.configFor("", c.sim.Address()))
	cand := c.writeConfig("candidate", policy(2)) // a policy file, as `rollboot policy apply` takes
	seq := len(c.sim.Events(0))
	vars := varIndexes(t, c)
	before := time.Now()
	var r planReportJSON
	if err := json.Unmarshal([]byte(c.cli("plan", "--config", cfg, "--json", "--policy", cand)), &r); err != nil {
		t.Fatal(err)
	}
	text := c.cli("plan", "--config", cfg)
	for _, e := range c.sim.Events(seq) {
		switch e.Type {
		case nomadsim.EventVarWrite, nomadsim.EventVarDelete, nomadsim.EventDrainStart, nomadsim.EventEligibility:
			t.Errorf("rollboot plan changed the cluster: %+v", e)
		}
	}
	// No variable changed: the index of each is what it was (the emulator's
	// own index also moves with the cluster's life, a late allocation or a
	// node's status, so it says nothing of rollboot plan).
	if got := varIndexes(t, c); !maps.Equal(got, vars) {
		t.Errorf("variables changed while rollboot plan ran: before %v, after %v", vars, got)
	}

	groups := map[string]int{}
	for i, g := range r.Plan.Groups {
		groups[g.Name] = i
	}
	wg := r.Plan.Groups[groups["web"]]
	if wg.Durations.Source != "group" || wg.Durations.Samples != 1 {
		t.Errorf("web's durations: %+v, want the median of its one cycle in history", wg.Durations)
	}
	if len(wg.Hosts) != 2 || !wg.Hosts[0].Starts || wg.Hosts[1].Starts || wg.Hosts[1].WaitKind != "queued" ||
		!strings.Contains(wg.Hosts[1].Reason, `waiting for a slot in group "web"`) || !wg.Hosts[1].Start.Equal(wg.Hosts[0].Finish) {
		t.Errorf("web's queue: %+v, want the first starting now and the second behind it, held by concurrency", wg.Hosts)
	}
	bg := r.Plan.Groups[groups["batch"]]
	for _, h := range bg.Hosts {
		if h.Starts || !strings.Contains(h.Reason, "outside the maintenance windows") || h.Start.Before(before.Add(2*time.Hour)) {
			t.Errorf("batch host %+v: want held by its window, estimated to start when it opens", h)
		}
	}
	if r.Plan.Finish.IsZero() || r.Plan.Finish.Before(bg.Hosts[len(bg.Hosts)-1].Finish) {
		t.Errorf("rollout finish %s: want the last batch host's", r.Plan.Finish)
	}
	second := wg.Hosts[1].Host
	if len(r.Diff.Changes) != 1 || r.Diff.Changes[0].Host != second || r.Diff.Changes[0].StartAfter.After(time.Now()) {
		t.Errorf("candidate with web concurrency 2: changes %+v, want %s to start now", r.Diff.Changes, second)
	}
	for _, want := range []string{"starts now", `waiting for a slot in group "web"`, "outside the maintenance windows",
		"median of the group's last 1 cycles", "Rollout: 4 hosts, 1 starts now; estimated finish"} {
		if !strings.Contains(text, want) {
			t.Errorf("rollboot plan lacks %q:\n%s", want, text)
		}
	}

	// The coordinator does what the plan said: the first web host goes, the
	// second waits for it, batch waits for its window.
	first := wg.Hosts[0].Host
	c.startCoordinator("coordinator-2")
	c.waitFor("the host the plan said starts now to reboot", 60*time.Second, c.rebootedAll([]string{first}))
	node := map[string]string{}
	for _, h := range c.clients() {
		hh, _ := c.sim.Host(h)
		node[hh.NodeID] = h
	}
	var drained []string
	for _, e := range c.sim.Events(seq) {
		if e.Type == nomadsim.EventDrainStart {
			drained = append(drained, node[e.NodeID])
		}
	}
	if len(drained) == 0 || drained[0] != first || slices.Contains(drained, bg.Hosts[0].Host) || slices.Contains(drained, bg.Hosts[1].Host) {
		t.Errorf("drains started in the order %v; the plan said %s first, %s behind it, batch not before its window", drained, first, second)
	}
}

// varIndexes returns the modify index of every variable under rollboot/.
func varIndexes(t *testing.T, c *cluster) map[string]uint64 {
	t.Helper()
	list, _, err := c.client.Variables().PrefixList("rollboot/", nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]uint64, len(list))
	for _, v := range list {
		out[v.Path] = v.ModifyIndex
	}
	return out
}
