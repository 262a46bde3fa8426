package deploytest

import (
	"slices"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

const coordTemplate = "rollboot-coordinator.nomad.tpl"

// The pack's coordinator template renders deploy/nomad/rollboot-coordinator.nomad.hcl,
// attribute for attribute, with its telemetry (a port, a Nomad service, the
// listener) on by default; each choice changes exactly what it names.
func TestPackRendersTheCoordinatorJob(t *testing.T) {
	deploy := flattenJob(t, "rollboot-coordinator.nomad.hcl", read(t, deployPath("nomad", "rollboot-coordinator.nomad.hcl")), map[string]cty.Value{
		"version": cty.StringVal(packVersion), "release_url": cty.StringVal(packReleaseURL),
		"datacenters": cty.ListVal([]cty.Value{cty.StringVal("*")}),
	})
	const group = "job.rollboot-coordinator/group.coordinator"
	const task = group + "/task.rollboot"
	for _, tt := range []struct {
		name      string
		overrides map[string]any
		wantDiff  []string
	}{
		{"the defaults are the job file", map[string]any{"version": packVersion, "release_url": packReleaseURL}, nil},
		{"no telemetry: no port, no service, no listener", map[string]any{"version": packVersion, "release_url": packReleaseURL, "coordinator_telemetry": false}, []string{
			group + "/service[0]/name", group + "/service[0]/port", group + "/service[0]/provider",
			group + "/service[0]/tags", group + "/service[0]/check[0]/interval", group + "/service[0]/check[0]/path",
			group + "/service[0]/check[0]/timeout", group + "/service[0]/check[0]/type", task + "/template.local/rollboot.hcl/data",
		}},
		{"three instances", map[string]any{"version": packVersion, "release_url": packReleaseURL, "coordinator_count": int64(3)}, []string{group + "/count"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := renderPackFile(t, coordTemplate, tt.overrides)
			if err != nil {
				t.Fatal(err)
			}
			got := flattenJob(t, "pack", []byte(out), nil)
			slices.Sort(tt.wantDiff)
			if d := diffKeys(got, deploy); !slices.Equal(d, tt.wantDiff) {
				t.Errorf("differs from the job file in:\n  %s\nwant:\n  %s\nrendered:\n%s", strings.Join(d, "\n  "), strings.Join(tt.wantDiff, "\n  "), out)
			}
		})
	}
}

// What the coordinator's choices render to: the docker driver runs the image
// unprivileged; the configuration never serves FleetLock and listens on the
// service's port; coordinator_enabled = false renders no job; a coordinator in
// the state namespace is refused.
func TestPackCoordinatorChoices(t *testing.T) {
	docker, err := renderPackFile(t, coordTemplate, map[string]any{"driver": "docker", "image": "registry.example.com/rollboot:" + packVersion})
	if err != nil {
		t.Fatal(err)
	}
	flat := flattenJob(t, "pack", []byte(docker), nil)
	const task = "job.rollboot-coordinator/group.coordinator/task.rollboot"
	if flat[task+"/driver"] != `"docker"` || flat[task+"/config[0]/args"] != `["coordinator","--config","/local/rollboot.hcl","--log-json"]` {
		t.Errorf("docker: driver %s, args %s", flat[task+"/driver"], flat[task+"/config[0]/args"])
	}
	if _, ok := flat[task+"/config[0]/privileged"]; ok {
		t.Error("docker: the coordinator needs no privileges")
	}
	for _, overrides := range []map[string]any{
		{"version": packVersion, "release_url": packReleaseURL},
		{"version": packVersion, "release_url": packReleaseURL, "token_source": "variable"},
		{"driver": "docker", "image": "registry.example.com/rollboot:" + packVersion, "token_source": "vault"},
	} {
		out, err := renderPackFile(t, coordTemplate, overrides)
		if err != nil {
			t.Fatalf("%v: %v", overrides, err)
		}
		for _, cfg := range packConfigs(t, out) {
			if cfg.FleetLock.Enabled || cfg.Coordinator.Enabled {
				t.Errorf("%v: fleetlock %v, coordinator.enabled %v", overrides, cfg.FleetLock.Enabled, cfg.Coordinator.Enabled)
			}
			if cfg.Telemetry.Listen != taskEnv["NOMAD_ADDR_http"] {
				t.Errorf("%v: telemetry listen %q, want the service port's address", overrides, cfg.Telemetry.Listen)
			}
		}
	}
	if out, err := renderPackFile(t, coordTemplate, map[string]any{"coordinator_enabled": false}); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("coordinator_enabled = false renders %q (err %v), want nothing", out, err)
	}
	if _, err := renderPackFile(t, coordTemplate, map[string]any{"version": packVersion, "release_url": packReleaseURL, "coordinator_namespace": "default"}); err == nil ||
		!strings.Contains(err.Error(), "coordinator_namespace") {
		t.Errorf("a coordinator in the state namespace: err %v, want a refusal", err)
	}
	if _, err := renderPackFile(t, coordTemplate, map[string]any{"version": packVersion}); err == nil ||
		!strings.Contains(err.Error(), "needs release_url") {
		t.Errorf("raw_exec without a release_url: err %v, want a refusal", err)
	}
}
