package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Detector kinds: the reboot-need detectors of the distributions (agent.detectors).
const (
	KindAuto        = "auto" // the kinds /etc/os-release calls for (ChooseKinds)
	KindDebian      = "debian"
	KindRHEL        = "rhel"
	KindSUSE        = "suse"
	KindNixOS       = "nixos"
	KindRPMOSTree   = "rpm-ostree"
	KindKernel      = "kernel"
	KindNeedrestart = "needrestart"
)

// Kinds are the detector kinds, KindAuto included.
var Kinds = []string{KindAuto, KindDebian, KindRHEL, KindSUSE, KindNixOS, KindRPMOSTree, KindKernel, KindNeedrestart}

// System is the host as the detectors see it: its files under Root ("/" on a
// host; a fixture tree in tests) and its commands, found in the standard
// program folders under Root and run with the agent's environment minus its
// secrets (cmdenv.go), each for at most Timeout.
type System struct {
	Root       string
	Timeout    time.Duration
	PassEnv    []string
	KernelOnly bool // needrestart and rhel: only a kernel (or microcode) update is a need
}

// Path is p (absolute, as on the host) under the system's root.
func (s System) Path(p string) string {
	if s.Root == "" || s.Root == "/" {
		return p
	}
	return filepath.Join(s.Root, p)
}

// programDirs are where the detectors' programs are looked for, under the root:
// the distributions' own folders, not the agent's PATH, which a system job's
// task environment may not carry.
var programDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin", "/run/current-system/sw/bin"}

// errNoProgram: none of a detector's programs is installed.
var errNoProgram = errors.New("not installed")

// lookProgram finds name in the program folders under the root.
func (s System) lookProgram(name string) (string, error) {
	for _, dir := range programDirs {
		p := s.Path(filepath.Join(dir, name))
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w (looked in %s)", name, errNoProgram, strings.Join(programDirs, ", "))
}

// ran is the outcome of a program that ran to its end.
type ran struct {
	exit int
	out  []byte // standard output
	msg  string // standard error, cleaned for an error message
}

// run runs argv (its program looked up under the root) for at most the
// system's timeout. An error means it did not run to its end: not installed,
// not started, killed, timed out; an exit status is the caller's to judge.
func (s System) run(ctx context.Context, argv ...string) (ran, error) {
	prog, err := s.lookProgram(argv[0])
	if err != nil {
		return ran{}, err
	}
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	cmd := command(ctx, append([]string{prog}, argv[1:]...), s.PassEnv)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return ran{}, fmt.Errorf("`%s`: timed out after %s", strings.Join(argv, " "), s.Timeout)
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return ran{exit: exit.ExitCode(), out: stdout.Bytes(), msg: commandOutput(stderr.Bytes())}, nil
	case err != nil:
		return ran{}, fmt.Errorf("`%s`: %w", strings.Join(argv, " "), err)
	}
	return ran{out: stdout.Bytes(), msg: commandOutput(stderr.Bytes())}, nil
}

// unexpected is the error of a program that exited with a status that is no
// answer.
func unexpected(argv string, r ran, answers string) error {
	if r.msg != "" {
		return fmt.Errorf("`%s` exited %d (output: %s); only %s are answers", argv, r.exit, r.msg, answers)
	}
	return fmt.Errorf("`%s` exited %d; only %s are answers", argv, r.exit, answers)
}

// fingerprint is a short hash of the parts (what a reboot installs).
func fingerprint(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// listed is a short list of names for a reason: the first few, and how many more.
func listed(names []string) string {
	const shown = 5
	if len(names) <= shown {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
}

// lines are the non-empty trimmed lines of b.
func lines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// exists reports whether the file p exists; an error other than its absence
// is returned.
func fileExists(p string) (bool, error) {
	_, err := os.Stat(p)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	}
	return false, err
}

// NewDetector returns the detector of a kind (not KindAuto) on the system.
func NewDetector(kind string, sys System) (Detector, error) {
	switch kind {
	case KindDebian:
		return DebianDetector{Sys: sys}, nil
	case KindRHEL:
		return RHELDetector{Sys: sys}, nil
	case KindSUSE:
		return SUSEDetector{Sys: sys}, nil
	case KindNixOS:
		return NixOSDetector{Sys: sys}, nil
	case KindRPMOSTree:
		return RPMOSTreeDetector{Sys: sys}, nil
	case KindKernel:
		return KernelDetector{Sys: sys}, nil
	case KindNeedrestart:
		return NeedrestartDetector{Sys: sys}, nil
	}
	return nil, fmt.Errorf("unknown detector kind %q", kind)
}

// ChooseKinds returns the detector kinds for a host whose os-release(5) file
// holds osRelease, and whose root has ostreeBooted (/run/ostree-booted: an
// rpm-ostree or other OSTree host). The distribution's own detector is chosen
// by ID, then by ID_LIKE in order; a distribution none of them knows gets
// the kernel detector, which works anywhere a kernel is installed in /boot
// or /lib/modules.
func ChooseKinds(osRelease []byte, ostreeBooted bool) []string {
	if ostreeBooted {
		return []string{KindRPMOSTree}
	}
	vals := ParseOSRelease(osRelease)
	ids := append([]string{vals["ID"]}, strings.Fields(vals["ID_LIKE"])...)
	for _, id := range ids {
		switch {
		case id == "debian" || id == "ubuntu":
			return []string{KindDebian}
		case id == "rhel" || id == "fedora" || id == "centos":
			return []string{KindRHEL}
		case id == "suse" || strings.HasPrefix(id, "opensuse") || strings.HasPrefix(id, "sle"):
			return []string{KindSUSE}
		case id == "nixos":
			return []string{KindNixOS}
		}
	}
	return []string{KindKernel}
}

// ParseOSRelease reads the KEY=value lines of an os-release(5) file, values
// unquoted.
func ParseOSRelease(b []byte) map[string]string {
	vals := map[string]string{}
	for _, l := range lines(b) {
		k, v, ok := strings.Cut(l, "=")
		if !ok || strings.HasPrefix(l, "#") {
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = strings.ReplaceAll(v[1:len(v)-1], `\"`, `"`)
		}
		vals[strings.TrimSpace(k)] = v
	}
	return vals
}

// ResolveKinds expands KindAuto in kinds from the host's os-release file
// (/etc/os-release, else /usr/lib/os-release) under the system's root, and
// drops repeats. Without an os-release file, auto stands for nothing: the
// returned note says so, for the log.
func ResolveKinds(kinds []string, sys System) (out []string, note string) {
	for _, k := range kinds {
		if k != KindAuto {
			out = append(out, k)
			continue
		}
		var b []byte
		err := fs.ErrNotExist
		for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
			if b, err = os.ReadFile(sys.Path(p)); err == nil {
				break
			}
		}
		if err != nil {
			note = fmt.Sprintf("no os-release file under %s (%v): detectors = [\"auto\"] chose none", sys.Path("/"), err)
			continue
		}
		ostree, _ := fileExists(sys.Path("/run/ostree-booted"))
		out = append(out, ChooseKinds(b, ostree)...)
	}
	var uniq []string
	for _, k := range out {
		if !slices.Contains(uniq, k) {
			uniq = append(uniq, k)
		}
	}
	return uniq, note
}
