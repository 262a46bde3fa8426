package agent

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// Rebooter reboots the host. On success the process is usually killed by the
// reboot before Reboot returns.
type Rebooter interface {
	Reboot(ctx context.Context) error
}

// CommandRebooter runs a command given as argv (no shell), e.g. systemctl reboot,
// with the agent's environment minus its secrets (cmdenv.go) except PassEnv.
type CommandRebooter struct {
	Argv    []string
	PassEnv []string
}

// Reboot runs the command.
func (c CommandRebooter) Reboot(ctx context.Context) error {
	if len(c.Argv) == 0 {
		return errors.New("reboot command: empty")
	}
	if err := runCommand(ctx, c.Argv, 0, c.PassEnv); err != nil {
		return err
	}
	return nil
}

// SignalRebooter sends a signal to PID 1; systemd reboots on SIGRTMIN+5 (39).
// It needs the host's PID namespace and CAP_KILL.
type SignalRebooter struct {
	Signal int
	Kill   func(pid int, sig syscall.Signal) error // default syscall.Kill; tests fake it
}

// Reboot signals PID 1.
func (s SignalRebooter) Reboot(context.Context) error {
	kill := s.Kill
	if kill == nil {
		kill = syscall.Kill
	}
	if err := kill(1, syscall.Signal(s.Signal)); err != nil {
		return fmt.Errorf("signal %d to PID 1: %w", s.Signal, err)
	}
	return nil
}

// LogindCaller is the D-Bus call the logind rebooter makes; tests fake it.
type LogindCaller interface {
	Call(ctx context.Context, method string, args ...any) error
}

// LogindRebooter asks systemd-logind over the system D-Bus to reboot
// (org.freedesktop.login1.Manager.Reboot, interactive=false), as locksmith does.
type LogindRebooter struct {
	Caller LogindCaller // default: the system bus
}

// Reboot calls logind.
func (l LogindRebooter) Reboot(ctx context.Context) error {
	c := l.Caller
	if c == nil {
		c = systemBus{}
	}
	if err := c.Call(ctx, "org.freedesktop.login1.Manager.Reboot", false); err != nil {
		return fmt.Errorf("logind reboot: %w", err)
	}
	return nil
}

type systemBus struct{}

func (systemBus) Call(ctx context.Context, method string, args ...any) error {
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("system bus: %w", err)
	}
	defer conn.Close()
	obj := conn.Object("org.freedesktop.login1", "/org/freedesktop/login1")
	return obj.CallWithContext(ctx, method, 0, args...).Err
}

// RunHooks runs each hook (argv, no shell) in order, each within timeout; the first
// failure stops the rest. Hooks run with the agent's environment minus its secrets
// (cmdenv.go), except the variables named in passEnv.
func RunHooks(ctx context.Context, hooks [][]string, timeout time.Duration, passEnv ...string) error {
	for _, h := range hooks {
		if len(h) == 0 {
			continue
		}
		if err := runCommand(ctx, h, timeout, passEnv); err != nil {
			return err
		}
	}
	return nil
}

// maxMessage caps the command output kept in an error (and so in the host record).
const maxMessage = 200

// CommandError is a command (a hook, the reboot command) that failed: its argv,
// its exit status (-1 when it did not exit by itself: not started, timed out,
// killed) and the first line of its standard error, capped.
type CommandError struct {
	Argv       []string
	ExitStatus int
	Stderr     string
	Err        error
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("`%s`: %v", strings.Join(e.Argv, " "), e.Err)
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

func (e *CommandError) Unwrap() error { return e.Err }

// runCommand runs argv (no shell) within timeout (0: none).
func runCommand(ctx context.Context, argv []string, timeout time.Duration, pass []string) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var stderr strings.Builder
	cmd := command(ctx, argv, pass) // the environment without the agent's secrets
	cmd.Stderr = &capWriter{b: &stderr, left: 4096}
	err := cmd.Run()
	if err == nil {
		return nil
	}
	ce := &CommandError{Argv: argv, ExitStatus: -1, Stderr: firstLine(commandOutput([]byte(stderr.String())), maxMessage), Err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() && ctx.Err() == nil {
		ce.ExitStatus = ee.ExitCode()
	}
	if ctx.Err() == context.DeadlineExceeded {
		ce.Err = fmt.Errorf("timed out after %s", timeout)
	}
	return ce
}

// capWriter keeps at most left bytes and drops the rest.
type capWriter struct {
	b    *strings.Builder
	left int
}

func (w *capWriter) Write(p []byte) (int, error) {
	n := min(len(p), w.left)
	w.b.Write(p[:n])
	w.left -= n
	return len(p), nil
}

// firstLine returns the first non-empty line of s, at most n bytes (cut on a rune
// boundary).
func firstLine(s string, n int) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			if len(l) > n {
				l = strings.ToValidUTF8(l[:n], "") + "…"
			}
			return l
		}
	}
	return ""
}
