package store

import (
	"context"
	"sync"

	"github.com/hashicorp/nomad/api"
)

// pathCache holds the decoded form of each variable under a prefix, by path,
// with the ModifyIndex it was decoded at: a list that shows the same index needs
// no read. The host records and the per-host control variables are read through
// one each.
type pathCache[T any] struct {
	mu sync.Mutex
	m  map[string]*cachedVar[T]
	// note, when set, is told of every entry read (e) or forgotten (nil),
	// with the cache locked (the host records: the copies' book, copies.go).
	note func(path string, e *cachedVar[T])
}

type cachedVar[T any] struct {
	modify uint64
	val    T
}

// refresh hands each the decoded value of every variable in metas, in their
// order: those the cache holds at an older ModifyIndex than metas name (every
// one, the first time) are read in parallel and decoded again; one deleted since the list is
// left out, and paths no longer listed are forgotten. The cache is updated in
// place: a list where little changed costs no copy of every entry, and each
// makes the caller's only copy (each is called with the cache locked).
func refresh[T any](ctx context.Context, s *Store, c *pathCache[T], metas []*api.VariableMetadata, decode func(*api.Variable) T, each func(T)) error {
	// kept[i]: the cached entry of metas[i], when it is current (entries are
	// never changed, only replaced: one taken here stays what it was).
	kept := make([]*cachedVar[T], len(metas))
	var stale []string
	c.mu.Lock()
	for i, m := range metas {
		// A cached entry newer than the list is current too: a read after an
		// older list (a watch's answer a pass takes again while the watch has
		// not answered the writes since) got the newer one, and reading it
		// again at each such pass would get it again.
		if e := c.m[m.Path]; e != nil && e.modify >= m.ModifyIndex {
			kept[i] = e
			continue
		}
		stale = append(stale, m.Path)
	}
	c.mu.Unlock()
	read, err := s.readEach(ctx, stale)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]*cachedVar[T], len(metas))
	}
	n, next := 0, 0 // next: the next of stale (and read), in the order of metas
	for i, m := range metas {
		e := kept[i]
		if e == nil {
			v := read[next]
			next++
			if v == nil {
				delete(c.m, m.Path) // deleted since the list
				c.noted(m.Path, nil)
				continue
			}
			e = &cachedVar[T]{modify: v.ModifyIndex, val: decode(v)}
			c.m[m.Path] = e
			c.noted(m.Path, e)
		}
		each(e.val)
		n++
	}
	if len(c.m) > n {
		// Some paths are no longer listed: forget them.
		listed := make(map[string]bool, len(metas))
		for _, m := range metas {
			listed[m.Path] = true
		}
		for p := range c.m {
			if !listed[p] {
				delete(c.m, p)
				c.noted(p, nil)
			}
		}
	}
	return nil
}

func (c *pathCache[T]) noted(path string, e *cachedVar[T]) {
	if c.note != nil {
		c.note(path, e)
	}
}

// seed puts into the cache each variable of metas that vars gives (a copy
// of it at the listed index, copies.go) and the cache lacks at that index,
// and returns how many of metas it then holds at their listed index.
func (c *pathCache[T]) seed(metas []*api.VariableMetadata, vars func(*api.VariableMetadata) *api.Variable, decode func(*api.Variable) T) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	held := 0
	for _, m := range metas {
		if e := c.m[m.Path]; e != nil && e.modify == m.ModifyIndex {
			held++
			continue
		}
		v := vars(m)
		if v == nil {
			continue
		}
		held++
		if c.m == nil {
			c.m = make(map[string]*cachedVar[T], len(metas))
		}
		e := &cachedVar[T]{modify: v.ModifyIndex, val: decode(v)}
		c.m[m.Path] = e
		c.noted(m.Path, e)
	}
	return held
}
