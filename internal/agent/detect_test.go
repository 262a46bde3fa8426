package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

func TestFileDetector(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "reboot-required")
	d := FileDetector{Path: path}
	req, _, err := d.RebootRequired(context.Background())
	if err != nil || req {
		t.Fatalf("absent file: required=%v err=%v", req, err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	req, why, err := d.RebootRequired(context.Background())
	if err != nil || !req || !strings.Contains(why, path) {
		t.Fatalf("present file: required=%v why=%q err=%v", req, why, err)
	}
	// A path that cannot be examined is an error, not a reboot.
	blocked := FileDetector{Path: filepath.Join(path, "under-a-file")}
	req, _, err = blocked.RebootRequired(context.Background())
	if err == nil || req {
		t.Fatalf("unreadable path: required=%v err=%v", req, err)
	}
}

func TestCommandDetector(t *testing.T) {
	tests := []struct {
		name     string
		argv     []string
		timeout  time.Duration
		required bool
		wantErr  string
	}{
		{name: "exit 0 means a reboot is needed", argv: []string{"sh", "-c", "exit 0"}, required: true},
		{name: "exit 1 means no reboot", argv: []string{"sh", "-c", "exit 1"}},
		{name: "exit 2 is an error", argv: []string{"sh", "-c", "echo broken >&2; exit 2"}, wantErr: "exit status 2"},
		// Kured #976: `! needs-restarting` turned a missing program's 127 into 0 and
		// rebooted forever. Here a missing program is an error, never a reboot.
		{name: "a missing program is an error", argv: []string{"/nonexistent/needs-restarting", "-r"}, wantErr: "no such file"},
		{name: "exit 127 from a shell is an error", argv: []string{"sh", "-c", "/nonexistent/needs-restarting"}, wantErr: "exit status 127"},
		{name: "a timeout is an error", argv: []string{"sleep", "5"}, timeout: 50 * time.Millisecond, wantErr: "timed out"},
		{name: "an empty command is an error", argv: nil, wantErr: "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := CommandDetector{Argv: tc.argv, Timeout: tc.timeout}
			req, _, err := d.RebootRequired(context.Background())
			if req != tc.required {
				t.Errorf("required = %v, want %v", req, tc.required)
			}
			if tc.wantErr == "" && err != nil {
				t.Errorf("err = %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want it to mention %q", err, tc.wantErr)
			}
		})
	}
}

func TestReadBootID(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "boot_id")
	if _, err := ReadBootID(p); err == nil {
		t.Error("missing file: no error")
	}
	os.WriteFile(p, []byte("\n"), 0o644)
	if _, err := ReadBootID(p); err == nil {
		t.Error("empty file: no error")
	}
	os.WriteFile(p, []byte("3f1c9a1e-1111-4222-8333-944455556666\n"), 0o644)
	id, err := ReadBootID(p)
	if err != nil || id != "3f1c9a1e-1111-4222-8333-944455556666" {
		t.Errorf("id = %q, err = %v", id, err)
	}
}

func TestRebooters(t *testing.T) {
	t.Run("signal goes to PID 1", func(t *testing.T) {
		var gotPID int
		var gotSig syscall.Signal
		r := SignalRebooter{Signal: 39, Kill: func(pid int, sig syscall.Signal) error { gotPID, gotSig = pid, sig; return nil }}
		if err := r.Reboot(context.Background()); err != nil || gotPID != 1 || gotSig != 39 {
			t.Errorf("pid %d sig %d err %v", gotPID, gotSig, err)
		}
	})
	t.Run("logind is asked without interaction", func(t *testing.T) {
		f := &fakeBus{}
		if err := (LogindRebooter{Caller: f}).Reboot(context.Background()); err != nil {
			t.Fatal(err)
		}
		if f.method != "org.freedesktop.login1.Manager.Reboot" || len(f.args) != 1 || f.args[0] != false {
			t.Errorf("called %s %v", f.method, f.args)
		}
	})
	t.Run("command runs argv without a shell", func(t *testing.T) {
		dir := t.TempDir()
		// A shell would split this at ';' and create "rebooted" instead.
		marker := filepath.Join(dir, "rebooted; touch injected")
		if err := (CommandRebooter{Argv: []string{"touch", marker}}).Reboot(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("command did not run: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "rebooted")); err == nil {
			t.Error("argument was interpreted by a shell")
		}
	})
	t.Run("a failing command is an error", func(t *testing.T) {
		if err := (CommandRebooter{Argv: []string{"false"}}).Reboot(context.Background()); err == nil {
			t.Error("no error")
		}
	})
}

type fakeBus struct {
	method string
	args   []any
}

func (f *fakeBus) Call(_ context.Context, method string, args ...any) error {
	f.method, f.args = method, args
	return nil
}

func TestRunHooks(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	err := RunHooks(context.Background(), [][]string{{"touch", a}, {"false"}, {"touch", b}}, time.Second)
	if err == nil || !strings.Contains(err.Error(), "false") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(a); err != nil {
		t.Error("first hook did not run")
	}
	if _, err := os.Stat(b); err == nil {
		t.Error("hook after a failure ran")
	}
}

// The sentinel file is seen when it is written, not at the next poll: with a
// poll an hour apart, the host record says a reboot is needed within seconds
// of the file appearing, and no longer once it is removed.
func TestSentinelSeenWhenWritten(t *testing.T) {
	_, h, client := simHost(t, 1)
	st := store.New(client.Variables(), "rollboot", "")
	sentinel := filepath.Join(h.Dir, "reboot-required")
	a := New(Options{Host: h.Name, Store: st, Self: client.Agent(), BootIDFile: filepath.Join(h.Dir, "boot_id"),
		Detectors: []Detector{FileDetector{Path: sentinel}}, Rebooter: &flakyRebooter{ch: make(chan struct{}, 1)},
		PollEvery: time.Hour, SlowEvery: time.Hour})
	run(t, a)
	needs := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			rec, err := st.Host(t.Context(), h.Name)
			if err == nil && rec.Host != "" && rec.RebootRequired == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("record %+v (%v): reboot required is not %t 10s after the sentinel changed", rec, err, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	needs(false)
	if err := os.WriteFile(sentinel, []byte("*** System restart required ***\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	needs(true)
	if err := os.Remove(sentinel); err != nil {
		t.Fatal(err)
	}
	needs(false)
}
