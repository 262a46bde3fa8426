package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// active counts the hosts rollboot has out of service.
func (c *cluster) active() int {
	n := 0
	for _, p := range c.plans() {
		if p.Active() {
			n++
		}
	}
	return n
}

// A policy applied during a rollout takes effect at once: the coordinator's
// watch of the stored policy wakes a pass, not the resync. With concurrency 1
// two hosts are never out at once; once concurrency 3 is applied, they are.
func TestPolicyChangeTakesEffectDuringRollout(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 4, resync: productionResync, migrateTime: 300 * time.Millisecond,
		policy: "group \"all\" {\n  concurrency = 1\n}\n"})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(hosts) })
	c.needReboot(hosts...)
	c.waitFor("a first host out of service", 30*time.Second, func() bool { return c.active() == 1 })
	start := time.Now()
	rec := c.applyPolicy("group \"all\" {\n  concurrency = 3\n}\n")
	took := c.within("version 2 enforced", start, func() bool { return c.status().Policy.Enforced == rec.Version })
	c.within("two hosts out at once", start, func() bool { return c.active() >= 2 })
	t.Logf("policy change to enforcement: %s", took.Round(time.Millisecond))
	c.waitFor("every host rebooted", 90*time.Second, c.rebootedAll(hosts))
	res := c.mustHold(invariants.Spec{Group: each3(hosts, "all"), Concurrency: map[string]int{"all": 3},
		EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
	if res.Peak["all"] < 2 {
		t.Errorf("at most %d host out at once: the new concurrency was not used", res.Peak["all"])
	}
}

// A stored policy that cannot be parsed (written by hand through the API) holds
// every new start: the pending host waits with the problem as its reason, status
// says so, and a host already in its cycle finishes it. A valid policy applied
// over it lets the held host go.
func TestUnparsablePolicyHoldsNewStarts(t *testing.T) {
	t.Parallel()
	// A standalone coordinator: with candidates on the agents, the leader's own
	// host may reboot, and a new leader that never read a good version has none
	// to finish cycles with but the safe rules (Enforced 0), which is not what
	// this test looks at.
	// A service allocation on every node, so that a drain lasts the 2s its
	// migration takes: with only system jobs (ignored) it ends at once, and the
	// first host could pass through draining unseen.
	c := newCluster(t, clusterOpts{clients: 3, coordinators: 1, migrateTime: 2 * time.Second, policy: "group \"all\" {\n  concurrency = 2\n}\n",
		jobs: []nomadsim.JobSpec{{ID: "web", Type: "service", Groups: []nomadsim.GroupSpec{{Name: "web", Count: 3}}}}})
	c.start()
	hosts := c.clients()
	c.waitFor("agents to publish", 30*time.Second, func() bool { return len(c.status().Hosts) == len(hosts) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.sim.WaitFor(ctx, func(v *nomadsim.View) bool {
		for _, h := range hosts {
			hv, _ := v.Host(h)
			if _, ok := v.RunningAlloc(hv.NodeID, "web"); !ok {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("web not running on every node: %v", err)
	}
	c.needReboot(hosts[0])
	c.waitFor("the first host draining", 30*time.Second, func() bool { return c.plans()[hosts[0]].Phase == store.PhaseDraining })

	// An operator writes the variable by hand, bypassing policy apply.
	cur, err := c.st.Policy(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v := &api.Variable{Path: "rollboot/policy", ModifyIndex: cur.ModifyIndex,
		Items: map[string]string{"policy_version": "2", "source": "group \"all\" {\n  concurrency = \n", "filename": "hand.hcl"}}
	if _, _, err := c.client.Variables().CheckedUpdate(v, nil); err != nil {
		t.Fatal(err)
	}
	// The need comes once the coordinator has read the invalid policy: a pass
	// that decided on the need before it saw the write could still grant it.
	c.waitFor("the coordinator to see the invalid policy", 30*time.Second, func() bool {
		return strings.Contains(c.status().Policy.Problem, "the stored policy (version 2) is invalid")
	})
	c.needReboot(hosts[1])
	held := func() bool {
		p := c.plans()[hosts[1]]
		return p.Phase == store.PhasePending && strings.Contains(p.Waiting, "no new reboot starts: the stored policy (version 2) is invalid: hand.hcl:")
	}
	c.waitFor("the second host held by the invalid policy", 30*time.Second, held)
	s := c.status()
	if !strings.Contains(s.Policy.Problem, "the stored policy (version 2) is invalid") || s.Policy.Enforced != 1 || s.Policy.Stored != 2 {
		t.Errorf("status policy: %+v", s.Policy)
	}
	// The host in its cycle finishes it with the last good rules; the other
	// is still held then.
	c.waitFor("the first host rebooted", 60*time.Second, c.rebootedAll(hosts[:1]))
	if !held() {
		t.Errorf("the second host moved under an invalid policy: %+v", c.plans()[hosts[1]])
	}
	if out := c.cli("status"); !strings.Contains(out, "Policy: HELD: no new reboot starts") {
		t.Errorf("status text:\n%s", out)
	}

	c.applyPolicy("group \"all\" {\n  concurrency = 2\n}\n")
	c.waitFor("the held host rebooted", 60*time.Second, c.rebootedAll(hosts[:2]))
	if s := c.status(); s.Policy.Problem != "" || s.Policy.Enforced != 3 {
		t.Errorf("status after a good policy: %+v", s.Policy)
	}
}

// With no stored policy the coordinator enforces the safe default, one host at a
// time in the group "default", and status says so.
func TestNoStoredPolicy(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{clients: 3})
	c.start()
	hosts := c.clients()
	c.waitFor("a coordinator to say what it enforces", 30*time.Second, func() bool { return c.status().Policy.Leader != "" })
	if s := c.status(); s.Policy.Stored != 0 || s.Policy.Enforced != 0 || s.Policy.Problem != "" {
		t.Errorf("status policy: %+v", s.Policy)
	}
	if out := c.cli("status"); !strings.Contains(out, `Policy: none stored: the safe default applies (one group "default", one host at a time, always open)`) {
		t.Errorf("status text:\n%s", out)
	}
	c.needReboot(hosts...)
	c.waitFor("every host rebooted", 90*time.Second, c.rebootedAll(hosts))
	c.mustHold(invariants.Spec{Group: each3(hosts, "default"), Concurrency: map[string]int{"default": 1},
		EligibleBefore: allTrue(hosts), Reboots: each(hosts, 1)})
}

// group.settle spaces the starts of a group: a host starts no sooner than settle
// after the last one came back, even with slots free.
func TestSettleBetweenHosts(t *testing.T) {
	t.Parallel()
	const settle = 2 * time.Second
	c := newCluster(t, clusterOpts{clients: 3, policy: "group \"all\" {\n  concurrency = 3\n  settle = \"2s\"\n}\n"})
	c.start()
	hosts := c.clients()
	c.needReboot(hosts[0])
	c.waitFor("the first host rebooted", 60*time.Second, c.rebootedAll(hosts[:1]))
	c.needReboot(hosts[1:]...)
	sawSettling := false
	c.waitFor("every host rebooted", 90*time.Second, func() bool {
		for _, p := range c.plans() {
			sawSettling = sawSettling || strings.HasPrefix(p.Waiting, "settling: group \"all\"")
		}
		return c.rebootedAll(hosts)()
	})
	if !sawSettling {
		t.Error("no host was seen waiting for the group to settle")
	}
	hist := c.history()
	for _, r := range hist {
		started := r.Timeline[store.PhaseDraining]
		var back time.Time // the last host back before this one started
		for _, o := range hist {
			if o.Finished.Before(started) && o.Finished.After(back) {
				back = o.Finished
			}
		}
		if !back.IsZero() && started.Sub(back) < settle {
			t.Errorf("%s started %s after the last host came back, want at least %s", r.Host, started.Sub(back), settle)
		}
	}
}
