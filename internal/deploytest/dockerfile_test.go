package deploytest

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// dockerInstr is one instruction of a Dockerfile, continuation lines joined.
type dockerInstr struct {
	line int
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// parseDockerfile splits a Dockerfile into instructions: enough to check what
// the tests below check, not a full parser (the linter in .ci/run is that).
func parseDockerfile(t *testing.T, src string) []dockerInstr {
	t.Helper()
	var out []dockerInstr
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, dockerInstr{start, strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	if cur.Len() != 0 {
		t.Fatalf("Dockerfile:%d: continuation at the end of the file", start)
	}
	return out
}

// dockerArgs substitutes ${NAME} and $NAME with the values of args.
func dockerArgs(s string, args map[string]string) string {
	return regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`).ReplaceAllStringFunc(s, func(m string) string {
		name := strings.Trim(m, "${}")
		if v, ok := args[name]; ok {
			return v
		}
		return m
	})
}

// The image: base images pinned, non-root by default, the binary from the
// release archives checked against SHA256SUMS, an exec-form entrypoint.
func TestDockerfile(t *testing.T) {
	instrs := parseDockerfile(t, string(read(t, filepath.Join(root, "Dockerfile"))))
	globals := map[string]string{}
	var stages int
	var user, entrypoint string
	var checked bool
	for _, in := range instrs {
		switch in.cmd {
		case "ARG":
			if stages == 0 {
				if name, val, ok := strings.Cut(in.args, "="); ok {
					globals[name] = val
				}
			}
		case "FROM":
			stages++
			user = "" // USER applies to its stage only
			image, _, _ := strings.Cut(dockerArgs(in.args, globals), " ")
			_, tag, hasTag := strings.Cut(image[strings.LastIndex(image, "/")+1:], ":")
			if !strings.Contains(image, "@sha256:") && (!hasTag || tag == "latest") {
				t.Errorf("Dockerfile:%d: base image %q is not pinned by a tag or a digest", in.line, image)
			}
		case "ADD":
			if strings.Contains(in.args, "://") {
				t.Errorf("Dockerfile:%d: ADD of a URL: download nothing at build time (%s)", in.line, in.args)
			}
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "RUN":
			checked = checked || strings.Contains(in.args, "sha256sum -c")
		}
	}
	if stages < 2 {
		t.Errorf("%d stages: want one that unpacks and checks the archive, and the image", stages)
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("the image runs as %q: want an unprivileged user by default", user)
	}
	var ep []string
	if err := json.Unmarshal([]byte(entrypoint), &ep); err != nil || len(ep) != 1 || ep[0] != "/usr/local/bin/rollboot" {
		t.Errorf("ENTRYPOINT %s: want the exec form [\"/usr/local/bin/rollboot\"]", entrypoint)
	}
	if !checked {
		t.Error("no RUN checks the archive against SHA256SUMS (sha256sum -c)")
	}
	ignore := string(read(t, filepath.Join(root, ".dockerignore")))
	for _, want := range []string{"!dist/SHA256SUMS", "!dist/*.tar.gz"} {
		if !strings.Contains(ignore, want) {
			t.Errorf(".dockerignore: no %q: the build context would not hold the release", want)
		}
	}
}

// The archive name is written in three places: scripts/release makes it, the
// Dockerfile copies it and the job files download it. They agree.
func TestReleaseArchiveNamesAgree(t *testing.T) {
	const version, arch = "v1.2.3", "arm64"
	want := "rollboot_v1.2.3_linux_arm64.tar.gz"

	script := string(read(t, filepath.Join(root, "scripts", "release")))
	m := regexp.MustCompile(`name="(rollboot_[^"]+)"`).FindStringSubmatch(script)
	if m == nil {
		t.Fatal("scripts/release: no name=\"rollboot_...\" line")
	}
	got := strings.NewReplacer("${version}", version, "${t%/*}", "linux", "${t#*/}", arch).Replace(m[1]) + ".tar.gz"
	if got != want {
		t.Errorf("scripts/release writes %s, want %s", got, want)
	}

	docker := string(read(t, filepath.Join(root, "Dockerfile")))
	if !strings.Contains(dockerArgs(docker, map[string]string{"VERSION": version, "TARGETARCH": arch}), "dist/"+want) {
		t.Errorf("the Dockerfile does not copy dist/%s", want)
	}

	const base = "https://releases.example.com/rollboot"
	for _, name := range []string{"rollboot.nomad.hcl", "rollboot-coordinator.nomad.hcl"} {
		path := deployPath("nomad", name)
		body, _ := parseJob(t, path)
		task := block(t, block(t, block(t, body, "job"), "group"), "task")
		art := block(t, task, "artifact")
		ctx := jobEvalContext(map[string]string{"version": version, "release_url": base}, arch)
		if got := evalString(t, art, "source", ctx); got != base+"/v1.2.3/"+want {
			t.Errorf("%s: artifact source %s, want %s", name, got, base+"/v1.2.3/"+want)
		}
		if got := evalString(t, block(t, art, "options"), "checksum", ctx); got != "file:"+base+"/v1.2.3/SHA256SUMS" {
			t.Errorf("%s: artifact checksum %q: want the release's SHA256SUMS", name, got)
		}
	}
}

// jobEvalContext evaluates a job file's expressions as Nomad would on a client
// of the given architecture, with the job's variables set.
func jobEvalContext(vars map[string]string, arch string) *hcl.EvalContext {
	v := map[string]cty.Value{}
	for k, s := range vars {
		v[k] = cty.StringVal(s)
	}
	return &hcl.EvalContext{Variables: map[string]cty.Value{
		"var":  cty.ObjectVal(v),
		"attr": cty.ObjectVal(map[string]cty.Value{"cpu": cty.ObjectVal(map[string]cty.Value{"arch": cty.StringVal(arch)})}),
	}}
}

func evalString(t *testing.T, b *hclsyntax.Body, name string, ctx *hcl.EvalContext) string {
	t.Helper()
	a, ok := b.Attributes[name]
	if !ok {
		t.Fatalf("%s: no attribute %s", b.SrcRange, name)
	}
	v, diags := a.Expr.Value(ctx)
	if diags.HasErrors() {
		t.Fatalf("%s: %v", a.SrcRange, diags)
	}
	return v.AsString()
}
