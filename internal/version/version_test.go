package version

import (
	"runtime/debug"
	"testing"
)

func buildInfo(mainVersion string, settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/rollboot/rollboot", Version: mainVersion}}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

const (
	rev  = "0123456789abcdef0123456789abcdef01234567"
	rev2 = "fedcba9876543210fedcba9876543210fedcba98"
	when = "2026-03-01T10:00:00Z"
)

func TestResolve(t *testing.T) {
	vcs := []string{"vcs", "git", "vcs.revision", rev, "vcs.time", when, "vcs.modified", "false"}
	dirty := []string{"vcs.revision", rev, "vcs.time", when, "vcs.modified", "true"}
	for _, tt := range []struct {
		name  string
		s     stamp
		bi    *debug.BuildInfo
		want  Info
		short string
	}{
		{"release build: stamped, no VCS info (-buildvcs=false)",
			stamp{"v1.2.3", rev, when}, buildInfo("(devel)"),
			Info{Version: "v1.2.3", Commit: rev, Date: when}, "v1.2.3"},
		{"stamped values win over the build information",
			stamp{"v1.2.3", rev, when}, buildInfo("v0.0.0-20260101000000-fedcba987654", "vcs.revision", rev2, "vcs.time", "2026-01-01T00:00:00Z", "vcs.modified", "true"),
			Info{Version: "v1.2.3", Commit: rev, Date: when}, "v1.2.3"},
		{"release script off a tag: dev, stamped commit",
			stamp{"dev", rev, when}, buildInfo("(devel)"),
			Info{Version: "dev", Commit: rev, Date: when}, "dev+0123456789ab"},
		{"go install ...@v1.2.3: the module version",
			stamp{"dev", "", ""}, buildInfo("v1.2.3"),
			Info{Version: "v1.2.3"}, "v1.2.3"},
		{"go build in a checkout: pseudo-version and VCS info",
			stamp{"dev", "", ""}, buildInfo("v0.0.0-20260301100000-0123456789ab", vcs...),
			Info{Version: "v0.0.0-20260301100000-0123456789ab", Commit: rev, Date: when}, "v0.0.0-20260301100000-0123456789ab"},
		{"go build without a module version, clean tree",
			stamp{"dev", "", ""}, buildInfo("(devel)", vcs...),
			Info{Version: "dev", Commit: rev, Date: when}, "dev+0123456789ab"},
		{"go build with uncommitted changes",
			stamp{"dev", "", ""}, buildInfo("(devel)", dirty...),
			Info{Version: "dev", Commit: rev, Date: when, Modified: true}, "dev+0123456789ab.dirty"},
		{"stamped commit: vcs.modified of another revision is ignored",
			stamp{"dev", rev, when}, buildInfo("(devel)", "vcs.modified", "true"),
			Info{Version: "dev", Commit: rev, Date: when}, "dev+0123456789ab"},
		{"nothing known (go run outside VCS)",
			stamp{"dev", "", ""}, buildInfo("(devel)"),
			Info{Version: "dev"}, "dev"},
		{"no build information at all",
			stamp{"", "", ""}, nil,
			Info{Version: "dev"}, "dev"},
		{"empty stamped version is dev",
			stamp{"", "", ""}, buildInfo(""),
			Info{Version: "dev"}, "dev"},
		{"short commit kept whole",
			stamp{"dev", "abc", ""}, nil,
			Info{Version: "dev", Commit: "abc"}, "dev+abc"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := resolve(tt.s, tt.bi, "go1.26.8", "linux/arm64")
			tt.want.GoVersion, tt.want.Platform = "go1.26.8", "linux/arm64"
			if got != tt.want {
				t.Errorf("resolve:\n got %+v\nwant %+v", got, tt.want)
			}
			if s := got.Short(); s != tt.short {
				t.Errorf("Short() = %q, want %q", s, tt.short)
			}
		})
	}
}

// The host record tells an agent apart from one without a version (a FleetLock
// client's record) by a non-empty version: String is never empty.
func TestStringNeverEmpty(t *testing.T) {
	if String() == "" {
		t.Fatal("String() is empty")
	}
	if g := Get(); g.GoVersion == "" || g.Platform == "" {
		t.Fatalf("Get() = %+v: no Go version or platform", g)
	}
}
