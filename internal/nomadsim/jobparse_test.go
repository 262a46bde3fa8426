package nomadsim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

func shippedJob(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nomad", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const releaseVars = `version = "v1.2.3"
release_url = "https://releases.example.com/rollboot"
`

// The shipped job files parse as Nomad's jobspec2 parses them: variables
// evaluated, runtime references left for the client, blocks decoded into the
// API's types.
func TestParseShippedJobs(t *testing.T) {
	_, c := newTestSim(t, Config{Clients: 1, ACL: true})
	job, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: shippedJob(t, "rollboot.nomad.hcl"), Variables: releaseVars})
	if err != nil {
		t.Fatal(err)
	}
	if *job.ID != "rollboot" || *job.Type != "system" || *job.NodePool != "all" || *job.Priority != 80 || job.Datacenters[0] != "*" {
		t.Errorf("job %s type %s pool %s priority %d dcs %v", *job.ID, *job.Type, *job.NodePool, *job.Priority, job.Datacenters)
	}
	if len(job.TaskGroups) != 1 || len(job.TaskGroups[0].Tasks) != 1 {
		t.Fatalf("groups %+v", job.TaskGroups)
	}
	tg := job.TaskGroups[0]
	task := tg.Tasks[0]
	if *tg.Name != "agent" || task.Name != "rollboot" || task.Driver != "raw_exec" || *tg.RestartPolicy.Mode != "delay" || *tg.RestartPolicy.Delay != 15*time.Second {
		t.Errorf("group %s task %s driver %s restart %+v", *tg.Name, task.Name, task.Driver, tg.RestartPolicy)
	}
	if got := *task.Artifacts[0].GetterSource; got != "https://releases.example.com/rollboot/v1.2.3/rollboot_v1.2.3_linux_${attr.cpu.arch}.tar.gz" {
		t.Errorf("artifact source %s: want var evaluated and ${attr.cpu.arch} left for the client", got)
	}
	if got := task.Artifacts[0].GetterOptions["checksum"]; got != "file:https://releases.example.com/rollboot/v1.2.3/SHA256SUMS" {
		t.Errorf("artifact checksum %q", got)
	}
	if args, _ := task.Config["args"].([]any); len(args) < 3 || args[2] != "${NOMAD_TASK_DIR}/rollboot.hcl" {
		t.Errorf("config args %v", task.Config["args"])
	}
	if task.Env["NOMAD_ADDR"] != "http://127.0.0.1:4646" || *task.KillTimeout != 30*time.Second || task.KillSignal != "SIGTERM" {
		t.Errorf("env %v kill %v %s", task.Env, task.KillTimeout, task.KillSignal)
	}
	if task.Identity == nil || !task.Identity.Env || len(task.Identities) != 0 {
		t.Errorf("identity %+v, identities %v: want the default identity in Task.Identity (normalizeJob)", task.Identity, task.Identities)
	}
	if len(job.Constraints) != 1 || job.Constraints[0].LTarget != "${attr.kernel.name}" || job.Constraints[0].Operand != "=" {
		t.Errorf("constraints %+v: want the kernel constraint with the default operator", job.Constraints)
	}
	if len(task.Templates) == 0 || !strings.Contains(*task.Templates[len(task.Templates)-1].EmbeddedTmpl, `{{ env "node.unique.name" }}`) {
		t.Errorf("templates %+v", task.Templates)
	}

	docker, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: shippedJob(t, "rollboot-docker.nomad.hcl"), Variables: `image = "registry.example.com/rollboot:v1.2.3"`})
	if err != nil {
		t.Fatal(err)
	}
	dc := docker.TaskGroups[0].Tasks[0].Config
	if dc["privileged"] != true || dc["image"] != "registry.example.com/rollboot:v1.2.3" {
		t.Errorf("docker config %v", dc)
	}
	if mounts, _ := dc["mount"].([]any); len(mounts) != 1 || mounts[0].(map[string]any)["target"] != "/host/run" {
		t.Errorf("docker mount blocks %v: want a list of objects", dc["mount"])
	}

	coord, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: shippedJob(t, "rollboot-coordinator.nomad.hcl"), Variables: releaseVars})
	if err != nil {
		t.Fatal(err)
	}
	if *coord.Namespace != "rollboot" || *coord.TaskGroups[0].Count != 2 || *coord.TaskGroups[0].Migrate.MaxParallel != 1 {
		t.Errorf("coordinator: namespace %v count %v", coord.Namespace, coord.TaskGroups[0].Count)
	}
}

// Parse errors as jobspec2 reports them.
func TestParseJobErrors(t *testing.T) {
	_, c := newTestSim(t, Config{Clients: 1})
	for _, tt := range []struct {
		name, hcl, vars, want string
	}{
		{"unset variable", shippedJob(t, "rollboot.nomad.hcl"), `version = "v1"`, `Unset variable "release_url"`},
		{"undeclared variable", shippedJob(t, "rollboot.nomad.hcl"), releaseVars + `nosuch = 1`, `Undefined variable "nosuch"`},
		{"empty", "", "", "Job spec is empty"},
		{"no job", `variable "x" {}`, "", "Missing job block"},
		{"unknown argument", `job "j" { colour = "red" }`, "", `Unsupported argument "colour"`},
		{"unknown block", "job \"j\" {\n  group \"g\" {\n    widget {\n    }\n  }\n}\n", "", `Unsupported block type "widget"`},
		{"bad type", `variable "n" { type = number }
job "j" { priority = var.n }`, `n = "many"`, `variable "n"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: tt.hcl, Variables: tt.vars})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "400") {
				t.Errorf("err %v, want 400 with %q", err, tt.want)
			}
		})
	}
}

// Registering the parsed jobs schedules them; deregistering with purge
// removes them; a namespace must exist before its jobs and cannot be deleted
// while it holds any.
func TestRegisterAndPurgeJobs(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 3, ACL: true})
	for _, h := range []string{"client-1", "client-2", "client-3"} {
		if err := s.SetNodeMeta(h, map[string]string{"rollboot_coordinator": "true"}); err != nil {
			t.Fatal(err)
		}
	}
	agent, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: shippedJob(t, "rollboot.nomad.hcl"), Variables: releaseVars})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Register(agent, nil); err != nil {
		t.Fatal(err)
	}
	coord, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: shippedJob(t, "rollboot-coordinator.nomad.hcl"), Variables: releaseVars})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Jobs().Register(coord, nil)
	wantCode(t, "register in a namespace that does not exist", err, `nonexistent namespace "rollboot"`)
	if _, err := c.Namespaces().Register(&api.Namespace{Name: "rollboot", Description: "rollboot coordinator"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Register(coord, nil); err != nil {
		t.Fatal(err)
	}
	// The system job on every client, the coordinator's two on distinct hosts.
	if err := s.WaitFor(testCtx(t), func(v *View) bool {
		n := map[string]int{}
		hosts := map[string]bool{}
		for _, sa := range v.s.cluster.allocs {
			if sa.a.ClientStatus == api.AllocClientStatusRunning {
				n[sa.a.JobID]++
				if sa.a.JobID == "rollboot-coordinator" {
					hosts[sa.a.NodeName] = true
				}
			}
		}
		return n["rollboot"] == 3 && n["rollboot-coordinator"] == 2 && len(hosts) == 2
	}); err != nil {
		t.Fatalf("allocations not running: %v", err)
	}
	// The shipped job's identity { env = true }, through parse and register.
	ids := identities(t, s, "default", "rollboot")
	if id := ids["client-1"]; len(ids) != 3 || id.Task != "rollboot" || id.Env["NOMAD_TOKEN"] != id.Token || id.Token == "" {
		t.Errorf("%d agent identities; client-1's task %q, NOMAD_TOKEN set %v: want the task's identity in its environment",
			len(ids), id.Task, id.Env["NOMAD_TOKEN"] != "")
	}
	got, _, err := c.Jobs().Info("rollboot-coordinator", &api.QueryOptions{Namespace: "rollboot"})
	if err != nil || *got.Type != "service" {
		t.Fatalf("job info: %+v, %v", got, err)
	}
	_, _, err = c.Jobs().Info("nosuch", nil)
	wantCode(t, "info of a missing job", err, "404")

	_, err = c.Namespaces().Delete("rollboot", nil)
	wantCode(t, "delete a namespace with a job", err, "non-terminal jobs")
	if _, _, err := c.Jobs().Deregister("rollboot-coordinator", true, &api.WriteOptions{Namespace: "rollboot"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Deregister("rollboot", true, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Jobs().Deregister("nosuch", true, nil); err != nil {
		t.Errorf("deregister a missing job: %v, want no error", err)
	}
	list, _, err := c.Jobs().List(&api.QueryOptions{Namespace: "*"})
	if err != nil || len(list) != 0 {
		t.Errorf("jobs after purge: %+v, %v", list, err)
	}
	if err := s.WaitFor(testCtx(t), func(v *View) bool { return v.s.namespaceInUseLocked("rollboot") == "" }); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Namespaces().Delete("rollboot", nil); err != nil {
		t.Errorf("delete the emptied namespace: %v", err)
	}
	nss, _, err := c.Namespaces().List(nil)
	if err != nil || len(nss) != 1 || nss[0].Name != "default" {
		t.Errorf("namespaces %+v, %v", nss, err)
	}
	_, err = c.Namespaces().Delete("default", nil)
	wantCode(t, "delete default", err, "can not delete default namespace")
}
