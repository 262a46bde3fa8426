package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/notify"
	"github.com/rollboot/rollboot/internal/store"
)

// A host down for its reboot whose Nomad node an operator purges (`nomad node
// purge`, as for a machine gone for good) keeps its slot only for
// coordinator.purged_node_grace, far less than rejoin_timeout: `status` says
// why it waits meanwhile, then the slot is released with a node_gone history
// record and notification, and the group goes on. `rollboot forget` then
// removes the host for good.
func TestPurgedNodeReleasesItsSlot(t *testing.T) {
	t.Parallel()
	hook := &webhook{inflight: map[*http.Request]time.Time{}}
	srv := httptest.NewServer(hook)
	t.Cleanup(srv.Close)
	c := newCluster(t, clusterOpts{clients: 2, coordinators: 1, resync: productionResync,
		coordExtra: "  rejoin_timeout = \"10m\"\n  purged_node_grace = \"5s\"",
		coordOnly:  notifyBlock("generic://" + strings.TrimPrefix(srv.URL, "http://") + "/hook?disabletls=yes"),
		policy: `group "all" {
  concurrency = 1
}`})
	c.start()
	hosts := c.clients()
	gone, next := hosts[0], hosts[1]
	if err := c.sim.SetBootBlocked(gone, true); err != nil {
		t.Fatal(err)
	}
	c.needReboot(gone)
	c.waitFor(gone+" down in its reboot", 60*time.Second, func() bool {
		h, _ := c.sim.Host(gone)
		return !h.Up && c.plans()[gone].Active()
	})
	c.needReboot(next)
	c.waitFor(next+" to wait for the slot", 30*time.Second, func() bool {
		return c.plans()[next].Phase == store.PhasePending
	})

	h, _ := c.sim.Host(gone)
	if _, _, err := c.client.Nodes().Purge(h.NodeID, nil); err != nil {
		t.Fatal(err)
	}
	c.waitFor("status to say the node is gone", 30*time.Second, func() bool {
		return strings.Contains(c.cli("status"), "the node is gone: node "+h.NodeID+" is no longer in Nomad's node list (purged)")
	})
	c.waitFor("the slot released with a node_gone history record", 30*time.Second, func() bool {
		for _, r := range c.history() {
			if r.Host == gone && r.Outcome == store.OutcomeNodeGone && strings.Contains(r.Error, h.NodeID) {
				return true
			}
		}
		return false
	})
	// The history record is written before the plan that frees the slot.
	c.waitFor(gone+"'s slot freed", 30*time.Second, func() bool {
		p, ok := c.plans()[gone]
		return !ok || !p.Active()
	})
	c.waitFor("the group to go on: "+next+" rebooted", 60*time.Second, c.rebootedAll([]string{next}))
	c.waitFor("the node_gone notification", 30*time.Second, func() bool {
		for _, m := range hook.messages() {
			if e, err := parseMessage(m); err == nil && e.Kind == notify.NodeGone && e.Host == gone {
				return true
			}
		}
		return false
	})

	// The host is gone for good: forget removes its record, and the
	// coordinator its plan; neither comes back.
	out := c.cli("forget", gone)
	if !strings.Contains(out, "Host record of "+gone+" deleted") {
		t.Fatalf("forget: %s", out)
	}
	c.waitFor("the plan of "+gone+" deleted", 30*time.Second, func() bool {
		_, ok := c.plans()[gone]
		return !ok
	})
	if _, err := c.st.Host(context.Background(), gone); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("record of %s after forget: %v", gone, err)
	}
	if strings.Contains(c.cli("status"), gone) {
		t.Errorf("status still lists %s", gone)
	}
}
