package preview

import (
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
)

// The estimates count a wave's soak: the hosts waiting for their canary start
// once it is back (one cycle, 6 minutes without history) and the soak has
// passed; those a soak holds already start when it ends.
func TestBuildCountsCanarySoak(t *testing.T) {
	always := policy.Schedule(nil)
	waitCanary := func(h ObservedHost) ObservedHost {
		h.Waiting = phase.WaitFor(phase.WaitCanary, "a (wave k1 of group \"web\")")
		return h
	}
	soaking := func(h ObservedHost, until time.Duration) ObservedHost {
		h.Waiting, h.NotBefore = phase.WaitFor(phase.WaitCanarySoak, at(until).Format(time.RFC3339)), at(until)
		return h
	}
	tests := []struct {
		name  string
		hosts []ObservedHost
		want  string
	}{
		{name: "canary out: its cycle, then the soak",
			hosts: []ObservedHost{active("a", "web", "draining", 0), waitCanary(pending("b", "web", -2*m)), waitCanary(pending("c", "web", -m))},
			want:  "a 0/6, b 36/42, c 36/42"},
		{name: "soaking: from the soak's end",
			hosts: []ObservedHost{soaking(pending("b", "web", -2*m), 20*m), soaking(pending("c", "web", -m), 20*m)},
			want:  "b 20/26, c 20/26"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Build(Input{Now: now, Observed: Observed{Now: now, Groups: []ObservedGroup{group("web", 3, 3, always)}, Hosts: tt.hosts},
				CanarySoak: map[string]time.Duration{"web": 30 * m}})
			if got := est(p); got != tt.want {
				t.Errorf("estimates %s, want %s", got, tt.want)
			}
		})
	}
}

// The plan names a wave's canary, starting or out.
func TestStatusTextCanary(t *testing.T) {
	if got := statusText(Host{Starts: true, Canary: true}); got != "starts now (canary)" {
		t.Errorf("starting canary: %q", got)
	}
	if got := statusText(Host{Phase: "rebooting", Canary: true, Reason: "rebooting"}); got != "in progress (canary): rebooting" {
		t.Errorf("canary out: %q", got)
	}
	if got := statusText(Host{Starts: true}); got != "starts now" {
		t.Errorf("no canary: %q", got)
	}
}

// A group that follows another starts its wave, in the estimates, once the
// other is estimated done and after_soak has passed.
func TestBuildChainsAfter(t *testing.T) {
	always := policy.Schedule(nil)
	after := func(h ObservedHost) ObservedHost {
		h.Waiting = phase.WaitFor(phase.WaitAfterGroup, `"staging": waiting for it to finish wave k1 of group "staging"`)
		h.After = []string{"staging"}
		return h
	}
	groups := []ObservedGroup{group("staging", 1, 2, always), group("prod", 2, 2, always)}
	hosts := []ObservedHost{starts(pending("s1", "staging", -3*m)), pending("s2", "staging", -2*m),
		after(pending("p1", "prod", -3*m)), after(pending("p2", "prod", -2*m))}
	p := Build(Input{Now: now, Observed: Observed{Now: now, Groups: groups, Hosts: hosts},
		AfterSoak: map[string]time.Duration{"prod": 60 * m}})
	if got, want := est(p), "s1 0/6, s2 6/12, p1 72/78, p2 72/78"; got != want {
		t.Errorf("estimates %s, want %s", got, want)
	}
	if !hosts[2].NotBefore.IsZero() {
		t.Error("Build changed its input")
	}
}
