package nomadsim

import "fmt"

// bootBlocks are hosts that do not come back from a reboot (a machine that
// fails to boot: firmware, disk, a kernel that panics). A host that is down stays
// down, so its node stays `down` (nomad/heartbeat.go: nothing heartbeats for it)
// until the block is lifted.
type bootBlocks struct {
	blocked map[string]bool
	pending map[string]bool // down, and its boot was held back
}

// SetBootBlocked makes host fail to boot (true): a reboot takes it down and it
// does not come back. false lifts the block; a host held down boots at once.
func (s *Sim) SetBootBlocked(host string, blocked bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[host]
	if !ok {
		return fmt.Errorf("host %q not found", host)
	}
	if s.boots.blocked == nil {
		s.boots.blocked, s.boots.pending = map[string]bool{}, map[string]bool{}
	}
	s.boots.blocked[host] = blocked
	if !blocked && s.boots.pending[host] {
		delete(s.boots.pending, host)
		if !h.Up {
			s.bootLocked(h)
		}
	}
	return nil
}

// holdBootLocked reports whether host's boot is held back (and remembers it).
func (s *Sim) holdBootLocked(host string) bool {
	if !s.boots.blocked[host] {
		return false
	}
	s.boots.pending[host] = true
	return true
}
