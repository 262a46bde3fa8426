package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollboot/rollboot/internal/version"
)

func TestPrintVersion(t *testing.T) {
	info := version.Info{Version: "v1.2.3", Commit: "0123456789abcdef", Date: "2026-03-01T10:00:00Z", GoVersion: "go1.26.8", Platform: "linux/amd64"}
	for _, tt := range []struct {
		name string
		info version.Info
		want string
	}{
		{"release", info, "rollboot v1.2.3\nRevision   0123456789abcdef\nBuildDate  2026-03-01T10:00:00Z\nGoVersion  go1.26.8\nPlatform   linux/amd64\n"},
		{"unknown commit and date", version.Info{Version: "dev", GoVersion: "go1.26.8", Platform: "darwin/arm64"},
			"rollboot dev\nRevision   unknown\nBuildDate  unknown\nGoVersion  go1.26.8\nPlatform   darwin/arm64\n"},
		{"modified", version.Info{Version: "dev", Commit: "abc", Modified: true, GoVersion: "go1.26.8", Platform: "linux/amd64"},
			"rollboot dev\nRevision   abc (modified)\nBuildDate  unknown\nGoVersion  go1.26.8\nPlatform   linux/amd64\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printVersion(&b, tt.info, false); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", b.String(), tt.want)
			}
		})
	}
}

// `rollboot version -json` (one dash, like the nomad CLI) prints one object
// with every field.
func TestVersionJSON(t *testing.T) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs(normalizeArgs(root, []string{"version", "-json"}))
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	for _, k := range []string{"version", "commit", "date", "go_version", "platform"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no %q in %s", k, out.String())
		}
	}
	if got["version"] != version.Get().Version {
		t.Errorf("version %v, want %q", got["version"], version.Get().Version)
	}
}

// A binary stamped the way scripts/release stamps it reports the stamped
// values: the -X paths are the package's variables.
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	const pkg = "github.com/rollboot/rollboot/internal/version"
	bin := filepath.Join(t.TempDir(), "rollboot")
	ldflags := "-X " + pkg + ".Version=v9.8.7 -X " + pkg + ".Commit=0123456789abcdef0123456789abcdef01234567 -X " + pkg + ".Date=2026-03-01T10:00:00Z"
	if out, err := exec.Command("go", "build", "-tags", "norollbootsim", "-buildvcs=false", "-ldflags", ldflags, "-o", bin, "github.com/rollboot/rollboot/cmd/rollboot").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "-json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var got version.Info
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if got.Version != "v9.8.7" || got.Commit != "0123456789abcdef0123456789abcdef01234567" || got.Date != "2026-03-01T10:00:00Z" || got.Modified {
		t.Errorf("stamped binary reports %+v", got)
	}
	if !strings.HasPrefix(got.GoVersion, "go") {
		t.Errorf("go_version %q", got.GoVersion)
	}
}
