package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/wave"
)

// failingReboot is a reboot command that fails on a host whose folder holds
// the file fail-reboot, and reboots the emulated host otherwise.
var failingReboot = []string{"/bin/sh", "-c",
	`if [ -f "$1/fail-reboot" ]; then echo "reboot: injected failure" >&2; exit 3; fi; exec "$0" sim-ctl reboot --address "$2" "$3"`,
	"{{bin}}", "{{host_dir}}", "{{sim}}", "{{host}}"}

// needPackages makes each host need a reboot for packages, as Debian's
// unattended-upgrades does: the packages' list first, then the sentinel the
// agent watches. The Debian detector's fingerprint is the list's hash, the
// same on every host given the same packages.
func (c *cluster) needPackages(pkgs string, hosts ...string) {
	c.t.Helper()
	for _, h := range hosts {
		c.writeHostFiles(h, map[string]string{"var/run/reboot-required.pkgs": pkgs})
		c.writeHostFiles(h, map[string]string{"var/run/reboot-required": "*** System restart required ***\n"})
	}
}

// waves reads the coordinator's <prefix>/waves.
func (c *cluster) waves() wave.State {
	c.t.Helper()
	items, _, err := c.st.Waves(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	st, err := wave.FromItems(items)
	if err != nil {
		c.t.Fatal(err)
	}
	return st
}

// waveOf returns the group's wave other than those of the fingerprints in
// not, waiting for it to be recorded.
func (c *cluster) waveOf(group string, not ...string) wave.Wave {
	c.t.Helper()
	var w wave.Wave
	c.waitFor("the wave of group "+group+" to be recorded", 20*time.Second, func() bool {
		for _, x := range c.waves().Waves {
			if x.Group == group && !strings.Contains(strings.Join(not, "\n"), x.Fingerprint) {
				w = x
				return true
			}
		}
		return false
	})
	return w
}

// cycles are the host's finished cycles in the history.
func (c *cluster) cycles(host string) []store.HistoryRecord {
	var out []store.HistoryRecord
	for _, r := range c.history() {
		if r.Host == host {
			out = append(out, r)
		}
	}
	return out
}

// A wave's canary reboots alone, the rest of the wave waits for it and then
// for its soak (shown in the plans, and by `rollboot status`), and only then
// starts, though the group's concurrency would let every host go at once. A
// second update (a new fingerprint) is a new wave with a canary of its own;
// that canary's reboot fails, and the rest of its wave is held, saying so,
// while the coordinator keeps its failure in <prefix>/waves.
func TestCanaryWaveSoaksThenHoldsOnFailure(t *testing.T) {
	t.Parallel()
	const soak = 4 * time.Second
	c := newCluster(t, clusterOpts{clients: 3, resync: productionResync, agentExtra: `  detectors = ["debian"]`,
		rebootCommand: failingReboot, policy: fmt.Sprintf(`group "web" {
  filter      = ""
  concurrency = 3
  canary {
    hosts = 1
    soak  = %q
  }
}`, soak)})
	hosts := c.clients()
	c.start()
	c.needPackages("linux-image-6.8.0-49-generic\n", hosts...)

	first := c.waveOf("web")
	c.waitFor("the others to soak after the canary", 30*time.Second, func() bool {
		soaking := 0
		for _, p := range c.plans() {
			if strings.Contains(p.Waiting, "canary soak until") {
				soaking++
			}
		}
		return soaking == len(hosts)-1
	})
	if out := c.cli("status"); !strings.Contains(out, "canary soak until") {
		t.Errorf("rollboot status does not show the soak:\n%s", out)
	}
	c.waitFor("every host to reboot", 40*time.Second, c.rebootedAll(hosts))
	c.waitFor("the first wave to finish", 20*time.Second, func() bool {
		first, _ = c.waves().Wave("web", first.Fingerprint)
		return !first.Finished.IsZero()
	})
	if len(first.Members) != 1 || !first.Members[0].Canary || first.Members[0].Done.IsZero() || first.Finished.IsZero() {
		t.Fatalf("wave %+v: want one canary, back, and the wave finished", first)
	}
	canary := first.Members[0].Host
	back := c.cycles(canary)[0].Finished
	for _, h := range hosts {
		if fp := c.cycles(h)[0].Fingerprint; fp != first.Fingerprint {
			t.Errorf("%s's history record has fingerprint %q, want its wave's %q", h, fp, first.Fingerprint)
		}
	}
	for _, h := range hosts {
		if h == canary {
			continue
		}
		if started := c.cycles(h)[0].Timeline[store.PhaseDraining]; started.Before(back.Add(soak)) {
			t.Errorf("%s started its drain at %s, before the canary %s was back (%s) and soaked %s", h, started, canary, back, soak)
		}
	}

	// A second update, whose canary fails to reboot: its failure halts the
	// group, and the rest of the wave waits for the operator.
	for _, h := range hosts {
		c.writeHostFiles(h, map[string]string{"fail-reboot": ""})
	}
	c.needPackages("linux-image-6.8.0-51-generic\n", hosts...)
	second := c.waveOf("web", first.Fingerprint)
	c.waitFor("the canary's failure to halt its group", 30*time.Second, func() bool {
		w, _ := c.waves().Wave("web", second.Fingerprint)
		held := 0
		for _, p := range c.plans() {
			if strings.Contains(p.Waiting, "halted") && strings.Contains(p.Waiting, "canary") {
				held++
			}
		}
		second = w
		return w.Failed != "" && held == len(hosts)-1
	})
	if !strings.Contains(second.Failed, "reboot command failed (exit status 3)") {
		t.Errorf("the wave's failure %q does not say how the canary failed", second.Failed)
	}
	failed := second.Members[0].Host
	for name, p := range c.plans() {
		if name != failed && (p.Phase != store.PhasePending || len(c.cycles(name)) > 1) {
			t.Errorf("%s is %s with %d cycles: no host may go while the canary's failure holds the wave", name, p.Phase, len(c.cycles(name)))
		}
	}
	if cs := c.cycles(failed); len(cs) != 2 || cs[1].Outcome != "failed" {
		t.Errorf("the failed canary %s's cycles: %+v", failed, cs)
	}
	if out := c.cli("status"); !strings.Contains(out, "canary") || !strings.Contains(out, "HALTED") {
		t.Errorf("rollboot status does not show the halted group and its wave:\n%s", out)
	}

	// The operator fixes the update and resumes the group: the failure is
	// forgotten, the wave picks a canary again, and the hosts it held reboot
	// (the failed canary waits for its retry's backoff).
	for _, h := range hosts {
		c.removeHostFile(h, "fail-reboot")
	}
	if out := c.cli("resume", "-group", "web"); !strings.Contains(out, "lifted") {
		t.Errorf("rollboot resume -group web: %s", out)
	}
	defer func() {
		if t.Failed() {
			t.Log(c.cli("status"))
		}
	}()
	c.waitFor("the hosts the halt held to reboot for the second wave", 30*time.Second, func() bool {
		for _, h := range hosts {
			if h == failed {
				continue
			}
			cs := c.cycles(h)
			if cs[len(cs)-1].Outcome != "rebooted" || cs[len(cs)-1].Fingerprint != second.Fingerprint {
				return false
			}
		}
		return true
	})
	reboots := each(hosts, 2)
	delete(reboots, failed) // its second cycle failed on the host; its retry waits for its backoff
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: reboots})
}

// Group prod follows group staging: prod starts a wave only when staging has
// finished it (every staging host that needed it is back) and after_soak has
// passed; meanwhile its hosts say why. An update that no staging host needs
// holds prod only for after_soak from when prod first had it.
func TestAfterOrdersGroupsByWave(t *testing.T) {
	t.Parallel()
	const afterSoak = 2 * time.Second
	c := newCluster(t, clusterOpts{clients: 4, pools: []string{"staging", "prod"}, resync: productionResync,
		agentExtra: `  detectors = ["debian"]`, policy: fmt.Sprintf(`group "staging" {
  filter      = "NodePool == \"staging\""
  concurrency = 2
}
group "prod" {
  filter      = "NodePool == \"prod\""
  concurrency = 2
  after       = ["staging"]
  after_soak  = %q
}`, afterSoak)})
	hosts := c.clients()
	pools := c.groupsByPool()
	var staging, prod []string
	for _, h := range hosts {
		if pools[h] == "staging" {
			staging = append(staging, h)
		} else {
			prod = append(prod, h)
		}
	}
	c.start()
	c.needPackages("openssl\n", hosts...)
	c.waitFor("prod to wait for staging", 30*time.Second, func() bool {
		plans := c.plans()
		for _, h := range prod {
			if !strings.Contains(plans[h].Waiting, `after "staging"`) {
				return false
			}
		}
		return true
	})
	c.waitFor("every host to reboot", 40*time.Second, c.rebootedAll(hosts))
	var stagingBack time.Time
	for _, h := range staging {
		if f := c.cycles(h)[0].Finished; f.After(stagingBack) {
			stagingBack = f
		}
	}
	for _, h := range prod {
		if started := c.cycles(h)[0].Timeline[store.PhaseDraining]; started.Before(stagingBack.Add(afterSoak)) {
			t.Errorf("%s started at %s, before staging finished (%s) and soaked %s", h, started, stagingBack, afterSoak)
		}
	}

	// An update only a prod host needs: held for after_soak from when prod had it.
	shared := c.waveOf("prod")
	c.needPackages("libprod\n", prod[0])
	var w wave.Wave
	c.waitFor("prod's own wave to go", 30*time.Second, func() bool {
		for _, x := range c.waves().Waves {
			if x.Group == "prod" && x.Fingerprint != shared.Fingerprint && !x.Finished.IsZero() && len(c.cycles(prod[0])) == 2 {
				w = x
				return true
			}
		}
		return false
	})
	if started := c.cycles(prod[0])[1].Timeline[store.PhaseDraining]; started.Before(w.Seen.Add(afterSoak)) {
		t.Errorf("%s started its prod-only wave at %s, before after_soak from %s", prod[0], started, w.Seen)
	}
	reboots := each(hosts, 1)
	reboots[prod[0]] = 2
	c.mustHold(invariants.Spec{EligibleBefore: allTrue(hosts), Reboots: reboots})
}
