package deploytest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/rollboot/rollboot/internal/config"
)

// The Nomad Pack in packs/rollboot is checked without the nomad-pack CLI
// (which is not in the Go module proxy): this file renders its templates the
// way nomad-pack does (Go text/template with [[ ]] delimiters, the pack's
// variables through `var`), with the few Sprig helpers the templates use, then
// parses the output as HCL and compares it with the job files in deploy/nomad.

func init() {
	// The pack's metrics listener: the group's static port on the host.
	taskEnv["NOMAD_ADDR_metrics"] = "10.0.0.7:9464"
}

func packPath(parts ...string) string {
	return filepath.Join(append([]string{root, "packs", "rollboot"}, parts...)...)
}

// packDefaults reads the variables and their defaults from variables.hcl.
func packDefaults(t *testing.T) map[string]any {
	t.Helper()
	path := packPath("variables.hcl")
	f, diags := hclsyntax.ParseConfig(read(t, path), path, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	vars := map[string]any{}
	for _, b := range f.Body.(*hclsyntax.Body).Blocks {
		if b.Type != "variable" || len(b.Labels) != 1 {
			t.Fatalf("%s: want only variable \"name\" blocks", b.DefRange())
		}
		for _, want := range []string{"description", "type", "default"} {
			if _, ok := b.Body.Attributes[want]; !ok {
				t.Errorf("%s: variable %q has no %s", b.DefRange(), b.Labels[0], want)
			}
		}
		if a, ok := b.Body.Attributes["default"]; ok {
			v, diags := a.Expr.Value(nil)
			if diags.HasErrors() {
				t.Fatal(diags)
			}
			vars[b.Labels[0]] = goValue(v)
		}
	}
	return vars
}

func goValue(v cty.Value) any {
	switch {
	case v.Type() == cty.String:
		return v.AsString()
	case v.Type() == cty.Bool:
		return v.True()
	case v.Type() == cty.Number:
		i, _ := v.AsBigFloat().Int64()
		return i
	default:
		var out []any
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = append(out, goValue(e))
		}
		return out
	}
}

// renderPack renders the pack's job template with the defaults and overrides,
// as `nomad-pack render packs/rollboot -var k=v` would.
func renderPack(t *testing.T, overrides map[string]any) (string, error) {
	t.Helper()
	return renderPackFile(t, "rollboot.nomad.tpl", overrides)
}

// renderPackFile renders one of the pack's templates (templates/file).
func renderPackFile(t *testing.T, file string, overrides map[string]any) (string, error) {
	t.Helper()
	vars := packDefaults(t)
	for k, v := range overrides {
		if _, ok := vars[k]; !ok {
			t.Fatalf("no pack variable %q", k)
		}
		vars[k] = v
	}
	funcs := template.FuncMap{
		"var": func(name string, _ any) (any, error) {
			v, ok := vars[name]
			if !ok {
				return nil, fmt.Errorf("var %q: not in variables.hcl", name)
			}
			return v, nil
		},
		"toJson": func(v any) (string, error) {
			b, err := json.Marshal(v)
			return string(b), err
		},
		"fail": func(msg string) (string, error) { return "", errors.New(msg) },
	}
	path := packPath("templates", file)
	tmpl, err := template.New(filepath.Base(path)).Delims("[[", "]]").Funcs(funcs).Option("missingkey=error").Parse(string(read(t, path)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out bytes.Buffer
	err = tmpl.Execute(&out, nil)
	return out.String(), err
}

// flattenJob maps every attribute of a job file's job block to its value as
// JSON, keyed by its block path (job.rollboot/group.agent/task.rollboot/config/args).
// Variables are set from vars; Nomad's runtime references (${attr...},
// ${NOMAD_TASK_DIR}) stay as written, as Nomad's own parser keeps them. The
// config template's data is replaced by the configuration it renders to, as
// rollboot loads it; the token template's by its text.
func flattenJob(t *testing.T, name string, src []byte, vars map[string]cty.Value) map[string]string {
	t.Helper()
	f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("%s does not parse as HCL: %v\n%s", name, diags, src)
	}
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{
		"var": cty.ObjectVal(vars),
		"attr": cty.ObjectVal(map[string]cty.Value{
			"kernel": cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal("${attr.kernel.name}")}),
			"cpu":    cty.ObjectVal(map[string]cty.Value{"arch": cty.StringVal("${attr.cpu.arch}")}),
		}),
		"NOMAD_TASK_DIR": cty.StringVal("${NOMAD_TASK_DIR}"),
		"meta":           cty.ObjectVal(map[string]cty.Value{"rollboot_coordinator": cty.StringVal("${meta.rollboot_coordinator}")}),
	}}
	out := map[string]string{}
	var walk func(prefix string, b *hclsyntax.Body)
	walk = func(prefix string, b *hclsyntax.Body) {
		for n, a := range b.Attributes {
			val, diags := a.Expr.Value(ctx)
			if diags.HasErrors() {
				t.Fatalf("%s: %v", a.SrcRange, diags)
			}
			if val.Type() == cty.Number {
				val = cty.NumberVal(new(big.Float).Set(val.AsBigFloat()).SetPrec(64))
			}
			js, err := ctyjson.Marshal(val, val.Type())
			if err != nil {
				t.Fatal(err)
			}
			out[prefix+"/"+n] = string(js)
		}
		seen := map[string]int{}
		for _, blk := range b.Blocks {
			key := blk.Type
			if len(blk.Labels) > 0 {
				key += "." + strings.Join(blk.Labels, ".")
			} else if blk.Type == "template" {
				d, _ := blk.Body.Attributes["destination"].Expr.Value(nil)
				key += "." + d.AsString()
			} else {
				key += fmt.Sprintf("[%d]", seen[blk.Type])
				seen[blk.Type]++
			}
			walk(prefix+"/"+key, blk.Body)
		}
	}
	for _, blk := range f.Body.(*hclsyntax.Body).Blocks {
		if blk.Type == "job" {
			walk("job."+blk.Labels[0], blk.Body)
		}
	}
	for k, data := range out {
		if strings.HasSuffix(k, ".hcl/data") {
			var s string
			_ = json.Unmarshal([]byte(data), &s)
			cfg, err := config.LoadBytes([]byte(render(t, k, s, nil)), "rollboot.hcl")
			if err != nil {
				t.Fatalf("%s: %s: %v", name, k, err)
			}
			out[k] = cfg.String()
		}
	}
	return out
}

// diffKeys lists the keys whose values differ between a and b, sorted.
func diffKeys(a, b map[string]string) []string {
	var d []string
	for k := range a {
		if av, ok := b[k]; !ok || av != a[k] {
			d = append(d, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			d = append(d, k)
		}
	}
	slices.Sort(d)
	return d
}

func mustRenderPack(t *testing.T, overrides map[string]any) string {
	t.Helper()
	out, err := renderPack(t, overrides)
	if err != nil {
		t.Fatalf("render %v: %v", overrides, err)
	}
	return out
}

// packVersion and packReleaseURL stand for the operator's release and the
// place where they host it: the pack has defaults for neither.
const (
	packVersion    = "v1.2.3"
	packReleaseURL = "https://releases.example.com/rollboot"
)

// The pack's two drivers render the two job files of deploy/nomad, attribute
// for attribute, and each operator choice changes exactly what it should.
func TestPackRendersTheJobFiles(t *testing.T) {
	// The job files' variables, set as the pack's defaults set them.
	dcs := cty.ListVal([]cty.Value{cty.StringVal("*")})
	deployRaw := flattenJob(t, "rollboot.nomad.hcl", read(t, deployPath("nomad", "rollboot.nomad.hcl")), map[string]cty.Value{
		"version": cty.StringVal(packVersion), "release_url": cty.StringVal(packReleaseURL), "datacenters": dcs,
	})
	deployDocker := flattenJob(t, "rollboot-docker.nomad.hcl", read(t, deployPath("nomad", "rollboot-docker.nomad.hcl")), map[string]cty.Value{
		"image": cty.StringVal("registry.example.com/rollboot:" + packVersion), "datacenters": dcs,
	})
	const job = "job.rollboot"
	const task = job + "/group.agent/task.rollboot"
	const tokenTmpl = task + "/template.secrets/rollboot.env"
	tokenKeys := []string{tokenTmpl + "/change_mode", tokenTmpl + "/data", tokenTmpl + "/destination", tokenTmpl + "/env", tokenTmpl + "/perms", tokenTmpl + "/splay"}

	for _, tt := range []struct {
		name      string
		overrides map[string]any
		against   map[string]string
		wantDiff  []string // keys that differ from the job file
	}{
		{"raw_exec is rollboot.nomad.hcl", map[string]any{"version": packVersion, "release_url": packReleaseURL}, deployRaw, nil},
		{"docker is rollboot-docker.nomad.hcl", map[string]any{"driver": "docker", "image": "registry.example.com/rollboot:" + packVersion}, deployDocker, nil},
		{"vault token: a token template that reads Vault instead of the identity", map[string]any{"version": packVersion, "release_url": packReleaseURL, "token_source": "vault", "vault_role": "rollboot-agent"},
			deployRaw, append([]string{task + "/identity[0]/env", task + "/vault[0]/change_mode", task + "/vault[0]/role"}, tokenKeys...)},
		{"variable token: a token template instead of the identity", map[string]any{"version": packVersion, "release_url": packReleaseURL, "token_source": "variable"},
			deployRaw, append([]string{task + "/identity[0]/env"}, tokenKeys...)},
		{"telemetry", map[string]any{"version": packVersion, "release_url": packReleaseURL, "telemetry_enabled": true},
			deployRaw, []string{
				job + "/group.agent/network[0]/port.metrics/static",
				job + "/group.agent/service[0]/name", job + "/group.agent/service[0]/port", job + "/group.agent/service[0]/provider", job + "/group.agent/service[0]/tags",
				task + "/template.local/rollboot.hcl/data",
			}},
		{"job name and datacenters", map[string]any{"version": packVersion, "release_url": packReleaseURL, "job_name": "reboots", "datacenters": []any{"dc1", "dc2"}}, nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := mustRenderPack(t, tt.overrides)
			got := flattenJob(t, "pack", []byte(out), nil)
			if tt.against == nil {
				return
			}
			slices.Sort(tt.wantDiff)
			if d := diffKeys(got, tt.against); !slices.Equal(d, tt.wantDiff) {
				t.Errorf("differs from the job file in:\n  %s\nwant:\n  %s\nrendered:\n%s", strings.Join(d, "\n  "), strings.Join(tt.wantDiff, "\n  "), out)
			}
		})
	}
}

// What the choices render to, beyond "differs from the job file".
func TestPackChoices(t *testing.T) {
	vault := flattenJob(t, "pack", []byte(mustRenderPack(t, map[string]any{"version": packVersion, "release_url": packReleaseURL, "token_source": "vault"})), nil)
	data := vault["job.rollboot/group.agent/task.rollboot/template.secrets/rollboot.env/data"]
	if !strings.Contains(data, `with secret \"nomad/creds/rollboot-agent\"`) || !strings.Contains(data, "NOMAD_TOKEN={{ .Data.secret_id }}") || strings.Contains(data, "nomadVar") {
		t.Errorf("vault token template: %s", data)
	}
	if _, ok := vault["job.rollboot/group.agent/task.rollboot/vault[0]/role"]; ok {
		t.Error("vault_role empty, yet the vault block names a role")
	}

	wi := flattenJob(t, "pack", []byte(mustRenderPack(t, map[string]any{"version": packVersion, "release_url": packReleaseURL, "token_source": "workload_identity"})), nil)
	if wi["job.rollboot/group.agent/task.rollboot/identity[0]/env"] != "true" {
		t.Error("workload identity: no identity { env = true }")
	}

	named := flattenJob(t, "pack", []byte(mustRenderPack(t, map[string]any{"version": packVersion, "release_url": packReleaseURL, "token_source": "variable", "job_name": "reboots", "datacenters": []any{"dc1", "dc2"}})), nil)
	if named["job.reboots/datacenters"] != `["dc1","dc2"]` {
		t.Errorf("datacenters %s", named["job.reboots/datacenters"])
	}
	if d := named["job.reboots/group.agent/task.rollboot/template.secrets/rollboot.env/data"]; !strings.Contains(d, `nomadVar \"nomad/jobs/reboots\"`) {
		t.Errorf("the token variable must follow the job name (the workload identity reads nomad/jobs/<job>): %s", d)
	}

	tm := mustRenderPack(t, map[string]any{"version": packVersion, "release_url": packReleaseURL, "telemetry_enabled": true, "telemetry_port": int64(9500)})
	flat := flattenJob(t, "pack", []byte(tm), nil)
	if flat["job.rollboot/group.agent/network[0]/port.metrics/static"] != "9500" {
		t.Errorf("metrics port: %s", flat["job.rollboot/group.agent/network[0]/port.metrics/static"])
	}
	if flat["job.rollboot/group.agent/service[0]/port"] != `"metrics"` || flat["job.rollboot/group.agent/service[0]/tags"] != `["metrics","http"]` {
		t.Errorf("metrics service port %s, tags %s", flat["job.rollboot/group.agent/service[0]/port"], flat["job.rollboot/group.agent/service[0]/tags"])
	}
	for _, cfg := range packConfigs(t, tm) {
		if cfg.Telemetry.Listen != taskEnv["NOMAD_ADDR_metrics"] {
			t.Errorf("telemetry listen %q, want the metrics port's address", cfg.Telemetry.Listen)
		}
	}
}

// packConfigs loads the rollboot configurations a rendered job holds.
func packConfigs(t *testing.T, job string) []*config.Compiled {
	t.Helper()
	var out []*config.Compiled
	_, tmpls := parseJobSource(t, "pack", []byte(job))
	for _, jt := range tmpls {
		if !strings.HasSuffix(jt.destination, ".hcl") {
			continue
		}
		cfg, err := config.LoadBytes([]byte(render(t, "pack", jt.data, nil)), "rollboot.hcl")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, cfg)
	}
	if len(out) == 0 {
		t.Fatal("the rendered job holds no rollboot configuration")
	}
	return out
}

// The agents do not serve FleetLock: the server writes requests and host
// records for other hosts, which the agents' token may not (rollboot-agent can
// write only host records and read plans). The pack offers no FleetLock
// variable, and no choice renders a fleetlock block; FleetLock runs in the
// coordinator job (packs/rollboot/README.md).
func TestPackServesNoFleetLock(t *testing.T) {
	for name := range packDefaults(t) {
		if strings.Contains(name, "fleetlock") {
			t.Errorf("pack variable %q: the agents' job cannot serve FleetLock", name)
		}
	}
	for _, overrides := range []map[string]any{
		{"version": packVersion, "release_url": packReleaseURL},
		{"version": packVersion, "release_url": packReleaseURL, "telemetry_enabled": true},
		{"driver": "docker", "image": "registry.example.com/rollboot:" + packVersion, "token_source": "vault"},
		{"version": packVersion, "release_url": packReleaseURL, "token_source": "workload_identity"},
	} {
		for _, cfg := range packConfigs(t, mustRenderPack(t, overrides)) {
			if cfg.FleetLock.Enabled {
				t.Errorf("%v: the agents' configuration enables FleetLock", overrides)
			}
		}
	}
}

// Choices that cannot work are refused at render time, with a message.
func TestPackRefuses(t *testing.T) {
	for _, tt := range []struct {
		name      string
		overrides map[string]any
		want      string
	}{
		{"raw_exec without a version", map[string]any{"release_url": packReleaseURL}, "needs version"},
		{"raw_exec without a release_url", map[string]any{"version": packVersion}, "needs release_url"},
		{"docker without an image", map[string]any{"driver": "docker"}, "needs image"},
		{"unknown driver", map[string]any{"driver": "exec", "version": packVersion, "release_url": packReleaseURL}, `driver "exec"`},
		{"unknown token source", map[string]any{"version": packVersion, "release_url": packReleaseURL, "token_source": "file"}, `token_source "file"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, err := renderPack(t, tt.overrides)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want one saying %q; rendered:\n%s", err, tt.want, out)
			}
		})
	}
}

// The pack has what nomad-pack loads: metadata, variables, a README, templates.
func TestPackLayout(t *testing.T) {
	for _, f := range []string{"metadata.hcl", "variables.hcl", "README.md", filepath.Join("templates", "rollboot.nomad.tpl"), filepath.Join("templates", coordTemplate)} {
		if _, err := os.Stat(packPath(f)); err != nil {
			t.Error(err)
		}
	}
	path := packPath("metadata.hcl")
	f, diags := hclsyntax.ParseConfig(read(t, path), path, hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	pack := block(t, f.Body.(*hclsyntax.Body), "pack")
	if literal(t, pack, "name") != "rollboot" {
		t.Errorf("pack name %q", literal(t, pack, "name"))
	}
	block(t, f.Body.(*hclsyntax.Body), "app")
}
