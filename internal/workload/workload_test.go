package workload

import (
	"slices"
	"strings"
	"testing"
)

func TestBlockingJobs(t *testing.T) {
	web, batch, other := JobKey{"default", "web"}, JobKey{"ops", "backup"}, JobKey{"default", "api"}
	blocking := map[JobKey]bool{web: true, batch: true}
	tests := []struct {
		name   string
		allocs []Alloc
		want   []JobKey
	}{
		{"no allocation", nil, nil},
		{"only other jobs", []Alloc{{Job: other}}, nil},
		{"a running blocking job", []Alloc{{Job: other}, {Job: web}}, []JobKey{web}},
		{"a terminal allocation does not block", []Alloc{{Job: web, Terminal: true}}, nil},
		{"each job once, sorted", []Alloc{{Job: web}, {Job: batch}, {Job: web}}, []JobKey{batch, web}},
		{"same ID in another namespace does not match", []Alloc{{Job: JobKey{"ops", "web"}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := BlockingJobs(tt.allocs, blocking); !slices.Equal(got, tt.want) {
				t.Fatalf("BlockingJobs = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestHeld(t *testing.T) {
	for status, want := range map[string]bool{
		StatusRunning: true, StatusPaused: true, StatusPending: true, StatusInitializing: true,
		StatusBlocked: true, StatusUnblocking: true, StatusFailed: true,
		StatusSuccessful: false, StatusCancelled: false, "some-new-status": true,
	} {
		if got := Held(status); got != want {
			t.Errorf("Held(%q) = %v, want %v", status, got, want)
		}
	}
}

func TestPoolHold(t *testing.T) {
	api, web := JobKey{"default", "api"}, JobKey{"default", "web"}
	jobs := map[JobKey]Job{api: {Key: api, CreateIndex: 10}, web: {Key: web, CreateIndex: 20}}
	both := map[JobKey]bool{api: true, web: true}
	dep := func(id string, j JobKey, jobCreate uint64, status string, create uint64) Deployment {
		return Deployment{ID: id, Job: j, JobCreateIndex: jobCreate, Status: status, CreateIndex: create}
	}
	tests := []struct {
		name     string
		view     PoolView
		want     Kind
		contains string
	}{
		{name: "nothing observed", view: PoolView{Pool: "default", Jobs: jobs, DeploymentJobs: both, CheckDeployment: true, CheckEvals: true}},
		{
			name: "a running deployment holds",
			view: PoolView{Pool: "default", Jobs: jobs, DeploymentJobs: both, CheckDeployment: true,
				Deployments: []Deployment{dep("0123456789ab", api, 10, StatusRunning, 30)}},
			want: ByDeployment, contains: "pool default: deployment 01234567 of job api is running",
		},
		{
			name: "only the latest deployment of a job counts",
			view: PoolView{Pool: "default", Jobs: jobs, DeploymentJobs: both, CheckDeployment: true,
				Deployments: []Deployment{dep("new", api, 10, StatusSuccessful, 40), dep("old", api, 10, StatusFailed, 30)}},
		},
		{
			name: "a failed latest deployment holds",
			view: PoolView{Pool: "default", Jobs: jobs, DeploymentJobs: both, CheckDeployment: true,
				Deployments: []Deployment{dep("old", api, 10, StatusSuccessful, 30), dep("new", api, 10, StatusFailed, 40)}},
			want: ByDeployment, contains: "job api is failed",
		},
		{
			name: "a deployment of an earlier registration of the job does not count",
			view: PoolView{Pool: "default", Jobs: jobs, DeploymentJobs: both, CheckDeployment: true,
				Deployments: []Deployment{dep("gone", api, 5, StatusFailed, 8)}},
		},
		{
			name: "a stopped job's deployment does not count",
			view: PoolView{Pool: "default", Jobs: map[JobKey]Job{api: {Key: api, CreateIndex: 10, Stopped: true}}, DeploymentJobs: both,
				CheckDeployment: true, Deployments: []Deployment{dep("d", api, 10, StatusPaused, 30)}},
		},
		{
			name: "a job of another pool does not count",
			view: PoolView{Pool: "batch", Jobs: map[JobKey]Job{}, DeploymentJobs: map[JobKey]bool{}, CheckDeployment: true, CheckEvals: true,
				Deployments: []Deployment{dep("d", api, 10, StatusRunning, 30)}, BlockedEvals: []Eval{{ID: "e", Job: api}}},
		},
		{
			name: "a job the deployment filter leaves out does not count",
			view: PoolView{Pool: "default", Jobs: jobs, DeploymentJobs: map[JobKey]bool{web: true}, CheckDeployment: true,
				Deployments: []Deployment{dep("d", api, 10, StatusRunning, 30)}},
		},
		{
			name: "deployments off",
			view: PoolView{Pool: "default", Jobs: jobs, DeploymentJobs: both,
				Deployments: []Deployment{dep("d", api, 10, StatusRunning, 30)}},
		},
		{
			name: "blocked evaluations hold",
			view: PoolView{Pool: "default", Jobs: jobs, DeploymentJobs: both, CheckEvals: true,
				BlockedEvals: []Eval{{ID: "1", Job: web}, {ID: "2", Job: api}, {ID: "3", Job: web}}},
			want: ByBlockedEvals, contains: "pool default: 3 evaluations are blocked (job api, web)",
		},
		{
			name: "one blocked evaluation",
			view: PoolView{Pool: "default", Jobs: jobs, CheckEvals: true, BlockedEvals: []Eval{{ID: "1", Job: web}}},
			want: ByBlockedEvals, contains: "1 evaluation is blocked (job web)",
		},
		{
			name: "a system job's blocked evaluation does not hold its pool",
			view: PoolView{Pool: "default", Jobs: jobs, CheckEvals: true,
				BlockedEvals: []Eval{{ID: "1", Job: web, Type: "system", NodeID: "node-1"}}},
		},
		{
			name: "nor does a sysbatch job's",
			view: PoolView{Pool: "default", Jobs: jobs, CheckEvals: true,
				BlockedEvals: []Eval{{ID: "1", Job: web, Type: "sysbatch", NodeID: "node-1"}, {ID: "2", Job: api, Type: "system", NodeID: "node-2"}}},
		},
		{
			name: "a service job's evaluation beside a system job's holds, and counts alone",
			view: PoolView{Pool: "default", Jobs: jobs, CheckEvals: true,
				BlockedEvals: []Eval{{ID: "1", Job: web, Type: "system", NodeID: "node-1"}, {ID: "2", Job: api, Type: "service"}}},
			want: ByBlockedEvals, contains: "pool default: 1 evaluation is blocked (job api)",
		},
		{
			name: "a batch job's evaluation holds",
			view: PoolView{Pool: "default", Jobs: jobs, CheckEvals: true, BlockedEvals: []Eval{{ID: "1", Job: web, Type: "batch"}}},
			want: ByBlockedEvals, contains: "1 evaluation is blocked (job web)",
		},
		{
			name: "blocked evaluations off",
			view: PoolView{Pool: "default", Jobs: jobs, BlockedEvals: []Eval{{ID: "1", Job: web}}},
		},
		{
			name: "a deployment is named before blocked evaluations",
			view: PoolView{Pool: "default", Jobs: jobs, DeploymentJobs: both, CheckDeployment: true, CheckEvals: true,
				Deployments: []Deployment{dep("d", web, 20, StatusPending, 30)}, BlockedEvals: []Eval{{ID: "1", Job: web}}},
			want: ByDeployment, contains: "job web is pending",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PoolHold(tt.view)
			if got.Kind != tt.want || !strings.Contains(got.Detail, tt.contains) {
				t.Fatalf("PoolHold = %+v, want kind %d with %q", got, tt.want, tt.contains)
			}
			if tt.want == None && got.Detail != "" {
				t.Fatalf("no hold, but a detail: %q", got.Detail)
			}
		})
	}
}

func TestEvalHoldsPool(t *testing.T) {
	tests := []struct {
		name string
		eval Eval
		want bool
	}{
		{"a service job's", Eval{Type: "service"}, true},
		{"a batch job's", Eval{Type: "batch"}, true},
		{"a system job's, about its node", Eval{Type: "system", NodeID: "node-1"}, false},
		{"a sysbatch job's, about its node", Eval{Type: "sysbatch", NodeID: "node-1"}, false},
		// The system scheduler always names the node; without it, the job's
		// allocations still never move: it holds nothing either.
		{"a system job's without a node", Eval{Type: "system"}, false},
		{"of no type: holds (fail closed)", Eval{}, true},
		{"of a type rollboot does not know: holds", Eval{Type: "some-new-type", NodeID: "node-1"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.eval.HoldsPool(); got != tt.want {
				t.Errorf("HoldsPool(%+v) = %v, want %v", tt.eval, got, tt.want)
			}
		})
	}
}

func TestCheckFilter(t *testing.T) {
	if err := CheckFilter(`Meta.rollboot_block == "true"`); err != nil {
		t.Fatal(err)
	}
	if err := CheckFilter(`Meta.rollboot_block ==`); err == nil {
		t.Fatal("a malformed filter passed")
	}
}
