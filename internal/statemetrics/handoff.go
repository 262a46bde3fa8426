package statemetrics

import (
	"sync"
	"time"
)

// HandOffs observe the slot hand-offs of one coordinator: when a cycle of
// each group last ended (its slot freed), until the group's next drain
// starts. The plan writes of a pass run side by side: its methods are safe
// from any goroutine.
type HandOffs struct {
	m     *Metrics
	mu    sync.Mutex
	freed map[string]time.Time
}

// NewHandOffs returns hand-offs observed on m.
func NewHandOffs(m *Metrics) *HandOffs { return &HandOffs{m: m} }

// Forget forgets every slot freed: a new term did not see them free.
func (h *HandOffs) Forget() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.freed)
}

// SlotFreed notes that a cycle of group ended at at, freeing a slot of the
// group.
func (h *HandOffs) SlotFreed(group string, at time.Time) {
	if at.IsZero() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.freed == nil {
		h.freed = map[string]time.Time{}
	}
	h.freed[group] = at
}

// DrainStarted observes the slot hand-off of a drain granted now to a host of
// group that asked at requested: from the later of its asking and the last
// freeing of a slot of the group (SlotFreed). The first drain of a group after
// the coordinator starts leading is not observed (it did not see the slot
// free).
func (h *HandOffs) DrainStarted(group string, requested, now time.Time) {
	h.mu.Lock()
	freed, ok := h.freed[group]
	delete(h.freed, group)
	h.mu.Unlock()
	if ok {
		h.m.HandOff(freed, requested, now)
	}
}
