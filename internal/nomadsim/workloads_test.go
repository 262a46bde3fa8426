package nomadsim

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

func TestJobListFilter(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1})
	for _, j := range []JobSpec{
		{ID: "backup", Type: "batch", Meta: map[string]string{"rollboot_block": "true"}},
		{ID: "web", NodePool: "default"},
		{ID: "etl", Namespace: "ops", Type: "batch", NodePool: "batch", Meta: map[string]string{"rollboot_block": "true"}},
	} {
		if err := s.AddJob(j); err != nil {
			t.Fatal(err)
		}
	}
	list := func(ns, filter string) []string {
		t.Helper()
		stubs, meta, err := c.Jobs().List(&api.QueryOptions{Namespace: ns, Filter: filter})
		if err != nil {
			t.Fatalf("list %s %q: %v", ns, filter, err)
		}
		if meta.LastIndex == 0 {
			t.Error("no index")
		}
		var ids []string
		for _, j := range stubs {
			ids = append(ids, j.Namespace+"/"+j.ID)
		}
		return ids
	}
	for _, tt := range []struct{ ns, filter, want string }{
		{"", "", "default/backup default/web"},
		{"*", "", "default/backup ops/etl default/web"}, // the API client sorts by ID
		{"*", `Meta.rollboot_block == "true"`, "default/backup ops/etl"},
		{"*", `NodePool == "batch" or NodePool == "all"`, "default/backup ops/etl"},
		{"ops", `Type == "batch"`, "ops/etl"},
	} {
		if got := strings.Join(list(tt.ns, tt.filter), " "); got != tt.want {
			t.Errorf("namespace %q filter %q: %s, want %s", tt.ns, tt.filter, got, tt.want)
		}
	}
	if _, _, err := c.Jobs().List(&api.QueryOptions{Filter: "Meta.x =="}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("malformed filter: %v, want a 400", err)
	}
	// The stub carries the node pool, and the meta with ?meta=true only.
	var raw []map[string]any
	resp, err := http.Get(s.Address() + "/v1/jobs?namespace=ops&meta=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || len(raw) != 1 || raw[0]["NodePool"] != "batch" || raw[0]["Meta"] == nil {
		t.Errorf("stub = %v (%v), want NodePool batch and Meta", raw, err)
	}
	stubs, _, _ := c.Jobs().List(nil)
	if stubs[0].Meta != nil {
		t.Errorf("meta without ?meta=true: %v", stubs[0].Meta)
	}
}

func TestDeployments(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2, MigrateTime: 20 * time.Millisecond, MinHealthyTime: 100 * time.Millisecond, HealthyDeadline: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	status := func(job string) (string, int) {
		deps, _, err := c.Deployments().List(&api.QueryOptions{Namespace: "*", Filter: `JobID == "` + job + `"`})
		if err != nil {
			t.Fatal(err)
		}
		if len(deps) == 0 {
			return "", 0
		}
		return deps[0].Status, len(deps) // the API client sorts the newest first
	}
	waitStatus := func(job, want string, n int) {
		t.Helper()
		for ctx.Err() == nil {
			if st, got := status(job); st == want && got == n {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		st, got := status(job)
		t.Fatalf("job %s: latest deployment %q of %d, want %q of %d", job, st, got, want, n)
	}
	if err := s.AddJob(JobSpec{ID: "plain"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddJob(JobSpec{ID: "api", Update: true, Groups: []GroupSpec{{Name: "api", Count: 2}}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := status("api"); st != api.DeploymentStatusRunning {
		t.Fatalf("a new deployment is %q, want running", st)
	}
	waitStatus("api", api.DeploymentStatusSuccessful, 1)
	if _, n := status("plain"); n != 0 {
		t.Errorf("a job without an update block got %d deployments", n)
	}
	// A version whose allocations go unhealthy fails its deployment; one that
	// passes its checks again heals the job with a new, successful deployment.
	if err := s.UpdateJob(JobSpec{ID: "api", Update: true, Groups: []GroupSpec{{Name: "api", FailHealthChecks: true}}}); err != nil {
		t.Fatal(err)
	}
	waitStatus("api", api.DeploymentStatusFailed, 2)
	if err := s.UpdateJob(JobSpec{ID: "api", Update: true, Meta: map[string]string{"v": "3"}}); err != nil {
		t.Fatal(err)
	}
	waitStatus("api", api.DeploymentStatusSuccessful, 3)
	deps, _, _ := c.Deployments().List(nil)
	if len(deps) != 3 || deps[2].JobVersion != 0 || deps[0].JobVersion != 2 || deps[2].JobCreateIndex != deps[0].JobCreateIndex {
		t.Errorf("deployments = %+v", deps)
	}
	if err := s.UpdateJob(JobSpec{ID: "api", Groups: []GroupSpec{{Name: "other"}}}); err == nil {
		t.Error("an update that renames a group passed")
	}
}

func mustAllocs(t *testing.T, c *api.Client, job string) []*api.AllocationListStub {
	t.Helper()
	a, _, err := c.Jobs().Allocations(job, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestBlockedEvals(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1, MigrateTime: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.AddJob(JobSpec{ID: "train", NodePool: "gpu", Groups: []GroupSpec{{Name: "train", Count: 2}}}); err != nil {
		t.Fatal(err)
	}
	blocked := func() []*api.Evaluation {
		t.Helper()
		evals, _, err := c.Evaluations().List(&api.QueryOptions{Namespace: "*", Filter: `Status == "blocked"`})
		if err != nil {
			t.Fatal(err)
		}
		return evals
	}
	ev := blocked()
	if len(ev) != 1 || ev[0].JobID != "train" || ev[0].TriggeredBy != "queued-allocs" || ev[0].QueuedAllocations["train"] != 2 {
		t.Fatalf("blocked evaluations = %+v, want one for train", ev)
	}
	if _, _, err := c.Evaluations().List(&api.QueryOptions{Params: map[string]string{"status": "blocked"}, Filter: `JobID == "x"`}); err == nil {
		t.Error("filter with the legacy status parameter passed")
	}
	// A node of the pool joins: the scheduler places the allocations and the
	// evaluation completes.
	if _, err := s.AddHost("gpu-1", false, true, "gpu"); err != nil {
		t.Fatal(err)
	}
	for ctx.Err() == nil && len(blocked()) > 0 {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(blocked()); n != 0 {
		t.Fatalf("%d evaluations still blocked", n)
	}
	all, _, _ := c.Evaluations().List(&api.QueryOptions{Params: map[string]string{"status": "complete"}})
	if len(all) != 1 || all[0].ID != ev[0].ID {
		t.Errorf("complete evaluations = %+v", all)
	}
	if n := len(mustAllocs(t, c, "train")); n != 2 {
		t.Errorf("%d allocations placed, want 2", n)
	}
}
