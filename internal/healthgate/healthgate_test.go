package healthgate

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	prom := Gate{Name: "ceph", Kind: KindPromQL, Query: "ceph_health_status != 0"}
	for _, tc := range []struct {
		name   string
		g      Gate
		o      Observation
		open   bool
		reason string
	}{
		{name: "promql empty result opens", g: prom, open: true},
		{name: "promql false opens", g: prom, o: Observation{Samples: []Sample{{Value: 0}, {Labels: map[string]string{"a": "b"}, Value: 0}}}, open: true},
		{name: "promql true closes", g: prom, o: Observation{Samples: []Sample{{Labels: map[string]string{"instance": "mon-1", "job": "ceph"}, Value: 2}}},
			reason: `health gate "ceph": ceph_health_status != 0 is true: {instance="mon-1", job="ceph"} 2`},
		{name: "promql NaN closes", g: prom, o: Observation{Samples: []Sample{{Value: math.NaN()}}}, reason: "is true: {} NaN"},
		{name: "promql many series", g: prom, o: Observation{Samples: []Sample{{Labels: map[string]string{"i": "d"}, Value: 1},
			{Labels: map[string]string{"i": "c"}, Value: 1}, {Labels: map[string]string{"i": "b"}, Value: 1}, {Labels: map[string]string{"i": "a"}, Value: 1}}},
			reason: `{i="a"} 1, {i="b"} 1, {i="c"} 1 and 1 more`},
		{name: "unreadable closes", g: prom, o: Observation{Err: errors.New("http://prom:9090/api/v1/query: unreachable: connection refused")},
			reason: `health gate "ceph": cannot tell (promql): http://prom:9090/api/v1/query: unreachable`},
		{name: "alerts none opens", g: Gate{Name: "crit", Kind: KindAlerts, Matchers: []string{`severity="critical"`}}, open: true},
		{name: "alerts firing closes", g: Gate{Name: "crit", Kind: KindAlerts, Matchers: []string{`severity="critical"`}},
			o: Observation{Alerts: []string{"DiskFull"}}, reason: `health gate "crit": alerts matching {severity="critical"} fire: DiskFull`},
		{name: "consul enough passing opens", g: Gate{Name: "db", Kind: KindConsulService, Service: "pg", MinPassing: 2}, o: Observation{Passing: 2}, open: true},
		{name: "consul too few closes", g: Gate{Name: "db", Kind: KindConsulService, Service: "pg", MinPassing: 2}, o: Observation{Passing: 1},
			reason: "Consul service pg has 1 passing instances, fewer than 2"},
		{name: "nomad enough healthy opens", g: Gate{Name: "api", Kind: KindNomadJob, Job: "api", Namespace: "default", MinHealthy: 3}, o: Observation{Healthy: 3, Allocs: 3}, open: true},
		{name: "nomad too few closes", g: Gate{Name: "api", Kind: KindNomadJob, Job: "api", Namespace: "default", MinHealthy: 3}, o: Observation{Healthy: 2, Allocs: 3},
			reason: "Nomad job default/api has 2 healthy allocations (of 3 running), fewer than 3"},
		{name: "http expected opens", g: Gate{Name: "lb", Kind: KindHTTP, URL: "http://lb/healthz", ExpectStatus: 200}, o: Observation{Status: 200}, open: true},
		{name: "http other closes", g: Gate{Name: "lb", Kind: KindHTTP, URL: "http://lb/healthz", ExpectStatus: 200}, o: Observation{Status: 503},
			reason: "GET http://lb/healthz answered 503, want 200"},
		{name: "http credentials never shown", g: Gate{Name: "lb", Kind: KindHTTP, URL: "https://u:secret@lb/healthz?token=t", ExpectStatus: 200},
			o: Observation{Status: 401}, reason: `health gate "lb": GET https://lb/healthz answered 401, want 200`},
		{name: "unknown kind closes", g: Gate{Name: "x", Kind: "ping"}, reason: `unknown kind "ping"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Decide(tc.g, tc.o)
			if v.Open != tc.open || !strings.Contains(v.Reason, tc.reason) || (tc.open && v.Reason != "") {
				t.Errorf("verdict %+v, want open %v with reason %q", v, tc.open, tc.reason)
			}
		})
	}
}

func TestGuards(t *testing.T) {
	all, some := Gate{}, Gate{Groups: []string{"web", "db"}}
	if !all.Guards("x") || !some.Guards("db") || some.Guards("batch") {
		t.Error("Guards")
	}
}
