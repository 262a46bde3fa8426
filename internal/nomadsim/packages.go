package nomadsim

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// SetPackagesNeeded makes host need a reboot for packages, as Debian's
// unattended-upgrades leaves it: /var/run/reboot-required.pkgs lists the
// packages, then /var/run/reboot-required exists, both under the host's
// folder (an agent whose detector_root is that folder and whose detectors
// include "debian" reads them; the list's hash is the need's fingerprint).
// A boot removes both, as /run is a tmpfs.
func (s *Sim) SetPackagesNeeded(host string, packages []string) error {
	dir, err := s.hostDir(host)
	if err != nil {
		return err
	}
	if len(packages) == 0 {
		return fmt.Errorf("host %s: no packages", host)
	}
	run := filepath.Join(dir, "var", "run")
	if err := os.MkdirAll(run, 0o755); err != nil {
		return fmt.Errorf("host %s: %w", host, err)
	}
	if err := os.WriteFile(filepath.Join(dir, debianRunFiles[1]), []byte(strings.Join(packages, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("host %s: %w", host, err)
	}
	if err := os.WriteFile(filepath.Join(dir, debianRunFiles[0]), []byte("*** System restart required ***\n"), 0o644); err != nil {
		return fmt.Errorf("host %s: %w", host, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bumpLocked()
	var nodeID string
	if h, ok := s.hosts[host]; ok {
		nodeID = h.NodeID
	}
	s.eventLocked(Event{Type: EventHostRebootNeeded, Host: host, NodeID: nodeID,
		Details: map[string]string{"reason": "packages: " + strings.Join(packages, ", ")}})
	return nil
}

// ctlSetPackagesNeeded: PUT /sim/v1/hosts/<host>/packages {"packages": [...]}.
func (s *Sim) ctlSetPackagesNeeded(r *http.Request) (any, *controlError) {
	if _, cerr := s.ctlHostName(r); cerr != nil {
		return nil, cerr
	}
	var body struct {
		Packages []string `json:"packages"`
	}
	if cerr := decodeControlBodyOptional(r, &body); cerr != nil {
		return nil, cerr
	}
	return s.ctlHostOp(r, func(host string) error { return s.SetPackagesNeeded(host, body.Packages) })
}

// ctlBootBlock: PUT (the host fails to boot) and DELETE (it boots again)
// /sim/v1/hosts/<host>/boot-block.
func (s *Sim) ctlBootBlock(blocked bool) controlFunc {
	return func(r *http.Request) (any, *controlError) {
		return s.ctlHostOp(r, func(host string) error { return s.SetBootBlocked(host, blocked) })
	}
}
