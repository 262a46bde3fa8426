package alertgate

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func firing(name string, labels ...string) Alert {
	return Alert{Labels: lbl(name, labels...), State: StateFiring}
}

func pending(name string, labels ...string) Alert {
	return Alert{Labels: lbl(name, labels...), State: StatePending}
}

func lbl(name string, kv ...string) map[string]string {
	m := map[string]string{AlertNameLabel: name}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestDecide(t *testing.T) {
	prom := "http://prometheus:9090"
	am := "http://alertmanager:9093"
	reboot := regexp.MustCompile(`^(RebootRequired)$`)
	tests := []struct {
		name        string
		rules       Rules
		obs         Observation
		want        []string
		wantUnknown string // a substring of Unknown; "" wants none
	}{
		{name: "no alerts", rules: Rules{PrometheusURL: prom}},
		{name: "firing and pending alerts both block", rules: Rules{PrometheusURL: prom},
			obs:  Observation{Prometheus: []Alert{firing("NodeDown"), pending("HighLoad")}},
			want: []string{"HighLoad", "NodeDown"}},
		{name: "one name once, sorted", rules: Rules{PrometheusURL: prom},
			obs:  Observation{Prometheus: []Alert{firing("Z", "instance", "a"), firing("A"), firing("Z", "instance", "b")}},
			want: []string{"A", "Z"}},
		{name: "firing_only: pending alerts do not block", rules: Rules{PrometheusURL: prom, FiringOnly: true},
			obs:  Observation{Prometheus: []Alert{firing("NodeDown"), pending("HighLoad")}},
			want: []string{"NodeDown"}},
		{name: "filter: matching alerts are ignored", rules: Rules{PrometheusURL: prom, Filter: reboot},
			obs:  Observation{Prometheus: []Alert{firing("RebootRequired"), firing("NodeDown")}},
			want: []string{"NodeDown"}},
		{name: "filter is anchored as written: a longer name is not ignored", rules: Rules{PrometheusURL: prom, Filter: reboot},
			obs:  Observation{Prometheus: []Alert{firing("RebootRequiredSoon")}},
			want: []string{"RebootRequiredSoon"}},
		{name: "filter_match_only: only matching alerts block", rules: Rules{PrometheusURL: prom, Filter: reboot, FilterMatchOnly: true},
			obs:  Observation{Prometheus: []Alert{firing("RebootRequired"), firing("NodeDown")}},
			want: []string{"RebootRequired"}},
		{name: "filter_match_only and firing_only", rules: Rules{PrometheusURL: prom, Filter: regexp.MustCompile(`^Disk`), FilterMatchOnly: true, FiringOnly: true},
			obs:  Observation{Prometheus: []Alert{pending("DiskFull"), firing("DiskSlow"), firing("NodeDown")}},
			want: []string{"DiskSlow"}},
		{name: "filter_match_only without a filter: every alert blocks", rules: Rules{PrometheusURL: prom, FilterMatchOnly: true},
			obs:  Observation{Prometheus: []Alert{firing("NodeDown")}},
			want: []string{"NodeDown"}},
		{name: "Prometheus unreachable holds (fail closed)", rules: Rules{PrometheusURL: prom},
			obs:         Observation{PrometheusErr: errors.New("connect: connection refused")},
			wantUnknown: "Prometheus at http://prometheus:9090: connect: connection refused"},
		{name: "the reason never shows the URL's credentials", rules: Rules{PrometheusURL: "http://user:s3cret@prometheus:9090"},
			obs:         Observation{PrometheusErr: errors.New("server error: 503")},
			wantUnknown: "Prometheus at http://prometheus:9090: server error: 503"},
		{name: "Alertmanager only: active alerts block", rules: Rules{AlertmanagerURL: am},
			obs:  Observation{Alertmanager: []ManagedAlert{{Labels: lbl("NodeDown")}, {Labels: lbl("Quiet"), Suppressed: true}}},
			want: []string{"NodeDown"}},
		{name: "Alertmanager only: filter applies", rules: Rules{AlertmanagerURL: am, Filter: reboot},
			obs: Observation{Alertmanager: []ManagedAlert{{Labels: lbl("RebootRequired")}}}},
		{name: "both: a silenced alert of Prometheus does not block", rules: Rules{PrometheusURL: prom, AlertmanagerURL: am},
			obs: Observation{
				Prometheus:   []Alert{firing("NodeDown", "instance", "a")},
				Alertmanager: []ManagedAlert{{Labels: lbl("NodeDown", "instance", "a", "cluster", "eu"), Suppressed: true}},
			}},
		{name: "both: the silence must cover every label", rules: Rules{PrometheusURL: prom, AlertmanagerURL: am},
			obs: Observation{
				Prometheus:   []Alert{firing("NodeDown", "instance", "a"), firing("NodeDown", "instance", "b")},
				Alertmanager: []ManagedAlert{{Labels: lbl("NodeDown", "instance", "a"), Suppressed: true}},
			},
			want: []string{"NodeDown"}},
		{name: "both: a firing alert not yet in Alertmanager blocks", rules: Rules{PrometheusURL: prom, AlertmanagerURL: am},
			obs:  Observation{Prometheus: []Alert{firing("NodeDown")}},
			want: []string{"NodeDown"}},
		{name: "both: Alertmanager's alerts from elsewhere block too", rules: Rules{PrometheusURL: prom, AlertmanagerURL: am},
			obs:  Observation{Alertmanager: []ManagedAlert{{Labels: lbl("OtherSite")}}},
			want: []string{"OtherSite"}},
		{name: "both: pending alerts never reach Alertmanager and still block", rules: Rules{PrometheusURL: prom, AlertmanagerURL: am},
			obs:  Observation{Prometheus: []Alert{pending("HighLoad")}},
			want: []string{"HighLoad"}},
		{name: "both: Alertmanager unreachable holds, Prometheus's alerts still named", rules: Rules{PrometheusURL: prom, AlertmanagerURL: am},
			obs:         Observation{Prometheus: []Alert{firing("NodeDown")}, AlertmanagerErr: errors.New("timeout")},
			want:        []string{"NodeDown"},
			wantUnknown: "Alertmanager at http://alertmanager:9093: timeout"},
		{name: "both unreachable: both named", rules: Rules{PrometheusURL: prom, AlertmanagerURL: am},
			obs:         Observation{PrometheusErr: errors.New("refused"), AlertmanagerErr: errors.New("timeout")},
			wantUnknown: "Prometheus at http://prometheus:9090: refused; Alertmanager at http://alertmanager:9093: timeout"},
		{name: "an error of a source not configured is ignored", rules: Rules{PrometheusURL: prom},
			obs: Observation{AlertmanagerErr: errors.New("timeout")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Decide(tt.rules, tt.obs)
			if !slices.Equal(v.Blocking, tt.want) {
				t.Errorf("Blocking = %q, want %q", v.Blocking, tt.want)
			}
			switch {
			case tt.wantUnknown == "" && v.Unknown != "":
				t.Errorf("Unknown = %q, want none", v.Unknown)
			case tt.wantUnknown != "" && !strings.Contains(v.Unknown, tt.wantUnknown):
				t.Errorf("Unknown = %q, want it to contain %q", v.Unknown, tt.wantUnknown)
			}
			if strings.Contains(v.Unknown, "s3cret") || strings.Contains(v.Unknown, "user") {
				t.Errorf("Unknown shows credentials: %q", v.Unknown)
			}
			if want := len(tt.want) > 0 || tt.wantUnknown != ""; v.Holds() != want {
				t.Errorf("Holds() = %v, want %v", v.Holds(), want)
			}
		})
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		name  string
		names []string
		want  string
	}{
		{name: "one", names: []string{"A"}, want: "A"},
		{name: "up to the cap", names: []string{"A", "B", "C", "D", "E"}, want: "A, B, C, D, E"},
		{name: "past the cap, counted", names: []string{"A", "B", "C", "D", "E", "F", "G"}, want: "A, B, C, D, E and 2 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Verdict{Blocking: tt.names}).Names(); got != tt.want {
				t.Errorf("Names() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestEnabled(t *testing.T) {
	if (Rules{}).Enabled() {
		t.Error("no URL: enabled")
	}
	if !(Rules{AlertmanagerURL: "http://am"}).Enabled() || !(Rules{PrometheusURL: "http://p"}).Enabled() {
		t.Error("a URL: not enabled")
	}
}

func TestRedactURL(t *testing.T) {
	if got := RedactURL("https://u:p@prom.example:9090/sub"); got != "https://prom.example:9090/sub" {
		t.Errorf("RedactURL = %q", got)
	}
	if got := RedactURL("http://[::1"); strings.Contains(got, "::1") {
		t.Errorf("RedactURL of an invalid URL = %q", got)
	}
}
