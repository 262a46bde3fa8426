package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/statuspage"
)

// A standalone coordinator with the token of deploy/acl's coordinator policy
// serves the status page on its telemetry listener: a listener connected
// before the rollout receives, as Server-Sent Events, every host's drain,
// reboot and rejoin, and the slot limits of the leader; the page never fails
// to read or watch the state with that token.
func TestStatusPageWithCoordinatorToken(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 1, acl: true,
		coordOnly: "telemetry {\n  listen = \"" + addr + "\"\n}\n"})
	tokens := mintTokens(t, c.client)
	c.opts.agentToken, c.opts.coordToken = tokens["rollboot-agent"], tokens["rollboot-coordinator"]
	c.start()
	hc := &http.Client{Timeout: 5 * time.Second}
	c.waitFor("the status page answers", 30*time.Second, func() bool {
		resp, err := hc.Get("http://" + addr + statuspage.PathJSON)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	resp, err := http.Get("http://" + addr + statuspage.PathEvents)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	pages := make(chan statuspage.Page, 64)
	go func() {
		defer close(pages)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && data != "" {
				var p statuspage.Page
				if json.Unmarshal([]byte(data), &p) == nil {
					pages <- p
				}
			}
		}
	}()

	hosts := c.clients()
	c.needReboot(hosts...)
	c.waitFor("every host rebooted", 90*time.Second, c.rebootedAll(hosts))
	var last statuspage.Page
	deadline := time.After(60 * time.Second)
	for !pageShowsCycles(last, hosts) {
		select {
		case p, ok := <-pages:
			if !ok {
				t.Fatal("the event stream ended")
			}
			last = p
		case <-deadline:
			t.Fatalf("no event shows every host's cycle; last: %+v", last)
		}
	}
	if last.Leader != statuspage.LeaderThis || last.Error != "" {
		t.Errorf("leader %q, error %q", last.Leader, last.Error)
	}
	for _, g := range last.Groups {
		if g.Name == "default" && (g.SlotsLimit == nil || *g.SlotsLimit < 1) {
			t.Errorf("group default: slot limit %v, want the leader's", g.SlotsLimit)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !strings.Contains(c.logs["coordinator-1"].String(), "serving the status page") {
		t.Error("the coordinator's log does not say where it serves the status page")
	}
	for name, log := range c.logs {
		if strings.Contains(log.String(), "status page:") {
			t.Errorf("%s's log has status page warnings:\n%s", name, log.String())
		}
	}
}

// pageShowsCycles: every host has a finished cycle with drain, reboot and rejoin bars.
func pageShowsCycles(p statuspage.Page, hosts []string) bool {
	done := map[string]bool{}
	for _, cy := range p.Timeline {
		kinds := map[string]bool{}
		for _, b := range cy.Bars {
			kinds[b.Kind] = true
		}
		if !cy.Open && kinds[statuspage.KindDrain] && kinds[statuspage.KindReboot] && kinds[statuspage.KindRejoin] {
			done[cy.Host] = true
		}
	}
	for _, h := range hosts {
		if !done[h] {
			return false
		}
	}
	return len(hosts) > 0
}
