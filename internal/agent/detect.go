// Package agent is rollboot's per-host mechanism: it notices that its host needs a
// reboot, publishes the host record, waits for the coordinator's go-ahead in its
// plan variable, reboots, and after boot reports the new boot ID. It never decides
// policy.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/fswatch"
)

// Detector tells whether the host needs a reboot. An error is never a reason to
// reboot.
type Detector interface {
	RebootRequired(ctx context.Context) (Need, error)
}

// Need is a detector's answer: whether a reboot is needed, why in words
// ("kernel 6.8.0-49-generic installed, 6.8.0-45-generic running"), and a
// fingerprint of what the reboot installs ("" when the detector cannot tell):
// the same need keeps its fingerprint, so a changed fingerprint is a new need.
type Need struct {
	Required    bool
	Reason      string
	Fingerprint string
}

// Notifier is a detector that can tell when its answer may have changed, so
// that the agent asks it at once rather than at its next poll.
type Notifier interface {
	// Changes returns a channel that receives a value after each such change,
	// until ctx ends; an error means the detector is only polled.
	Changes(ctx context.Context) (<-chan struct{}, error)
}

// FileDetector reports a reboot as needed while a sentinel file exists (Debian's
// /var/run/reboot-required).
type FileDetector struct{ Path string }

// Changes tells when the sentinel file is created or removed (the kernel's file
// notifications): a patch run's sentinel is seen within milliseconds, not at
// the next poll.
func (f FileDetector) Changes(ctx context.Context) (<-chan struct{}, error) {
	return fswatch.Notify(ctx, f.Path)
}

// RebootRequired stats the sentinel file.
func (f FileDetector) RebootRequired(context.Context) (Need, error) {
	_, err := os.Stat(f.Path)
	switch {
	case err == nil:
		return Need{Required: true, Reason: "sentinel file " + f.Path + " exists"}, nil
	case errors.Is(err, fs.ErrNotExist):
		return Need{}, nil
	default:
		return Need{}, fmt.Errorf("sentinel file %s: %w", f.Path, err)
	}
}

// CommandDetector runs a command (argv, no shell): exit 0 means a reboot is needed,
// exit 1 means it is not, and anything else (another code, a signal, a program
// that cannot be started, a timeout) is an error. Treating only exit 0 as "reboot"
// and only exit 1 as "no reboot" makes Kured's reboot loop (#976: a missing
// program's 127 inverted by `!` into 0) impossible: no shell inverts anything.
//
// The command runs with the agent's environment minus its secrets (cmdenv.go),
// except the variables named in PassEnv.
type CommandDetector struct {
	Argv    []string
	Timeout time.Duration
	PassEnv []string
}

// RebootRequired runs the command.
func (c CommandDetector) RebootRequired(ctx context.Context) (Need, error) {
	if len(c.Argv) == 0 {
		return Need{}, errors.New("sentinel command: empty")
	}
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	out, err := command(ctx, c.Argv, c.PassEnv).CombinedOutput()
	name := strings.Join(c.Argv, " ")
	if err == nil {
		return Need{Required: true, Reason: "sentinel command `" + name + "` exited 0"}, nil
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return Need{}, nil
	}
	if ctx.Err() != nil {
		return Need{}, fmt.Errorf("sentinel command `%s`: timed out after %s", name, c.Timeout)
	}
	msg := commandOutput(out)
	if msg != "" {
		return Need{}, fmt.Errorf("sentinel command `%s`: %w (output: %s); only exit 0 (reboot) and 1 (no reboot) are answers", name, err, msg)
	}
	return Need{}, fmt.Errorf("sentinel command `%s`: %w; only exit 0 (reboot) and 1 (no reboot) are answers", name, err)
}

// ReadBootID reads the kernel's boot ID (/proc/sys/kernel/random/boot_id), which
// changes on every boot.
func ReadBootID(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("boot ID: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("boot ID: %s is empty", path)
	}
	return id, nil
}

// ReadBootTime reads when the host booted from the "btime" line of the
// kernel's /proc/stat (seconds since the epoch; proc(5)).
func ReadBootTime(path string) (time.Time, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("boot time: %w", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || sec <= 0 {
				return time.Time{}, fmt.Errorf("boot time: %s: btime %q is not a time", path, strings.TrimSpace(v))
			}
			return time.Unix(sec, 0).UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("boot time: %s has no btime line", path)
}
