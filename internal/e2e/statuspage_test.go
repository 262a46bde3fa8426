package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"
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

// Two standalone coordinators, each with its telemetry listener: the leader
// and the standby serve the same page, read from the stored state (the same
// hosts, phases, leader and slot limits), each saying whether it leads, so
// the page does not move with the leader.
func TestStatusPageOnEveryCoordinator(t *testing.T) {
	t.Parallel()
	addrs := map[string]string{"coordinator-1": freeAddr(t), "coordinator-2": freeAddr(t)}
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 2, coordConfig: func(name string) string {
		return "telemetry {\n  listen = \"" + addrs[name] + "\"\n}\n"
	}})
	c.start()
	hosts := c.clients()
	c.needReboot(hosts...)
	c.waitFor("every host rebooted", 90*time.Second, c.rebootedAll(hosts))
	leader := c.leader()
	if leader == "" {
		t.Fatal("no coordinator leads")
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	read := func(name string) (statuspage.Page, bool) {
		resp, err := hc.Get("http://" + addrs[name] + statuspage.PathJSON)
		if err != nil {
			return statuspage.Page{}, false
		}
		defer resp.Body.Close()
		var p statuspage.Page
		return p, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&p) == nil
	}
	var pages map[string]statuspage.Page
	same := func() bool {
		pages = map[string]statuspage.Page{}
		for name := range addrs {
			p, ok := read(name)
			if !ok || !pageShowsCycles(p, hosts) {
				return false
			}
			pages[name] = p
		}
		a, b := pages["coordinator-1"], pages["coordinator-2"]
		return pageHosts(a) == pageHosts(b) && a.Coordinator == b.Coordinator && groupsText(a) == groupsText(b) && a.Rollout == b.Rollout
	}
	c.waitFor("both coordinators' pages show the same rollout", 60*time.Second, same)
	for name, p := range pages {
		want := statuspage.LeaderOther
		if name == leader {
			want = statuspage.LeaderThis
		}
		if p.Leader != want || p.Error != "" {
			t.Errorf("%s's page: leader %q, error %q; want %q", name, p.Leader, p.Error, want)
		}
		if !strings.Contains(p.Coordinator, leader) && !strings.Contains(p.Coordinator, "pid") {
			t.Errorf("%s's page does not name the leader: %q", name, p.Coordinator)
		}
		for _, g := range p.Groups {
			if g.Name == "default" && (g.SlotsLimit == nil || *g.SlotsLimit < 1) {
				t.Errorf("%s's page: group default has no slot limit (%v): a standby must show the leader's", name, g.SlotsLimit)
			}
		}
	}
	t.Logf("leader %s; page: %s; groups %s", leader, pageHosts(pages[leader]), groupsText(pages[leader]))
}

// pageHosts is every host of a page with its phase and state.
func pageHosts(p statuspage.Page) string {
	var b strings.Builder
	for _, h := range p.Status.Hosts {
		b.WriteString(h.Host + "=" + h.Phase + "/" + p.Rows[h.Host].State + " ")
	}
	return b.String()
}

// groupsText is every group of a page with its slots.
func groupsText(p statuspage.Page) string {
	var b strings.Builder
	for _, g := range p.Groups {
		lim := "?"
		if g.SlotsLimit != nil {
			lim = strconv.Itoa(*g.SlotsLimit)
		}
		b.WriteString(g.Name + ":" + strconv.Itoa(g.SlotsUsed) + "/" + lim + " ")
	}
	return b.String()
}
