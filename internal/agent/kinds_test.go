package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/config"
)

// fixture is the root of a fixture tree under testdata/detect: an os-release
// file, /boot and /lib/modules listings, Nix links and fake programs (small
// scripts) as a host of that distribution has them.
func fixture(t *testing.T, name string) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("testdata", "detect", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(root); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestDetectorKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		kind       string
		fixture    string
		kernelOnly bool
		timeout    time.Duration
		want       Need
		wantErr    string // an error, never a need
	}{
		// Debian and Ubuntu: the sentinel, and the packages that asked for it.
		{name: "debian: sentinel and packages", kind: KindDebian, fixture: "debian-needed",
			want: Need{Required: true, Reason: "/var/run/reboot-required exists (packages: linux-base, linux-image-6.8.0-49-generic)",
				Fingerprint: fingerprint("linux-base", "linux-image-6.8.0-49-generic")}},
		{name: "debian: sentinel without packages", kind: KindDebian, fixture: "debian-nopkgs",
			want: Need{Required: true, Reason: "/var/run/reboot-required exists"}},
		{name: "debian: no sentinel", kind: KindDebian, fixture: "debian-none"},

		// RHEL, Rocky, Alma, Fedora: needs-restarting -r, exit 1 = reboot.
		{name: "rhel: exit 1 lists the packages", kind: KindRHEL, fixture: "rhel-needed",
			want: Need{Required: true, Reason: "needs-restarting -r: updated since boot: glibc, kernel-core, systemd",
				Fingerprint: fingerprint("glibc", "kernel-core", "systemd")}},
		{name: "rhel: kernel_only keeps a kernel update", kind: KindRHEL, fixture: "rhel-needed", kernelOnly: true,
			want: Need{Required: true, Reason: "needs-restarting -r: updated since boot: glibc, kernel-core, systemd",
				Fingerprint: fingerprint("glibc", "kernel-core", "systemd")}},
		{name: "rhel: libraries only", kind: KindRHEL, fixture: "rhel-libs",
			want: Need{Required: true, Reason: "needs-restarting -r: updated since boot: glibc, openssl-libs",
				Fingerprint: fingerprint("glibc", "openssl-libs")}},
		{name: "rhel: kernel_only ignores libraries", kind: KindRHEL, fixture: "rhel-libs", kernelOnly: true},
		{name: "rhel: exit 0 is no reboot", kind: KindRHEL, fixture: "rhel-none"},
		{name: "rhel: exit 2 is an error", kind: KindRHEL, fixture: "rhel-broken", wantErr: "exited 2 (output: Error: rpmdb open failed)"},
		{name: "rhel: a missing program is an error", kind: KindRHEL, fixture: "rhel-missing", wantErr: "needs-restarting: not installed"},
		{name: "rhel: a timeout is an error", kind: KindRHEL, fixture: "rhel-slow", timeout: 100 * time.Millisecond, wantErr: "timed out after 100ms"},

		// SUSE: /run/reboot-needed, else zypper needs-rebooting (102 = reboot).
		{name: "suse: flag file", kind: KindSUSE, fixture: "suse-flag",
			want: Need{Required: true, Reason: "/run/reboot-needed exists"}},
		{name: "suse: zypper exit 102", kind: KindSUSE, fixture: "suse-zypper-needed",
			want: Need{Required: true, Reason: "zypper needs-rebooting: a reboot is needed"}},
		{name: "suse: zypper exit 0", kind: KindSUSE, fixture: "suse-zypper-none"},
		{name: "suse: zypper locked is an error", kind: KindSUSE, fixture: "suse-zypper-locked", wantErr: "exited 7"},
		{name: "suse: a missing zypper is an error", kind: KindSUSE, fixture: "suse-missing", wantErr: "zypper: not installed"},

		// NixOS: the system profile's kernel, initrd and modules against the booted system's.
		{name: "nixos: a new kernel in the profile", kind: KindNixOS, fixture: "nixos-new",
			want: Need{Required: true, Reason: "system profile differs from the booted system: kernel linux-6.6.31/bzImage (booted linux-6.6.30/bzImage)",
				Fingerprint: fingerprint("/nix/store/kkk2-linux-6.6.31/bzImage", "/nix/store/iii1-initrd-linux-6.6.30/initrd", "/nix/store/mmm1-linux-6.6.30-modules")}},
		{name: "nixos: the same boot parts", kind: KindNixOS, fixture: "nixos-same"},
		{name: "nixos: no booted system is an error", kind: KindNixOS, fixture: "nixos-missing", wantErr: "nixos detector: lstat"},

		// rpm-ostree (Fedora CoreOS, Silverblue, RHEL for Edge): a deployment before the booted one.
		{name: "rpm-ostree: staged deployment", kind: KindRPMOSTree, fixture: "rpm-ostree-staged",
			want: Need{Required: true, Reason: "rpm-ostree: deployment 40.20240416.3.0 staged, 40.20240401.3.0 booted",
				Fingerprint: "b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90a1"}},
		{name: "rpm-ostree: booted first (a rollback behind)", kind: KindRPMOSTree, fixture: "rpm-ostree-booted"},
		{name: "rpm-ostree: exit 1 is an error", kind: KindRPMOSTree, fixture: "rpm-ostree-garbled", wantErr: "exited 1"},
		{name: "rpm-ostree: output not JSON is an error", kind: KindRPMOSTree, fixture: "rpm-ostree-notjson", wantErr: "invalid character"},
		{name: "rpm-ostree: a missing program is an error", kind: KindRPMOSTree, fixture: "rhel-missing", wantErr: "rpm-ostree: not installed"},

		// The kernel: running against the newest installed.
		{name: "kernel: ubuntu, newer of the same flavour", kind: KindKernel, fixture: "kernel-ubuntu",
			want: Need{Required: true, Reason: "kernel 6.8.0-49-generic installed, 6.8.0-45-generic running", Fingerprint: "kernel 6.8.0-49-generic"}},
		{name: "kernel: fedora runs its newest (version-sorted, leftovers ignored)", kind: KindKernel, fixture: "kernel-fedora"},
		{name: "kernel: arch, from /lib/modules", kind: KindKernel, fixture: "kernel-arch",
			want: Need{Required: true, Reason: "kernel 6.9.10-arch1-1 installed, 6.9.9-arch1-1 running", Fingerprint: "kernel 6.9.10-arch1-1"}},
		{name: "kernel: none installed is an error", kind: KindKernel, fixture: "kernel-none", wantErr: "no installed kernel found"},
		{name: "kernel: no running kernel is an error", kind: KindKernel, fixture: "debian-none", wantErr: "running kernel"},

		// needrestart -b.
		{name: "needrestart: new kernel version", kind: KindNeedrestart, fixture: "needrestart-kernel", kernelOnly: true,
			want: Need{Required: true, Reason: "needrestart: kernel 6.8.0-49-generic expected, 6.8.0-45-generic running",
				Fingerprint: fingerprint("kernel 6.8.0-49-generic")}},
		{name: "needrestart: kernel and services", kind: KindNeedrestart, fixture: "needrestart-kernel",
			want: Need{Required: true, Reason: "needrestart: kernel 6.8.0-49-generic expected, 6.8.0-45-generic running; " +
				"needrestart: 1 services use outdated libraries (systemd-journald.service)",
				Fingerprint: fingerprint("kernel 6.8.0-49-generic", "systemd-journald.service")}},
		{name: "needrestart: services only", kind: KindNeedrestart, fixture: "needrestart-libs",
			want: Need{Required: true, Reason: "needrestart: 2 services use outdated libraries (cron.service, nginx.service)",
				Fingerprint: fingerprint("cron.service", "nginx.service")}},
		{name: "needrestart: kernel_only ignores services", kind: KindNeedrestart, fixture: "needrestart-libs", kernelOnly: true},
		{name: "needrestart: nothing pending", kind: KindNeedrestart, fixture: "needrestart-none"},
		{name: "needrestart: no KSTA line is an error", kind: KindNeedrestart, fixture: "needrestart-garbled", wantErr: "no NEEDRESTART-KSTA"},
		{name: "needrestart: a missing program is an error", kind: KindNeedrestart, fixture: "needrestart-missing", wantErr: "needrestart: not installed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			timeout := tc.timeout
			if timeout == 0 {
				timeout = 30 * time.Second
			}
			d, err := NewDetector(tc.kind, System{Root: fixture(t, tc.fixture), Timeout: timeout, KernelOnly: tc.kernelOnly})
			if err != nil {
				t.Fatal(err)
			}
			need, err := d.RebootRequired(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || need.Required {
					t.Fatalf("need %+v, err %v; want no need and an error with %q", need, err, tc.wantErr)
				}
				if !strings.HasPrefix(err.Error(), tc.kind+" detector: ") {
					t.Errorf("error %q does not name the %s detector", err, tc.kind)
				}
				return
			}
			if err != nil || need != tc.want {
				t.Fatalf("need %+v, err %v; want %+v", need, err, tc.want)
			}
		})
	}
}

// "auto" chooses by the distribution's os-release file (ID, then ID_LIKE).
func TestChooseKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		osRelease string
		ostree    bool
		want      string
	}{
		{"debian", false, KindDebian},
		{"ubuntu", false, KindDebian},
		{"rhel", false, KindRHEL},
		{"rocky", false, KindRHEL},
		{"almalinux", false, KindRHEL},
		{"fedora", false, KindRHEL},
		{"opensuse-leap", false, KindSUSE},
		{"sles", false, KindSUSE},
		{"nixos", false, KindNixOS},
		{"fedora-coreos", true, KindRPMOSTree},
		{"arch", false, KindKernel},
		{"alpine", false, KindKernel},
	}
	for _, tc := range tests {
		t.Run(tc.osRelease, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "detect", "os-release", tc.osRelease))
			if err != nil {
				t.Fatal(err)
			}
			if got := ChooseKinds(b, tc.ostree); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("ChooseKinds = %v, want [%s]", got, tc.want)
			}
		})
	}
}

// ResolveKinds reads the os-release file under the root, and /run/ostree-booted.
func TestResolveKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fixture  string
		kinds    []string
		want     []string
		wantNote string
	}{
		{fixture: "rpm-ostree-staged", kinds: []string{KindAuto}, want: []string{KindRPMOSTree}},
		{fixture: "nixos-new", kinds: []string{KindKernel, KindAuto}, want: []string{KindKernel, KindNixOS}},
		{fixture: "debian-needed", kinds: []string{KindAuto, KindDebian, KindNeedrestart}, want: []string{KindDebian, KindNeedrestart}},
		{fixture: "kernel-arch", kinds: []string{KindAuto}, wantNote: "no os-release file"},
		{fixture: "kernel-arch", kinds: nil},
	}
	for _, tc := range tests {
		got, note := ResolveKinds(tc.kinds, System{Root: fixture(t, tc.fixture)})
		if !slices.Equal(got, tc.want) || !strings.Contains(note, tc.wantNote) || (tc.wantNote == "") != (note == "") {
			t.Errorf("%s %v: kinds %v, note %q; want %v, note with %q", tc.fixture, tc.kinds, got, note, tc.want, tc.wantNote)
		}
	}
}

// The configuration offers exactly the kinds the agent builds.
func TestDetectorKindsMatchConfig(t *testing.T) {
	t.Parallel()
	if !slices.Equal(config.DetectorKinds, Kinds) {
		t.Fatalf("config.DetectorKinds %v, agent.Kinds %v", config.DetectorKinds, Kinds)
	}
	for _, k := range Kinds[1:] {
		if _, err := NewDetector(k, System{}); err != nil {
			t.Error(err)
		}
	}
}

func TestCompareVersions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"6.8.0-49-generic", "6.8.0-45-generic", 1},
		{"6.10.3-200.fc40.x86_64", "6.9.7-200.fc40.x86_64", 1},
		{"6.1.0-18-amd64", "6.1.0-18-amd64", 0},
		{"6.9.9-arch1-1", "6.9.10-arch1-1", -1},
		{"6.8.0-rc1", "6.8.0-49", -1},
		{"6.8", "6.8.1", -1},
		{"5.15.0-1052-aws", "5.15.0-1049-aws", 1},
	}
	for _, tc := range tests {
		if got := CompareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := CompareVersions(tc.b, tc.a); got != -tc.want {
			t.Errorf("CompareVersions(%q, %q) = %d, want %d", tc.b, tc.a, got, -tc.want)
		}
	}
}

// stubDetector answers what it is told.
type stubDetector struct{ need *Need }

func (d stubDetector) RebootRequired(context.Context) (Need, error) { return *d.need, nil }

// A need keeps the time it was first seen while its fingerprint stays (the
// reboot-loop guard takes it for the need the last reboot did not clear); a
// changed fingerprint (more was installed) is a new need, seen anew.
func TestDetectFingerprintMakesANewNeed(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	need := &Need{Required: true, Reason: "kernel 6.8.0-49 installed, 6.8.0-45 running", Fingerprint: "kernel 6.8.0-49"}
	a := New(Options{Detectors: []Detector{stubDetector{need}, stubDetector{&Need{}}}, Now: func() time.Time { return now }})
	step := func(want time.Time, print string) {
		t.Helper()
		a.detect(context.Background(), true)
		if !a.rec.RequestedAt.Equal(want) || a.rec.Fingerprint != print || a.rec.RebootRequired != need.Required {
			t.Fatalf("record %+v; want requested at %s, fingerprint %q", a.rec, want, print)
		}
	}
	first := now
	step(first, "kernel 6.8.0-49")
	now = now.Add(time.Minute)
	step(first, "kernel 6.8.0-49") // the same need
	need.Fingerprint = "kernel 6.8.0-51"
	step(now, "kernel 6.8.0-51") // a newer kernel installed: a new need
	need.Required, need.Fingerprint = false, ""
	step(time.Time{}, "")
}
