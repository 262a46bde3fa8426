package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// zincati sends one FleetLock call as Zincati does: POST, the protocol header, no
// Content-Type, a pretty-printed body.
func zincati(t *testing.T, base, endpoint, id string) (int, string) {
	t.Helper()
	body, _ := json.MarshalIndent(map[string]any{"client_params": map[string]string{"id": id, "group": "default"}}, "", "  ")
	req, err := http.NewRequest(http.MethodPost, base+"v1/"+endpoint, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("fleet-lock-protocol", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A Fedora CoreOS machine whose Nomad node carries its FleetLock id, served by the
// real `rollboot coordinator` process: pre-reboot answers 200 only after the node's
// drain completed; after the reboot steady-state answers 200 only once the node is
// eligible again; the slot is shared with the agent host of the same group.
func TestFleetLockEndToEnd(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1, jobs: standardJobs[2:],
		coordOnly: fmt.Sprintf("fleetlock {\n  enabled = true\n  listen = %q\n}\n", addr)})
	hosts := c.clients()
	coreos, agentHost := hosts[1], hosts[0]
	c.sup.Hosts = []string{agentHost} // Zincati, not a rollboot agent, runs on the CoreOS machine
	id := "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	if err := c.sim.SetNodeMeta(coreos, map[string]string{"fleetlock_id": id}); err != nil {
		t.Fatal(err)
	}
	c.start()
	base := "http://" + addr + "/"

	// The agent host asks first and holds the default group's single slot.
	c.needReboot(agentHost)
	c.waitFor("the agent host granted", 30*time.Second, func() bool { return c.plans()[agentHost].Active() })
	code, body := zincati(t, base, "pre-reboot", id)
	if code == 200 {
		t.Fatalf("pre-reboot granted while the agent host holds the slot: %s", body)
	}
	// Zincati retries until it gets the slot.
	c.waitFor("pre-reboot 200", 60*time.Second, func() bool {
		code, _ := zincati(t, base, "pre-reboot", id)
		return code == 200
	})
	if p := c.plans()[agentHost]; p.Active() {
		t.Fatalf("FleetLock host granted while %s is %s", agentHost, p.Phase)
	}
	drained := false
	for _, e := range c.sim.Events(0) {
		if e.Type == nomadsim.EventDrainComplete && e.Host == coreos {
			drained = true
		}
	}
	if !drained {
		t.Fatal("pre-reboot answered 200 before the node's drain completed")
	}
	// Recursive: asking again while holding the lock is still 200.
	if code, body := zincati(t, base, "pre-reboot", id); code != 200 {
		t.Errorf("second pre-reboot: %d %s", code, body)
	}
	// Zincati reboots the machine and, once it is up again, reports steady-state
	// until it gets a 200.
	before, _ := c.sim.Host(coreos)
	if err := c.sim.Reboot(coreos); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the machine to boot", 30*time.Second, func() bool {
		h, _ := c.sim.Host(coreos)
		return h.Up && h.BootID != before.BootID
	})
	c.waitFor("steady-state 200", 60*time.Second, func() bool {
		code, _ := zincati(t, base, "steady-state", id)
		return code == 200
	})
	n, err := c.sim.Node(coreos)
	if err != nil {
		t.Fatal(err)
	}
	if n.SchedulingEligibility != "eligible" || n.Status != "ready" {
		t.Errorf("after steady-state the node is %s/%s", n.Status, n.SchedulingEligibility)
	}
	if p := c.plans()[coreos]; p.Phase != store.PhaseIdle {
		t.Errorf("FleetLock host phase %s after steady-state", p.Phase)
	}
	// Releasing a lock not held is fine (idempotent).
	if code, body := zincati(t, base, "steady-state", id); code != 200 {
		t.Errorf("steady-state when not held: %d %s", code, body)
	}
	c.mustHold(invariants.Spec{Group: map[string]string{agentHost: "default", coreos: "default"},
		Concurrency: map[string]int{"default": 1}, EligibleBefore: allTrue(hosts), Reboots: map[string]int{coreos: 1, agentHost: 1}})
}
