//go:build !norollbootsim

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/syncbuf"
)

// With -json the frames follow each other bare, a stream of documents, and a
// failed read goes to stderr.
func TestStatusWatchJSON(t *testing.T) {
	out, errOut := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	w := statusWatch{out: out, errOut: errOut, json: true, interval: time.Hour}
	w.draw(time.Now(), []byte("{\"hosts\": []}\n"), nil)
	w.draw(time.Now(), nil, errors.New("nomad is away"))
	w.draw(time.Now(), []byte("{\"hosts\": [1]}\n"), nil)
	if got, want := out.String(), "{\"hosts\": []}\n{\"hosts\": [1]}\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got := errOut.String(); got != "cannot read the status (retrying): nomad is away\n" {
		t.Errorf("stderr %q", got)
	}
}

// TestStatusWatch: a frame at once, another on each change of the state (the
// interval is far away), in place on a terminal, below a separator otherwise;
// a failed read is shown and the watch goes on; Ctrl-C ends it cleanly.
func TestStatusWatch(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		t.Run(fmt.Sprintf("terminal=%v", terminal), func(t *testing.T) {
			var mu sync.Mutex
			index, frames := uint64(1), 0
			changed := make(chan struct{})
			change := func() {
				mu.Lock()
				index++
				close(changed)
				changed = make(chan struct{})
				mu.Unlock()
			}
			state := func(ctx context.Context, idx uint64, wait time.Duration) (uint64, error) {
				mu.Lock()
				cur, ch := index, changed
				mu.Unlock()
				if idx == 0 || cur > idx {
					return cur, nil
				}
				select {
				case <-ch:
				case <-ctx.Done():
					return idx, ctx.Err()
				}
				mu.Lock()
				defer mu.Unlock()
				return index, nil
			}
			frame := func(_ context.Context, w io.Writer, _ time.Time) error {
				mu.Lock()
				frames++
				n := frames
				mu.Unlock()
				if n == 2 {
					return errors.New("nomad is away")
				}
				fmt.Fprintf(w, "frame %d\n", n)
				return nil
			}
			out := &syncbuf.Buffer{}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- statusWatch{out: out, terminal: terminal, interval: time.Hour, timeout: time.Minute,
					state: state, frame: frame}.run(ctx)
			}()
			waitOutput := func(want string) {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for !strings.Contains(out.String(), want) {
					if time.Now().After(deadline) {
						t.Fatalf("no %q in:\n%s", want, out.String())
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			waitOutput("frame 1\n")
			change()
			waitOutput("cannot read the status (retrying): nomad is away\n")
			change()
			waitOutput("frame 3\n")
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("run: %v", err)
			}
			got := out.String()
			if n := strings.Count(got, ansiHomeClear); terminal && n != 3 || !terminal && n != 0 {
				t.Errorf("%d screen clears in:\n%q", n, got)
			}
			if n := strings.Count(got, "\n---- "); !terminal && n != 2 || terminal && n != 0 {
				t.Errorf("%d separators in:\n%q", n, got)
			}
		})
	}
}
