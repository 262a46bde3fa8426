package nodemeta

import (
	"io"
	"log/slog"
	"sync"
)

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func newLogger(mu *sync.Mutex, w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(lockedWriter{mu, w}, nil))
}
