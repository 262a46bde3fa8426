package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// The detectors that compare what runs with what the next boot starts: the
// kernel, a NixOS system profile, an rpm-ostree deployment.

// KernelDetector compares the running kernel (/proc/sys/kernel/osrelease,
// what `uname -r` prints) with the newest kernel installed in /boot
// (vmlinuz-VERSION) or /lib/modules (VERSION/ with modules.dep or vmlinuz),
// version-sorted, preferring the running kernel's flavour ("-generic",
// "-amd64"). No installed kernel found is an error.
type KernelDetector struct{ Sys System }

// RebootRequired lists the installed kernels.
func (d KernelDetector) RebootRequired(context.Context) (Need, error) {
	b, err := os.ReadFile(d.Sys.Path("/proc/sys/kernel/osrelease"))
	if err != nil {
		return Need{}, fmt.Errorf("kernel detector: running kernel: %w", err)
	}
	installed, err := d.installed()
	if err != nil {
		return Need{}, fmt.Errorf("kernel detector: %w", err)
	}
	return kernelNeed(strings.TrimSpace(string(b)), installed)
}

// installed lists the kernel versions found in /boot and the modules folders.
func (d KernelDetector) installed() ([]string, error) {
	var vers []string
	boot, err := os.ReadDir(d.Sys.Path("/boot"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	for _, e := range boot {
		for _, prefix := range []string{"vmlinuz-", "vmlinux-", "Image-"} {
			if v, ok := strings.CutPrefix(e.Name(), prefix); ok && v != "" && unicode.IsDigit(rune(v[0])) {
				vers = append(vers, v)
			}
		}
	}
	for _, dir := range []string{"/lib/modules", "/usr/lib/modules"} {
		mods, err := os.ReadDir(d.Sys.Path(dir))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		for _, e := range mods {
			// A folder left by a removed kernel (dkms leftovers) has neither.
			for _, f := range []string{"modules.dep", "vmlinuz"} {
				if ok, _ := fileExists(d.Sys.Path(filepath.Join(dir, e.Name(), f))); ok {
					vers = append(vers, e.Name())
					break
				}
			}
		}
	}
	slices.Sort(vers)
	return slices.Compact(vers), nil
}

// kernelNeed: a reboot is needed when a kernel newer than the running one is
// installed (of the running kernel's flavour, when one of that flavour is).
func kernelNeed(running string, installed []string) (Need, error) {
	if len(installed) == 0 {
		return Need{}, errors.New("kernel detector: no installed kernel found in /boot or /lib/modules")
	}
	cands := installed
	if fl := kernelFlavour(running); fl != "" {
		same := slices.DeleteFunc(slices.Clone(installed), func(v string) bool { return kernelFlavour(v) != fl })
		if len(same) > 0 {
			cands = same
		}
	}
	newest := slices.MaxFunc(cands, CompareVersions)
	if CompareVersions(newest, running) <= 0 {
		return Need{}, nil
	}
	return Need{Required: true, Reason: fmt.Sprintf("kernel %s installed, %s running", newest, running),
		Fingerprint: "kernel " + newest}, nil
}

// kernelFlavour is a kernel release's last dash-separated part when it is a
// word ("generic" in 6.8.0-45-generic, "amd64" in 6.1.0-18-amd64); "" when it
// is a number (Fedora's 6.8.5-301.fc40.x86_64).
func kernelFlavour(v string) string {
	i := strings.LastIndexByte(v, '-')
	if i < 0 || i == len(v)-1 || unicode.IsDigit(rune(v[i+1])) {
		return ""
	}
	return v[i+1:]
}

// CompareVersions orders version strings as `sort -V` does for kernels: runs
// of digits compare as numbers, other runs as text, and a version that is a
// prefix of another is older. It returns -1, 0 or +1.
func CompareVersions(a, b string) int {
	for a != "" && b != "" {
		ra, restA := versionRun(a)
		rb, restB := versionRun(b)
		na, errA := strconv.ParseUint(ra, 10, 64)
		nb, errB := strconv.ParseUint(rb, 10, 64)
		var c int
		switch {
		case errA == nil && errB == nil:
			c = cmpUint(na, nb)
		case errA == nil:
			c = 1 // a number sorts after a word: 6.8.0-49 after 6.8.0-rc1
		case errB == nil:
			c = -1
		default:
			c = strings.Compare(ra, rb)
		}
		if c != 0 {
			return c
		}
		a, b = restA, restB
	}
	return cmpUint(uint64(len(a)), uint64(len(b)))
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// versionRun cuts the first run of digits or of letters from v, skipping the
// separators before it.
func versionRun(v string) (run, rest string) {
	v = strings.TrimLeftFunc(v, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if v == "" {
		return "", ""
	}
	digit := unicode.IsDigit(rune(v[0]))
	i := strings.IndexFunc(v, func(r rune) bool {
		return unicode.IsDigit(r) != digit || !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	if i < 0 {
		return v, ""
	}
	return v[:i], v[i:]
}

// NixOS: the booted system and the current system profile, and what the next
// boot takes from the profile (as NixOS's own system.autoUpgrade compares).
const (
	nixBooted  = "/run/booted-system"
	nixProfile = "/nix/var/nix/profiles/system"
)

var nixBootParts = []string{"kernel", "initrd", "kernel-modules"}

// NixOSDetector: a reboot is needed when the kernel, initrd or kernel modules
// of the system profile differ from those of the booted system (readlink of
// each under /run/booted-system and /nix/var/nix/profiles/system).
type NixOSDetector struct{ Sys System }

// RebootRequired compares the links.
func (d NixOSDetector) RebootRequired(context.Context) (Need, error) {
	var booted, next []string
	for _, part := range nixBootParts {
		b, err := d.Sys.readlink(nixBooted + "/" + part)
		if err != nil {
			return Need{}, fmt.Errorf("nixos detector: %w", err)
		}
		n, err := d.Sys.readlink(nixProfile + "/" + part)
		if err != nil {
			return Need{}, fmt.Errorf("nixos detector: %w", err)
		}
		booted, next = append(booted, b), append(next, n)
	}
	return nixosNeed(booted, next), nil
}

// nixosNeed compares the booted system's kernel, initrd and modules links with
// the profile's.
func nixosNeed(booted, next []string) Need {
	var diffs []string
	for i, part := range nixBootParts {
		if booted[i] != next[i] {
			diffs = append(diffs, fmt.Sprintf("%s %s (booted %s)", part, storeName(next[i]), storeName(booted[i])))
		}
	}
	if len(diffs) == 0 {
		return Need{}
	}
	return Need{Required: true, Reason: "system profile differs from the booted system: " + strings.Join(diffs, ", "),
		Fingerprint: fingerprint(next...)}
}

// storeName is the name of a Nix store path without its hash:
// /nix/store/<hash>-linux-6.6.30/bzImage is linux-6.6.30/bzImage.
func storeName(p string) string {
	rest, ok := strings.CutPrefix(p, "/nix/store/")
	if !ok {
		return p
	}
	if _, name, ok := strings.Cut(rest, "-"); ok {
		return name
	}
	return rest
}

// readlink reads the link p (a host path), following the links of its
// folders within the root, as readlink(1) reads /run/booted-system/kernel
// through the /run/booted-system link.
func (s System) readlink(p string) (string, error) {
	dir, err := s.resolve(filepath.Dir(p))
	if err != nil {
		return "", err
	}
	return os.Readlink(s.Path(filepath.Join(dir, filepath.Base(p))))
}

// resolve follows the links of the host path p within the root (an absolute
// target is taken under the root) and returns the host path it names.
func (s System) resolve(p string) (string, error) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	cur := "/"
	for hops := 0; len(parts) > 0; {
		name := parts[0]
		parts = parts[1:]
		if name == "" || name == "." {
			continue
		}
		next := filepath.Join(cur, name)
		fi, err := os.Lstat(s.Path(next))
		if err != nil {
			return "", err
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many levels of symbolic links", p)
		}
		t, err := os.Readlink(s.Path(next))
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(t) {
			t = filepath.Join(cur, t)
		}
		parts = append(strings.Split(strings.Trim(filepath.Clean(t), "/"), "/"), parts...)
		cur = "/"
	}
	return cur, nil
}

// RPMOSTreeDetector asks `rpm-ostree status --json`: a reboot is needed when
// the first deployment (the one the next boot starts: a staged or pending
// one) is not the booted one. A status other than 0 or output that is not
// rpm-ostree's JSON is an error.
type RPMOSTreeDetector struct{ Sys System }

// RebootRequired runs rpm-ostree.
func (d RPMOSTreeDetector) RebootRequired(ctx context.Context) (Need, error) {
	r, err := d.Sys.run(ctx, "rpm-ostree", "status", "--json")
	if err != nil {
		return Need{}, fmt.Errorf("rpm-ostree detector: %w", err)
	}
	if r.exit != 0 {
		return Need{}, fmt.Errorf("rpm-ostree detector: %w", unexpected("rpm-ostree status --json", r, "exit 0 with its status"))
	}
	return rpmOSTreeNeed(r.out)
}

// ostreeDeployment is what the detector reads of a deployment in `rpm-ostree
// status --json`.
type ostreeDeployment struct {
	Booted   bool   `json:"booted"`
	Staged   bool   `json:"staged"`
	Checksum string `json:"checksum"`
	Version  string `json:"version"`
}

// rpmOSTreeNeed reads `rpm-ostree status --json`.
func rpmOSTreeNeed(out []byte) (Need, error) {
	var st struct {
		Deployments []ostreeDeployment `json:"deployments"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return Need{}, fmt.Errorf("rpm-ostree detector: `rpm-ostree status --json`: %w", err)
	}
	i := slices.IndexFunc(st.Deployments, func(d ostreeDeployment) bool { return d.Booted })
	if i < 0 {
		return Need{}, errors.New("rpm-ostree detector: `rpm-ostree status --json` lists no booted deployment")
	}
	if i == 0 {
		return Need{}, nil
	}
	next, booted := st.Deployments[0], st.Deployments[i]
	state := "pending"
	if next.Staged {
		state = "staged"
	}
	return Need{Required: true, Reason: fmt.Sprintf("rpm-ostree: deployment %s %s, %s booted", ostreeName(next), state, ostreeName(booted)),
		Fingerprint: next.Checksum}, nil
}

// ostreeName is a deployment's version, or its checksum's start without one.
func ostreeName(d ostreeDeployment) string {
	if d.Version != "" {
		return d.Version
	}
	return d.Checksum[:min(12, len(d.Checksum))]
}
