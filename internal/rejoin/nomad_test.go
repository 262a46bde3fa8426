package rejoin

import (
	"reflect"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/api"
)

func TestNomadAllocs(t *testing.T) {
	yes := true
	tests := []struct {
		name  string
		alloc *api.Allocation
		want  Alloc
	}{
		{
			name:  "no job, no deployment status, no task states",
			alloc: &api.Allocation{Name: "web.web[0]", DesiredStatus: "run", ClientStatus: "pending"},
			want:  Alloc{Name: "web.web[0]", DesiredStatus: "run", ClientStatus: "pending"},
		},
		{
			name: "job type and deployment health",
			alloc: &api.Allocation{Name: "web.web[1]", DesiredStatus: "run", ClientStatus: "running",
				Job: &api.Job{Type: new(api.JobTypeService)}, DeploymentStatus: &api.AllocDeploymentStatus{Healthy: &yes}},
			want: Alloc{Name: "web.web[1]", JobType: api.JobTypeService, DesiredStatus: "run", ClientStatus: "running", Healthy: &yes},
		},
		{
			name: "the first failed task by name",
			alloc: &api.Allocation{Name: "db.db[0]", DesiredStatus: "run", ClientStatus: "failed", Job: &api.Job{},
				TaskStates: map[string]*api.TaskState{"c": {Failed: true}, "a": {}, "b": {Failed: true}, "0": nil}},
			want: Alloc{Name: "db.db[0]", DesiredStatus: "run", ClientStatus: "failed", FailedTask: "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NomadAllocs([]*api.Allocation{tt.alloc})
			if len(got) != 1 || !reflect.DeepEqual(got[0], tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	if got := NomadAllocs(nil); got == nil || len(got) != 0 {
		t.Errorf("no allocations: got %#v, want an empty list", got)
	}
}

func TestConsulChecks(t *testing.T) {
	got := ConsulChecks(consulapi.HealthChecks{
		{Node: "n1", CheckID: "serfHealth", Name: "Serf Health Status", Status: consulapi.HealthPassing},
		{Node: "n1", CheckID: "service:web", Name: "web alive", ServiceID: "web-1", ServiceName: "web", Status: consulapi.HealthCritical},
	})
	want := []Check{
		{Name: "Serf Health Status", Status: "passing"},
		{Name: "web alive", ServiceName: "web", Status: "critical"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}
