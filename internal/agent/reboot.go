package agent

import (
	"context"
	"errors"
	"fmt"
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
	out, err := command(ctx, c.Argv, c.PassEnv).CombinedOutput()
	if err != nil {
		return fmt.Errorf("reboot command `%s`: %w: %s", strings.Join(c.Argv, " "), err, commandOutput(out))
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
		hctx, cancel := context.WithTimeout(ctx, timeout)
		out, err := command(hctx, h, passEnv).CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("hook `%s`: %w: %s", strings.Join(h, " "), err, commandOutput(out))
		}
	}
	return nil
}
