package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

func TestFileDetector(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "reboot-required")
	d := FileDetector{Path: path}
	need, err := d.RebootRequired(context.Background())
	if err != nil || need.Required {
		t.Fatalf("absent file: required=%v err=%v", need.Required, err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	need, err = d.RebootRequired(context.Background())
	if err != nil || !need.Required || !strings.Contains(need.Reason, path) {
		t.Fatalf("present file: %+v err=%v", need, err)
	}
	// A path that cannot be examined is an error, not a reboot.
	blocked := FileDetector{Path: filepath.Join(path, "under-a-file")}
	need, err = blocked.RebootRequired(context.Background())
	if err == nil || need.Required {
		t.Fatalf("unreadable path: required=%v err=%v", need.Required, err)
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
			need, err := d.RebootRequired(context.Background())
			if need.Required != tc.required {
				t.Errorf("required = %v, want %v", need.Required, tc.required)
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
	a := New(Options{Host: h.Name, Store: st, Local: client.Agent(), NodeList: client.Nodes(), BootIDFile: filepath.Join(h.Dir, "boot_id"),
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

// countingDetector counts how often it is asked, and says a reboot is needed
// once need is set. Wrapped in a notifyingDetector it is a Notifier that never
// notifies (every notification lost), or, with failChanges, one whose
// notifications cannot be had.
type countingDetector struct {
	asked       atomic.Int64
	need        atomic.Bool
	failChanges bool
}

func (d *countingDetector) RebootRequired(context.Context) (Need, error) {
	d.asked.Add(1)
	return Need{Required: d.need.Load(), Reason: "test need"}, nil
}

type notifyingDetector struct{ *countingDetector }

func (d notifyingDetector) Changes(context.Context) (<-chan struct{}, error) {
	if d.failChanges {
		return nil, errors.New("no notifications here")
	}
	return make(chan struct{}), nil
}

// When every cheap detector tells of its changes, the agent looks at them only
// every NotifiedPollEvery, in case a notification was lost, not every
// PollEvery: a detector that cannot tell, or whose notifications cannot be had,
// keeps the agent polling every PollEvery. A lost notification is caught by
// the slower look.
func TestPollSlowerWhenDetectorsNotify(t *testing.T) {
	const poll, notified, window = 10 * time.Millisecond, 400 * time.Millisecond, time.Second
	for _, tc := range []struct {
		name      string
		detectors func(d *countingDetector) []Detector
		polled    bool // every PollEvery
	}{
		{"every detector notifies", func(d *countingDetector) []Detector { return []Detector{notifyingDetector{d}} }, false},
		{"one cannot notify", func(d *countingDetector) []Detector {
			return []Detector{notifyingDetector{d}, &countingDetector{}}
		}, true},
		{"its notifications cannot be had", func(d *countingDetector) []Detector {
			d.failChanges = true
			return []Detector{notifyingDetector{d}}
		}, true},
		{"another's notifications cannot be had", func(d *countingDetector) []Detector {
			return []Detector{notifyingDetector{d}, notifyingDetector{&countingDetector{failChanges: true}}}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, h, client := simHost(t, 1)
			st := store.New(client.Variables(), "rollboot", "")
			d := &countingDetector{}
			a := New(Options{Host: h.Name, Store: st, Local: client.Agent(), NodeList: client.Nodes(), BootIDFile: filepath.Join(h.Dir, "boot_id"),
				Detectors: tc.detectors(d), Rebooter: &flakyRebooter{ch: make(chan struct{}, 1)},
				PollEvery: poll, NotifiedPollEvery: notified, SlowEvery: time.Hour})
			run(t, a)
			waitRecord(t, st, h.Name, "its record", func(rec store.HostRecord) bool { return rec.Host != "" })
			before := d.asked.Load()
			time.Sleep(window)
			asked := d.asked.Load() - before
			// Polled every 10ms: about 100 looks in the second; every 400ms: 2 or 3.
			if polled := asked > 20; polled != tc.polled {
				t.Fatalf("%d looks in %s, want polling every %s: %t", asked, window, poll, tc.polled)
			}
			d.need.Store(true) // no notification comes: the next look sees it
			waitRecord(t, st, h.Name, "the need seen without a notification", func(rec store.HostRecord) bool { return rec.RebootRequired })
		})
	}
}

// While the host's Vault is sealed the cheap look stays at PollEvery, even when
// every detector notifies: it also notices the unseal.
func TestFastEvery(t *testing.T) {
	for _, tc := range []struct {
		allNotify, sealed bool
		want              time.Duration
	}{
		{false, false, 500 * time.Millisecond},
		{true, false, 10 * time.Second},
		{true, true, 500 * time.Millisecond},
		{false, true, 500 * time.Millisecond},
	} {
		a := New(Options{})
		a.rec.VaultSealed = tc.sealed
		if got := a.fastEvery(tc.allNotify); got != tc.want {
			t.Errorf("all notify %t, Vault sealed %t: every %s, want %s", tc.allNotify, tc.sealed, got, tc.want)
		}
	}
}

// The boot time is the btime line of /proc/stat; anything else is an error,
// and so no boot time (no uptime need), never a made-up one.
func TestReadBootTime(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content string
		want    time.Time
		wantErr string
	}{
		{name: "btime among the other lines", content: "cpu  1 2 3\nintr 5\nctxt 42\nbtime 1764000000\nprocesses 9\n", want: time.Unix(1764000000, 0).UTC()},
		{name: "no btime line", content: "cpu  1 2 3\n", wantErr: "has no btime line"},
		{name: "btime not a number", content: "btime soon\n", wantErr: `btime "soon" is not a time`},
		{name: "btime zero", content: "btime 0\n", wantErr: "is not a time"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, fmt.Sprint(i))
			if err := os.WriteFile(p, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadBootTime(p)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !got.IsZero() {
					t.Fatalf("ReadBootTime = %s, %v; want an error with %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !got.Equal(tt.want) {
				t.Fatalf("ReadBootTime = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
	if _, err := ReadBootTime(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file: no error")
	}
}

// A sentinel command that leaves a child holding its output open ends at its
// timeout with an error, not when the child ends (an hour later here).
func TestCommandDetectorChildHoldsOutput(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child")
	d := CommandDetector{Argv: []string{"sh", "-c", "sleep 3600 & echo $! > " + pidFile + "; exec sleep 3600"}, Timeout: 200 * time.Millisecond}
	t.Cleanup(func() { // the child outlives the command: end it
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := d.RebootRequired(context.Background())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("err = %v, want a timeout", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the detector waited for the command's child")
	}
}

// writtenAfterLook is a FileDetector whose file is written right after its
// first look: the need appears between the agent's start and its loop.
type writtenAfterLook struct {
	FileDetector
	once sync.Once
}

func (d *writtenAfterLook) RebootRequired(ctx context.Context) (Need, error) {
	n, err := d.FileDetector.RebootRequired(ctx)
	d.once.Do(func() {
		err = errors.Join(err, os.WriteFile(d.Path, []byte("*** System restart required ***\n"), 0o644))
	})
	return n, err
}

// A sentinel written right after the start's look is seen when it is
// written, not at the next poll: the agent watches the file from before that
// look.
func TestSentinelWrittenRightAfterTheStart(t *testing.T) {
	_, h, client := simHost(t, 1)
	st := store.New(client.Variables(), "rollboot", "")
	d := &writtenAfterLook{FileDetector: FileDetector{Path: filepath.Join(h.Dir, "reboot-required")}}
	a := New(Options{Host: h.Name, Store: st, Local: client.Agent(), NodeList: client.Nodes(), BootIDFile: filepath.Join(h.Dir, "boot_id"),
		Detectors: []Detector{d}, Rebooter: &flakyRebooter{ch: make(chan struct{}, 1)},
		PollEvery: time.Hour, SlowEvery: time.Hour})
	run(t, a)
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := st.Host(t.Context(), h.Name)
		if err == nil && rec.RebootRequired {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("record %+v (%v): reboot required is not true 10s after the sentinel was written", rec, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
