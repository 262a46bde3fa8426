package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rollboot/rollboot/internal/status"
	"github.com/rollboot/rollboot/internal/watch"
)

// ANSI sequences: cursor home, then clear the screen.
const ansiHomeClear = "\x1b[H\x1b[2J"

// statusWatch is `rollboot status -watch`: the status drawn again on every
// change of rollboot's state (a blocking query) and at least every interval,
// until ctx ends. On a terminal each frame replaces the last; otherwise the
// frames follow each other below a separator line. JSON frames follow each
// other bare (a stream of documents, as jq reads them), read errors going to
// errOut.
type statusWatch struct {
	out, errOut io.Writer
	terminal    bool
	json        bool
	interval    time.Duration
	timeout     time.Duration // of each read
	// state blocks until the state changes past index or wait passes.
	state func(ctx context.Context, index uint64, wait time.Duration) (uint64, error)
	// frame reads and renders one status at now.
	frame func(ctx context.Context, w io.Writer, now time.Time) error
}

// minRedraw is the least time between two frames: a burst of changes is one.
// watchRetry is how soon a failed read is tried again.
const (
	minRedraw  = 500 * time.Millisecond
	watchRetry = 2 * time.Second
)

func (s statusWatch) run(ctx context.Context) error {
	var idx uint64
	for {
		rctx, cancel := context.WithTimeout(ctx, s.timeout)
		if n, err := s.state(rctx, 0, 0); err == nil {
			idx = n // read before the status: a change after it wakes the wait
		}
		var buf bytes.Buffer
		now := time.Now()
		err := s.frame(rctx, &buf, now)
		cancel()
		if ctx.Err() != nil {
			return nil // interrupted
		}
		s.draw(now, buf.Bytes(), err)
		if !watch.Sleep(ctx, minRedraw) {
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, s.interval+s.timeout)
		if err != nil {
			watch.Sleep(wctx, min(s.interval, watchRetry)) // read again soon
		} else if idx == 0 {
			watch.Sleep(wctx, s.interval)
		} else if _, werr := s.state(wctx, idx, s.interval); werr != nil {
			watch.Sleep(wctx, s.interval) // do not spin on a failing watch
		}
		cancel()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// draw shows one frame; a failed read is shown in place of the status, and
// the watch goes on.
func (s statusWatch) draw(now time.Time, frame []byte, err error) {
	if s.json {
		if err != nil {
			fmt.Fprintf(s.errOut, "cannot read the status (retrying): %v\n", err)
			return
		}
		_, _ = s.out.Write(frame)
		return
	}
	head := fmt.Sprintf("rollboot status at %s (every change, at least every %s; Ctrl-C to stop)\n\n",
		now.Format(time.TimeOnly), s.interval)
	if err != nil {
		frame = []byte(fmt.Sprintf("cannot read the status (retrying): %v\n", err))
	}
	if s.terminal {
		fmt.Fprint(s.out, ansiHomeClear+head)
	} else {
		fmt.Fprintf(s.out, "---- %s\n", now.Format(time.RFC3339))
	}
	_, _ = s.out.Write(frame)
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// renderStatus renders the view as JSON, as a table of 100 columns, or,
// verbose, as a table as wide as its lines.
func renderStatus(w io.Writer, v status.View, now time.Time, asJSON, verbose bool) error {
	switch {
	case asJSON:
		return status.WriteJSON(w, v)
	case verbose:
		return status.WriteWide(w, v, now)
	}
	return status.WriteText(w, v, now)
}
