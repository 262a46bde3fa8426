// Package fswatch tells when a file appears, changes or goes, through the
// kernel's file notifications (inotify on Linux, via fsnotify), so that a
// sentinel such as /var/run/reboot-required is seen as soon as it is written
// rather than at the next poll.
//
// One notification instance serves the whole process while anyone listens,
// watching each directory once for every subscriber in it: Linux allows a user
// few instances (fs.inotify.max_user_instances, 128 by default) but many
// watches. Callers keep polling as well: a notification can be lost (the
// queue overflows) and some file systems send none.
package fswatch

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// hub is the process's notification instance and its subscribers.
type hub struct {
	mu   sync.Mutex
	w    *fsnotify.Watcher
	subs map[string]map[*sub]bool // by directory
}

type sub struct {
	name string        // the file's base name
	ch   chan struct{} // buffered 1: notifications coalesce
}

var shared hub

// Notify returns a channel that receives a value soon after the file at path
// is created, written, removed or renamed, until ctx ends. Notifications
// coalesce: one value may stand for several changes. It fails when the
// directory of path cannot be watched (it does not exist, or the limits of the
// kernel are reached).
func Notify(ctx context.Context, path string) (<-chan struct{}, error) {
	return shared.notify(ctx, path)
}

func (h *hub) notify(ctx context.Context, path string) (<-chan struct{}, error) {
	dir, name := filepath.Split(filepath.Clean(path))
	dir = filepath.Clean(dir)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			return nil, err
		}
		h.w, h.subs = w, map[string]map[*sub]bool{}
		go h.run(w)
	}
	if len(h.subs[dir]) == 0 {
		if err := h.w.Add(dir); err != nil {
			h.closeIfUnused()
			return nil, err
		}
		h.subs[dir] = map[*sub]bool{}
	}
	s := &sub{name: name, ch: make(chan struct{}, 1)}
	h.subs[dir][s] = true
	context.AfterFunc(ctx, func() { h.unsubscribe(dir, s) })
	return s.ch, nil
}

func (h *hub) unsubscribe(dir string, s *sub) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs[dir], s)
	if len(h.subs[dir]) == 0 {
		delete(h.subs, dir)
		_ = h.w.Remove(dir) // gone already if the directory was removed
	}
	h.closeIfUnused()
}

// closeIfUnused closes the notification instance when nobody listens (h.mu
// held); the next subscriber opens another.
func (h *hub) closeIfUnused() {
	if h.w != nil && len(h.subs) == 0 {
		_ = h.w.Close() // ends run
		h.w, h.subs = nil, nil
	}
}

// run hands each event to the subscribers of its file; an error (the queue
// overflowed: events were lost) wakes every subscriber, who look again.
func (h *hub) run(w *fsnotify.Watcher) {
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			dir, name := filepath.Split(ev.Name)
			h.wake(filepath.Clean(dir), name)
		case _, ok := <-w.Errors:
			if !ok {
				return
			}
			h.wake("", "")
		}
	}
}

// wake notifies the subscribers of name in dir ("": every subscriber).
func (h *hub) wake(dir, name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if dir != "" {
		for s := range h.subs[dir] {
			if s.name == name {
				s.notify()
			}
		}
		return
	}
	for _, subs := range h.subs {
		for s := range subs {
			s.notify()
		}
	}
}

func (s *sub) notify() {
	select {
	case s.ch <- struct{}{}:
	default: // one is waiting already
	}
}
