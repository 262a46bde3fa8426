package gateread

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/healthgate"
)

func TestPromQL(t *testing.T) {
	var answer string
	var status int
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/prom/api/v1/query" {
			t.Errorf("path %s", r.URL.Path)
		}
		query = r.URL.Query().Get("query")
		w.WriteHeader(status)
		fmt.Fprint(w, answer)
	}))
	defer srv.Close()
	g := healthgate.Gate{Name: "g", Kind: healthgate.KindPromQL, PrometheusURL: srv.URL + "/prom", Query: `up{job="x"} == 0`, Timeout: 5 * time.Second}
	r := &Reader{}
	for _, tc := range []struct {
		name, answer string
		status       int
		want         []healthgate.Sample
		err          string
	}{
		{name: "empty vector", status: 200, answer: `{"status":"success","data":{"resultType":"vector","result":[]}}`, want: []healthgate.Sample{}},
		{name: "vector", status: 200, answer: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"a"},"value":[1700000000.1,"0"]}]}}`,
			want: []healthgate.Sample{{Labels: map[string]string{"instance": "a"}, Value: 0}}},
		{name: "scalar", status: 200, answer: `{"status":"success","data":{"resultType":"scalar","result":[1700000000.1,"1"]}}`, want: []healthgate.Sample{{Value: 1}}},
		{name: "string", status: 200, answer: `{"status":"success","data":{"resultType":"string","result":[1,"x"]}}`, err: "returns a string"},
		{name: "bad query", status: 400, answer: `{"status":"error","errorType":"bad_data","error":"parse error"}`, err: "HTTP 400: bad_data: parse error"},
		{name: "not the API", status: 502, answer: "bad gateway\nmore", err: "HTTP 502: bad gateway"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer, status = tc.answer, tc.status
			o := r.Read(context.Background(), g)
			if tc.err != "" {
				if o.Err == nil || !strings.Contains(o.Err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", o.Err, tc.err)
				}
				return
			}
			if o.Err != nil || fmt.Sprint(o.Samples) != fmt.Sprint(tc.want) {
				t.Fatalf("samples %v (%v), want %v", o.Samples, o.Err, tc.want)
			}
			if query != g.Query {
				t.Errorf("query sent %q", query)
			}
		})
	}
}

func TestAlertsAndHTTP(t *testing.T) {
	var filters []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v2/alerts":
			filters = r.URL.Query()["filter"]
			if r.URL.Query().Get("silenced") != "false" || r.URL.Query().Get("inhibited") != "false" {
				t.Errorf("query %s: silenced and inhibited alerts must not count", r.URL.RawQuery)
			}
			fmt.Fprint(w, `[{"labels":{"alertname":"DiskFull","severity":"critical"}}]`)
		case "/healthz":
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/moved":
			http.Redirect(w, r, "/healthz", http.StatusFound)
		}
	}))
	defer srv.Close()
	r := &Reader{}
	o := r.Read(context.Background(), healthgate.Gate{Kind: healthgate.KindAlerts, AlertmanagerURL: srv.URL,
		Matchers: []string{`severity="critical"`, `team=~"db.*"`}, Timeout: 5 * time.Second})
	if o.Err != nil || len(o.Alerts) != 1 || o.Alerts[0] != "DiskFull" || len(filters) != 2 {
		t.Errorf("alerts %v (%v), filters sent %v", o.Alerts, o.Err, filters)
	}
	for path, want := range map[string]int{"/healthz": 503, "/moved": 302} {
		o := r.Read(context.Background(), healthgate.Gate{Kind: healthgate.KindHTTP, URL: srv.URL + path, Timeout: 5 * time.Second})
		if o.Err != nil || o.Status != want {
			t.Errorf("GET %s: status %d (%v), want %d", path, o.Status, o.Err, want)
		}
	}
	srv.Close()
	o = r.Read(context.Background(), healthgate.Gate{Kind: healthgate.KindHTTP, URL: "http://user:secret@" + strings.TrimPrefix(srv.URL, "http://") + "/healthz?token=x", Timeout: 5 * time.Second})
	if o.Err == nil || strings.Contains(o.Err.Error(), "secret") || strings.Contains(o.Err.Error(), "token=x") || !strings.Contains(o.Err.Error(), "unreachable") {
		t.Errorf("error of an unreachable URL: %v", o.Err)
	}
}

type fakeConsul struct {
	n   int
	err error
}

func (f fakeConsul) Service(service, tag string, passingOnly bool, q *consulapi.QueryOptions) ([]*consulapi.ServiceEntry, *consulapi.QueryMeta, error) {
	if !passingOnly || service != "pg" {
		return nil, nil, fmt.Errorf("asked %q passing %v", service, passingOnly)
	}
	return make([]*consulapi.ServiceEntry, f.n), nil, f.err
}

type fakeJobs []*api.AllocationListStub

func (f fakeJobs) Allocations(job string, all bool, q *api.QueryOptions) ([]*api.AllocationListStub, *api.QueryMeta, error) {
	if job != "api" || q.Namespace != "web" {
		return nil, nil, fmt.Errorf("asked %s in %s", job, q.Namespace)
	}
	return f, nil, nil
}

func TestConsulAndNomad(t *testing.T) {
	yes, no := true, false
	r := &Reader{Consul: fakeConsul{n: 2}, Nomad: fakeJobs{
		{ClientStatus: "running", DesiredStatus: "run"},
		{ClientStatus: "running", DesiredStatus: "run", DeploymentStatus: &api.AllocDeploymentStatus{Healthy: &yes}},
		{ClientStatus: "running", DesiredStatus: "run", DeploymentStatus: &api.AllocDeploymentStatus{Healthy: &no}},
		{ClientStatus: "running", DesiredStatus: "stop"},
		{ClientStatus: "pending", DesiredStatus: "run"},
	}}
	o := r.Read(context.Background(), healthgate.Gate{Kind: healthgate.KindConsulService, Service: "pg", Timeout: time.Second})
	if o.Err != nil || o.Passing != 2 {
		t.Errorf("consul: %+v", o)
	}
	o = r.Read(context.Background(), healthgate.Gate{Kind: healthgate.KindNomadJob, Job: "api", Namespace: "web", Timeout: time.Second})
	if o.Err != nil || o.Healthy != 2 || o.Allocs != 3 {
		t.Errorf("nomad: %+v", o)
	}
	r = &Reader{Consul: fakeConsul{err: errors.New("403")}}
	if o := r.Read(context.Background(), healthgate.Gate{Kind: healthgate.KindConsulService, Service: "pg", Timeout: time.Second}); o.Err == nil {
		t.Error("a Consul error is no error")
	}
	r = &Reader{}
	if o := r.Read(context.Background(), healthgate.Gate{Kind: healthgate.KindConsulService, Service: "pg", Timeout: time.Second}); o.Err == nil ||
		!strings.Contains(o.Err.Error(), "no Consul client") {
		t.Errorf("without Consul: %v", o.Err)
	}
}
