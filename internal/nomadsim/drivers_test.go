package nomadsim

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// A client that leaves raw_exec disabled reports it undetected and gets no
// allocation of a raw_exec job, while a job that names no driver still goes
// there; the job's task carries its driver; a reboot keeps the driver off.
func TestRawExecDisabledClientGetsNoRawExecAllocation(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 3, NoRawExec: []string{"client-2"}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, j := range []JobSpec{{ID: "rollboot", Type: api.JobTypeSystem, Driver: "raw_exec"}, {ID: "node-exporter", Type: api.JobTypeSystem}} {
		if err := s.AddJob(j); err != nil {
			t.Fatal(err)
		}
	}
	hostsOf := func(v *View, job string) []string {
		var out []string
		for _, h := range []string{"client-1", "client-2", "client-3"} {
			hh, _ := v.Host(h)
			for _, a := range v.Allocs(hh.NodeID) {
				if a.JobID == job && !allocTerminal(a) {
					out = append(out, h)
				}
			}
		}
		return out
	}
	if err := s.WaitFor(ctx, func(v *View) bool {
		return slices.Equal(hostsOf(v, "rollboot"), []string{"client-1", "client-3"}) &&
			len(hostsOf(v, "node-exporter")) == 3
	}); err != nil {
		t.Fatal(err)
	}
	nodes, _, err := c.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		d := n.Drivers["raw_exec"]
		if want := n.Name != "client-2"; d == nil || d.Detected != want || d.Healthy != want {
			t.Errorf("node %s: raw_exec %+v, want detected and healthy = %v", n.Name, d, want)
		}
	}
	job, _, err := c.Jobs().Info("rollboot", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(job.TaskGroups) != 1 || len(job.TaskGroups[0].Tasks) != 1 || job.TaskGroups[0].Tasks[0].Driver != "raw_exec" {
		t.Errorf("job's task groups %+v: want one task with driver raw_exec", job.TaskGroups)
	}
	n2, _ := s.Node("client-2")
	if _, ok := n2.Attributes["driver.raw_exec"]; ok {
		t.Errorf("client-2 has the attribute driver.raw_exec: a disabled driver sets none")
	}
	if !hasDriver(&api.Node{Attributes: map[string]string{"driver.docker": "1"}}, "docker") ||
		hasDriver(&api.Node{Attributes: map[string]string{"driver.docker": "0"}}, "docker") {
		t.Error("a node without driver info: the attribute decides")
	}
}

// GET /v1/job/:id reads the job with read-job in its namespace: 403 without
// it, 404 "job not found" for a job that does not exist, the job as
// registered with its ModifyIndex as index.
func TestJobRead(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1, ACL: true})
	if err := s.AddJob(JobSpec{ID: "rollboot", Type: api.JobTypeSystem, Driver: "raw_exec"}); err != nil {
		t.Fatal(err)
	}
	job, meta, err := c.Jobs().Info("rollboot", nil)
	if err != nil {
		t.Fatal(err)
	}
	if *job.ID != "rollboot" || *job.Type != api.JobTypeSystem || meta.LastIndex != *job.ModifyIndex {
		t.Errorf("job %s (%s) at index %d, want rollboot (system) at its ModifyIndex %d", *job.ID, *job.Type, meta.LastIndex, *job.ModifyIndex)
	}
	if _, _, err := c.Jobs().Info("nosuch", nil); err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "job not found") {
		t.Errorf("a job that does not exist: err = %v, want 404 job not found", err)
	}
	reader := s.CreateToken("nodes-only", vtParsePolicy(t, "node {\n  policy = \"read\"\n}\n"))
	rc := newClient(t, s.Address(), reader.SecretID)
	if _, _, err := rc.Jobs().Info("rollboot", nil); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("without read-job: err = %v, want 403", err)
	}
}
