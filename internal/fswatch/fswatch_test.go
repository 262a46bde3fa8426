package fswatch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func expectNotified(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("no notification after %s", what)
	}
}

func expectQuiet(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("notified after %s", what)
	case <-time.After(200 * time.Millisecond):
	}
}

// A subscriber hears of its own file being created, written and removed, and
// not of another file in the same directory; two subscribers share the
// directory's watch, and one that ends leaves the other's.
func TestNotify(t *testing.T) {
	dir := t.TempDir()
	sentinel := filepath.Join(dir, "reboot-required")
	ctx := t.Context()
	a, err := Notify(ctx, sentinel)
	if err != nil {
		t.Fatal(err)
	}
	bctx, stopB := context.WithCancel(ctx)
	b, err := Notify(bctx, filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}

	if err := os.WriteFile(sentinel, []byte("*** System restart required ***\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	expectNotified(t, a, "the sentinel was created")
	expectQuiet(t, b, "another file was created")

	stopB()
	// A subscription ends soon after its context (context.AfterFunc), not
	// before stopB returns: the event of a write before then may still reach b.
	waitSubscribers(t, dir, 1)
	if err := os.WriteFile(filepath.Join(dir, "other"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := os.Remove(sentinel); err != nil {
		t.Fatal(err)
	}
	expectNotified(t, a, "the sentinel was removed, with the other subscriber gone")
	expectQuiet(t, b, "its subscription ended")
}

// waitSubscribers waits until the shared hub holds n subscriptions of dir.
func waitSubscribers(t *testing.T, dir string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		shared.mu.Lock()
		have := len(shared.subs[filepath.Clean(dir)])
		shared.mu.Unlock()
		if have == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d subscriptions of %s, want %d", have, dir, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// A watch that could not be set up leaves no notification instance open.
func TestFailedNotifyLeavesNothingOpen(t *testing.T) {
	var h hub
	if _, err := h.notify(t.Context(), filepath.Join(t.TempDir(), "no-such-dir", "reboot-required")); err == nil {
		t.Fatal("watching a file in a missing directory succeeded")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w != nil {
		t.Error("the notification instance is still open with nobody listening")
	}
}
