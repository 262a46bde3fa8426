package nomadsim

import (
	"context"
	"testing"
	"time"
)

// A host whose boot is blocked goes down and stays down, its node `down`; lifting
// the block boots it with a new boot ID.
func TestSetBootBlocked(t *testing.T) {
	s, err := New(Config{Clients: 1, HeartbeatTTL: 50 * time.Millisecond, BootTime: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := s.Hosts()[0]
	if err := s.SetBootBlocked(h.Name, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Reboot(h.Name); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Long after its boot time: the node was marked down, and the host is still down.
	if err := s.WaitFor(ctx, func(v *View) bool {
		n, _ := v.Node(h.NodeID)
		return n.Status == "down"
	}); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*s.cfg.BootTime)
	err = s.WaitFor(wctx, func(v *View) bool { hh, _ := v.Host(h.Name); return hh.Up })
	wcancel()
	if err == nil {
		t.Fatal("a host whose boot is blocked came back")
	}
	if err := s.SetBootBlocked(h.Name, false); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor(ctx, func(v *View) bool {
		hh, _ := v.Host(h.Name)
		n, _ := v.Node(h.NodeID)
		return hh.Up && hh.BootID != h.BootID && n.Status == "ready"
	}); err != nil {
		t.Fatal(err)
	}
}
