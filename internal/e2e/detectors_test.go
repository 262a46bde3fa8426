package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/store"
)

// removeHostFile removes a file (path under the host's folder) from an
// emulated host's folder.
func (c *cluster) removeHostFile(host, path string) {
	c.t.Helper()
	h, ok := c.sim.Host(host)
	if !ok {
		c.t.Fatalf("no host %s", host)
	}
	if err := os.Remove(filepath.Join(h.Dir, path)); err != nil && !os.IsNotExist(err) {
		c.t.Fatal(err)
	}
}

// writeHostFiles writes files (path under the host's folder: content) into
// an emulated host's folder, the root its agent's detectors look at.
func (c *cluster) writeHostFiles(host string, files map[string]string) {
	c.t.Helper()
	h, ok := c.sim.Host(host)
	if !ok {
		c.t.Fatalf("no host %s", host)
	}
	for p, content := range files {
		full := filepath.Join(h.Dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			c.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
}

// The kernel detector finds a newer kernel installed on one host: that host
// reboots with the detector's reason in `rollboot history` and its
// fingerprint in `rollboot status`; as its emulated reboot still runs the old
// kernel, the need is still there after it and the reboot-loop guard holds it,
// as for the sentinel file. The needrestart detector, whose program is not
// installed, is a detection error shown in status on every host, and reboots
// none: the host running its newest kernel stays up.
func TestKernelDetectorReboots(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 2, agentExtra: `  detectors = ["kernel", "needrestart"]`,
		coordExtra: `  reboot_loop_backoff = "1h"`})
	hosts := c.clients()
	installed := map[string]string{"boot/vmlinuz-6.8.0-45-generic": "", "boot/vmlinuz-6.8.0-49-generic": ""}
	behind, current := hosts[0], hosts[1]
	c.writeHostFiles(behind, installed)
	c.writeHostFiles(behind, map[string]string{"proc/sys/kernel/osrelease": "6.8.0-45-generic\n"})
	c.writeHostFiles(current, installed)
	c.writeHostFiles(current, map[string]string{"proc/sys/kernel/osrelease": "6.8.0-49-generic\n"})
	c.start()

	const reason = "kernel 6.8.0-49-generic installed, 6.8.0-45-generic running"
	c.waitFor("the host behind to reboot for its kernel", 40*time.Second, func() bool {
		for _, r := range c.history() {
			if r.Host == behind && r.Outcome == "rebooted" {
				return true
			}
		}
		return false
	})
	for _, r := range c.history() {
		if r.Host != behind || r.Reason != reason {
			t.Errorf("history record %s %s, reason %q; want only %s with %q", r.Host, r.Outcome, r.Reason, behind, reason)
		}
	}
	if out := c.cli("history"); !strings.Contains(out, reason) {
		t.Errorf("rollboot history does not show %q:\n%s", reason, out)
	}
	c.waitFor("the reboot-loop guard to hold the need the reboot left", 20*time.Second, func() bool {
		p := c.plans()[behind]
		return p.LoopCount == 1 && strings.Contains(p.LastError, "reboot loop")
	})

	var st struct {
		Hosts []struct {
			Host        string `json:"host"`
			Reason      string `json:"reason"`
			Fingerprint string `json:"fingerprint"`
			DetectError string `json:"detect_error"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(c.cli("status", "-json")), &st); err != nil {
		t.Fatal(err)
	}
	for _, h := range st.Hosts {
		if !strings.Contains(h.DetectError, "needrestart detector: needrestart: not installed") {
			t.Errorf("%s: status detect_error %q; want the missing needrestart", h.Host, h.DetectError)
		}
		if h.Host == behind && (h.Reason != reason || h.Fingerprint != "kernel 6.8.0-49-generic") {
			t.Errorf("%s: status reason %q, fingerprint %q", h.Host, h.Reason, h.Fingerprint)
		}
	}
	if p, ok := c.plans()[current]; ok && p.Phase != store.PhaseIdle {
		t.Errorf("%s (running its newest kernel) is %s", current, p.Phase)
	}
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: map[string]int{behind: 1, current: 0}})
}
