// Package version tells which rollboot this is: the release version, the commit
// it was built from, when, and with which Go.
//
// The release build (scripts/release) stamps them with
//
//	-ldflags "-X github.com/rollboot/rollboot/internal/version.Version=v1.2.3
//	          -X github.com/rollboot/rollboot/internal/version.Commit=<git revision>
//	          -X github.com/rollboot/rollboot/internal/version.Date=<commit time, RFC 3339>"
//
// A binary built without them (`go build`, `go install ...@v1.2.3`) reports what
// the Go toolchain recorded in it instead (runtime/debug.ReadBuildInfo): the
// module version and the VCS revision, time and modified flag.
package version

import (
	"runtime"
	"runtime/debug"
)

// Set by the release build with -ldflags -X; see the package comment.
var (
	// Version is the release version, a git tag such as v1.2.3, or "dev" when
	// not stamped. Use Get or String for the resolved version.
	Version = Dev
	// Commit is the full git revision the release was built from.
	Commit = ""
	// Date is the commit time of that revision, in RFC 3339: a reproducible
	// build has no other time to tell.
	Date = ""
)

// Dev is the version of a build that knows no release version.
const Dev = "dev"

// Info is what `rollboot version` prints.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`             // "" when unknown
	Date      string `json:"date"`               // "" when unknown
	Modified  bool   `json:"modified,omitempty"` // built from a working tree with uncommitted changes
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"` // GOOS/GOARCH
}

// Get resolves the version of this binary: the stamped values first, then the
// build information the Go toolchain recorded.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(stamp{Version, Commit, Date}, bi, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
}

// String is the version a host record carries: the release version, or for a
// development build "dev+<commit>" (and ".dirty" when modified), so that agents
// built from different commits tell apart. Never empty.
func String() string { return Get().Short() }

// Short is the one-word form of the version; see String.
func (i Info) Short() string {
	if i.Version != Dev || i.Commit == "" {
		return i.Version
	}
	s := Dev + "+" + shortCommit(i.Commit)
	if i.Modified {
		s += ".dirty"
	}
	return s
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// stamp is what -ldflags -X set.
type stamp struct{ version, commit, date string }

// resolve is the pure decision behind Get. A stamped value wins over the build
// information; a field neither gives stays empty (the version: "dev").
func resolve(s stamp, bi *debug.BuildInfo, goVersion, platform string) Info {
	info := Info{Version: s.version, Commit: s.commit, Date: s.date, GoVersion: goVersion, Platform: platform}
	if bi == nil {
		if info.Version == "" {
			info.Version = Dev
		}
		return info
	}
	if info.Version == "" || info.Version == Dev {
		info.Version = Dev
		// "(devel)": built inside the module without VCS information.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
	}
	stamped := s.commit != ""
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			if info.Commit == "" {
				info.Commit = kv.Value
			}
		case "vcs.time":
			if info.Date == "" {
				info.Date = kv.Value
			}
		case "vcs.modified":
			// Only about the revision it goes with: a stamped commit is a
			// release's, built from a clean tree.
			info.Modified = !stamped && kv.Value == "true"
		}
	}
	return info
}
