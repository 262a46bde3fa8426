package agent

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/rollboot/rollboot/internal/fswatch"
)

// The package managers' detectors: each asks the distribution's own tool (or
// reads its own file), with exit-status rules that make a missing or failing
// tool an error, never a reboot (Kured #976).

// Debian's files: apt's hooks (update-notifier-common) create the sentinel and
// list in the .pkgs file the packages that asked for the reboot.
const (
	// DebianSentinel is the file whose existence says a reboot is needed.
	DebianSentinel = "/var/run/reboot-required"
	debianPkgs     = "/var/run/reboot-required.pkgs"
)

// DebianDetector: a reboot is needed while /var/run/reboot-required exists;
// the packages in reboot-required.pkgs are its reason and fingerprint.
type DebianDetector struct{ Sys System }

// Changes tells when the sentinel is created or removed (FileDetector.Changes).
func (d DebianDetector) Changes(ctx context.Context) (<-chan struct{}, error) {
	return fswatch.Notify(ctx, d.Sys.Path(DebianSentinel))
}

// RebootRequired looks for the sentinel and reads the packages' list.
func (d DebianDetector) RebootRequired(context.Context) (Need, error) {
	ok, err := fileExists(d.Sys.Path(DebianSentinel))
	if err != nil || !ok {
		if err != nil {
			err = fmt.Errorf("debian detector: %w", err)
		}
		return Need{}, err
	}
	b, err := os.ReadFile(d.Sys.Path(debianPkgs))
	if err != nil && !os.IsNotExist(err) {
		return Need{}, fmt.Errorf("debian detector: %w", err)
	}
	return debianNeed(b), nil
}

// debianNeed is the need shown by the sentinel with the .pkgs file's content.
func debianNeed(pkgs []byte) Need {
	names := lines(pkgs)
	slices.Sort(names)
	names = slices.Compact(names)
	n := Need{Required: true, Reason: DebianSentinel + " exists"}
	if len(names) > 0 {
		n.Reason += " (packages: " + listed(names) + ")"
		n.Fingerprint = fingerprint(names...)
	}
	return n
}

// RHELDetector asks `needs-restarting -r` (dnf-utils, yum-utils): exit 1 means
// a reboot is needed, 0 that it is not; any other outcome is an error. With
// KernelOnly, a need whose listed packages hold no kernel, firmware or
// microcode package is none.
type RHELDetector struct{ Sys System }

// RebootRequired runs needs-restarting.
func (d RHELDetector) RebootRequired(ctx context.Context) (Need, error) {
	r, err := d.Sys.run(ctx, "needs-restarting", "-r")
	if err != nil {
		return Need{}, fmt.Errorf("rhel detector: %w (install dnf-utils or yum-utils)", err)
	}
	switch r.exit {
	case 0:
		return Need{}, nil
	case 1:
		return rhelNeed(r.out, d.Sys.KernelOnly), nil
	}
	return Need{}, fmt.Errorf("rhel detector: %w", unexpected("needs-restarting -r", r, "exit 1 (reboot) and 0 (no reboot)"))
}

// rhelNeed is the need of a `needs-restarting -r` that exited 1 with out: the
// "  * package" lines it lists are the reason and fingerprint.
func rhelNeed(out []byte, kernelOnly bool) Need {
	var names []string
	for _, l := range lines(out) {
		if name, ok := strings.CutPrefix(l, "* "); ok {
			names = append(names, strings.TrimSpace(name))
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if kernelOnly && len(names) > 0 && !slices.ContainsFunc(names, kernelPackage) {
		return Need{}
	}
	n := Need{Required: true, Reason: "needs-restarting -r: a reboot is needed"}
	if len(names) > 0 {
		n.Reason = "needs-restarting -r: updated since boot: " + listed(names)
		n.Fingerprint = fingerprint(names...)
	}
	return n
}

// kernelPackage: an RPM package whose update only a reboot applies by itself
// (the kernel, its firmware, CPU microcode), as opposed to a library whose
// users a restart would do.
func kernelPackage(name string) bool {
	return strings.HasPrefix(name, "kernel") || strings.HasPrefix(name, "linux-firmware") ||
		strings.HasPrefix(name, "microcode")
}

// suseRebootNeeded is the flag file libzypp creates when a package that asks
// for a reboot was installed.
const suseRebootNeeded = "/run/reboot-needed"

// SUSEDetector: a reboot is needed while /run/reboot-needed exists; otherwise
// `zypper needs-rebooting` says: exit 102 (ZYPPER_EXIT_INF_REBOOT_NEEDED)
// means needed, 0 not needed, anything else is an error.
type SUSEDetector struct{ Sys System }

// RebootRequired looks for the flag file, then asks zypper.
func (d SUSEDetector) RebootRequired(ctx context.Context) (Need, error) {
	ok, err := fileExists(d.Sys.Path(suseRebootNeeded))
	switch {
	case err != nil:
		return Need{}, fmt.Errorf("suse detector: %w", err)
	case ok:
		return Need{Required: true, Reason: suseRebootNeeded + " exists"}, nil
	}
	r, err := d.Sys.run(ctx, "zypper", "needs-rebooting")
	if err != nil {
		return Need{}, fmt.Errorf("suse detector: %w", err)
	}
	switch r.exit {
	case 0:
		return Need{}, nil
	case 102:
		return Need{Required: true, Reason: "zypper needs-rebooting: a reboot is needed"}, nil
	}
	return Need{}, fmt.Errorf("suse detector: %w", unexpected("zypper needs-rebooting", r, "exit 102 (reboot) and 0 (no reboot)"))
}

// NeedrestartDetector asks `needrestart -b` (batch mode, which restarts
// nothing). NEEDRESTART-KSTA 2 (an ABI-compatible kernel update) or 3 (a new
// kernel version) and NEEDRESTART-UCSTA 2 (newer CPU microcode) need a
// reboot; so do services using outdated libraries (NEEDRESTART-SVC), unless
// KernelOnly. A status other than 0, or no KSTA line, is an error.
type NeedrestartDetector struct{ Sys System }

// RebootRequired runs needrestart.
func (d NeedrestartDetector) RebootRequired(ctx context.Context) (Need, error) {
	r, err := d.Sys.run(ctx, "needrestart", "-b")
	if err != nil {
		return Need{}, fmt.Errorf("needrestart detector: %w", err)
	}
	if r.exit != 0 {
		return Need{}, fmt.Errorf("needrestart detector: %w", unexpected("needrestart -b", r, "exit 0 with its NEEDRESTART- lines"))
	}
	return needrestartNeed(r.out, d.Sys.KernelOnly)
}

// needrestartNeed reads the NEEDRESTART- lines of `needrestart -b`.
func needrestartNeed(out []byte, kernelOnly bool) (Need, error) {
	v := map[string]string{}
	var svcs []string
	for _, l := range lines(out) {
		k, val, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		if k == "NEEDRESTART-SVC" {
			svcs = append(svcs, val)
		} else {
			v[k] = val
		}
	}
	ksta, ok := v["NEEDRESTART-KSTA"]
	if !ok {
		return Need{}, fmt.Errorf("needrestart detector: `needrestart -b` printed no NEEDRESTART-KSTA line")
	}
	var reasons, prints []string
	if ksta == "2" || ksta == "3" {
		reasons = append(reasons, fmt.Sprintf("needrestart: kernel %s expected, %s running", v["NEEDRESTART-KEXP"], v["NEEDRESTART-KCUR"]))
		prints = append(prints, "kernel "+v["NEEDRESTART-KEXP"])
	}
	if v["NEEDRESTART-UCSTA"] == "2" {
		reasons = append(reasons, "needrestart: CPU microcode "+v["NEEDRESTART-UCEXP"]+" pending")
		prints = append(prints, "microcode "+v["NEEDRESTART-UCEXP"])
	}
	if len(svcs) > 0 && !kernelOnly {
		slices.Sort(svcs)
		reasons = append(reasons, fmt.Sprintf("needrestart: %d services use outdated libraries (%s)", len(svcs), listed(svcs)))
		prints = append(prints, svcs...)
	}
	if len(reasons) == 0 {
		return Need{}, nil
	}
	return Need{Required: true, Reason: strings.Join(reasons, "; "), Fingerprint: fingerprint(prints...)}, nil
}
