package e2e

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// After a rollout the coordinator's /metrics, on its telemetry listener (FleetLock
// off), counts one rebooted cycle per host and shows every host idle; a real
// scrape passes promtool's naming checks when promtool is installed.
func TestFullRolloutMetrics(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 1, coordOnly: fmt.Sprintf("telemetry {\n  listen = %q\n}\n", addr)})
	c.start()
	hosts := c.clients()
	c.needReboot(hosts...)
	c.waitFor("every host rebooted", 90*time.Second, c.rebootedAll(hosts))
	want := fmt.Sprintf(`rollboot_reboots_total{outcome="rebooted"} %d`, len(hosts))
	var body string
	// A cycle is counted when it ends and the phases are exported at the end of
	// that pass: a scrape in between sees the count before the last host's idle.
	idle := func(body string) bool {
		for _, h := range hosts {
			if !strings.Contains(body, fmt.Sprintf("rollboot_host_phase{host=%q,phase=\"idle\"} 1\n", h)) {
				return false
			}
		}
		return true
	}
	c.waitFor("the coordinator counts every reboot and shows every host idle", 30*time.Second, func() bool {
		body = scrapeMetrics(addr)
		return strings.Contains(body, want+"\n") && idle(body)
	})
	for _, line := range []string{"rollboot_leader 1\n", "rollboot_paused 0\n", `rollboot_cycle_stage_duration_seconds_count{stage="cycle"} 3` + "\n"} {
		if !strings.Contains(body, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		cmd := exec.Command(p, "check", "metrics")
		cmd.Stdin = strings.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	}
}

// freeAddr returns a local address for a process to listen on. The port is
// free now and below Linux's ephemeral range (32768 up): a port the kernel
// hands out picked by port 0 could be taken as the local port of one of the
// many outgoing connections the test processes open before the process that
// was given it listens ("address already in use").
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 1000 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken: another
		}
		_ = ln.Close()
		return addr
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}

// scrapeMetrics returns one scrape of addr's /metrics, "" when it fails.
func scrapeMetrics(addr string) string {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
