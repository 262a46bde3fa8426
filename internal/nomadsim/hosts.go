package nomadsim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim/raftsim"
)

// Names of the per-host files in Host.Dir.
const (
	SentinelFile = "reboot-required" // like /var/run/reboot-required
	BootIDFile   = "boot_id"         // like /proc/sys/kernel/random/boot_id
	// StatFile is like the kernel's /proc/stat, reduced to its "btime" line
	// (the boot time in seconds since the epoch, proc(5)): written at each
	// boot, as the kernel sets it.
	StatFile = "stat"
)

// debianRunFiles are /var/run/reboot-required and its packages' list, as an
// agent whose detector_root is the host's folder reads them.
var debianRunFiles = []string{"var/run/reboot-required", "var/run/reboot-required.pkgs"}

// writeBootFiles writes the files a boot changes: the boot ID and the boot
// time.
func writeBootFiles(dir, bootID string, at time.Time) error {
	if err := os.WriteFile(filepath.Join(dir, BootIDFile), []byte(bootID+"\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, StatFile), []byte("btime "+strconv.FormatInt(at.Unix(), 10)+"\n"), 0o644)
}

// Reboot reboots host: it goes down at once (its agent address drops every
// connection), its client stops heartbeating (its node is marked down or
// disconnected if the leader's heartbeat timer runs out before the host is back:
// heartbeat.go), and after BootTime it boots with a new boot ID, its sentinel is
// removed (unless Config.KeepSentinelOnReboot) and its node registers again.
// A host whose client has drain_on_shutdown (SetDrainOnShutdown) goes down
// only once its client drained its node (selfdrain.go); a second Reboot
// meanwhile is refused.
func (s *Sim) Reboot(host string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[host]
	if !ok {
		return fmt.Errorf("host %q not found", host)
	}
	if !h.Up {
		return fmt.Errorf("host %q is down (already rebooting)", host)
	}
	if h.shuttingDown {
		return fmt.Errorf("host %q is shutting down (already rebooting)", host)
	}
	if h.DrainOnShutdown != nil && h.NodeID != "" {
		// The client drains its node before it stops (selfdrain.go).
		s.selfDrainLocked(h)
		return nil
	}
	s.goDownLocked(h)
	return nil
}

// goDownLocked takes h down for its reboot and boots it after BootTime.
func (s *Sim) goDownLocked(h *Host) {
	host := h.Name
	h.shuttingDown = false
	s.cluster.rebootGen[host]++
	gen := s.cluster.rebootGen[host]
	details := map[string]string{"boot_id": h.BootID}
	s.serverHealthAtRebootLocked(h, details)
	if h.NodeID != "" {
		// The client stops heartbeating: the leader's timer runs out at the
		// deadline of its last heartbeat (heartbeat.go).
		s.cluster.clientGoesSilentLocked(s, h)
	}
	h.Up = false
	s.powerGen++
	s.bumpLocked()
	s.eventLocked(Event{Type: EventHostRebootStart, Host: host, NodeID: h.NodeID, Details: details})
	if h.Server != nil {
		s.serversDownLocked(h)
	}
	s.after(s.cfg.BootTime, func() {
		if s.cluster.rebootGen[host] != gen || s.holdBootLocked(host) {
			return
		}
		s.bootLocked(h)
	})
}

// bootLocked brings h up with a new boot ID.
func (s *Sim) bootLocked(h *Host) {
	h.BootID = s.uuidLocked()
	if err := writeBootFiles(h.Dir, h.BootID, time.Now()); err != nil {
		s.eventLocked(Event{Type: EventHostBoot, Host: h.Name, Details: map[string]string{"error": err.Error()}})
	}
	if !s.cfg.KeepSentinelOnReboot {
		_ = os.Remove(filepath.Join(h.Dir, SentinelFile))
		// The Debian detector's files under the agent's detector_root: /run
		// (/var/run) is a tmpfs, empty after a boot (file-hierarchy(7)).
		for _, f := range debianRunFiles {
			_ = os.Remove(filepath.Join(h.Dir, f))
		}
	}
	h.Up = true
	h.Boots++
	s.powerGen++
	s.bumpLocked()
	s.eventLocked(Event{Type: EventHostBoot, Host: h.Name, NodeID: h.NodeID,
		Details: map[string]string{"boot_id": h.BootID}})
	if h.Server != nil {
		s.serversUpLocked(h)
	}
	if h.NodeID != "" {
		s.cluster.reregisterLocked(s, h)
	}
}

// reregisterLocked is the client registering again after boot (client.go
// registerNode → Node.Register → state_store.go upsertNodeTxn): the node keeps its
// status (Node.Register does not change it since Nomad 1.5), SchedulingEligibility,
// DrainStrategy and LastDrain; its heartbeats then move its status on
// (heartbeat.go clientHeartbeatLocked). Nothing makes it eligible again by itself.
func (c *clusterState) reregisterLocked(s *Sim, h *Host) {
	sn, ok := c.nodes[h.NodeID]
	if !ok {
		return
	}
	idx := s.bumpLocked()
	n := sn.node
	n.HTTPAddr = h.Addr
	// The new client process starts with no driver information
	// (client/client.go setupNode) and fingerprints every driver again, so
	// each driver's UpdateTime becomes the time of its first fingerprint
	// (client/node_updater.go batchFirstFingerprints, updateNodeFromDriver);
	// Node.Register also stamps StatusUpdatedAt (nomad/node_endpoint.go
	// Register). Neither event nor status changes for a node still ready.
	now := time.Now()
	drivers := make(map[string]*api.DriverInfo, len(n.Drivers))
	for name, d := range n.Drivers {
		c := *d
		c.UpdateTime = now
		drivers[name] = &c
	}
	n.Drivers, n.StatusUpdatedAt = drivers, now.Unix()
	sn.metaPending = false
	n.Meta = mergeNodeMeta(sn.staticMeta, sn.dynamicMeta)
	c.touchNodeLocked(n, idx, eventNodeRegistration)
	c.clientRegisteredLocked(s, h, sn)
}

// SetRebootRequired creates host's sentinel file with reason as its content.
// The file is the host's, not the cluster's: it is written without the state
// lock, so that the agents it wakes do not wait for it on their requests.
func (s *Sim) SetRebootRequired(host, reason string) error {
	dir, err := s.hostDir(host)
	if err != nil {
		return err
	}
	if reason == "" {
		reason = "*** System restart required ***"
	}
	if err := os.WriteFile(filepath.Join(dir, SentinelFile), []byte(reason+"\n"), 0o644); err != nil {
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
		Details: map[string]string{"reason": reason}})
	return nil
}

// ClearRebootRequired removes host's sentinel file (without the state lock,
// like SetRebootRequired).
func (s *Sim) ClearRebootRequired(host string) error {
	dir, err := s.hostDir(host)
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, SentinelFile)); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("host %s: %w", host, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bumpLocked()
	return nil
}

// hostDir returns the directory of host's files.
func (s *Sim) hostDir(host string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[host]
	if !ok {
		return "", fmt.Errorf("host %q not found", host)
	}
	return h.Dir, nil
}

// RebootRequired reports whether host's sentinel file exists.
func (s *Sim) RebootRequired(host string) bool {
	s.mu.Lock()
	h, ok := s.hosts[host]
	s.mu.Unlock()
	if !ok {
		return false
	}
	_, err := os.Stat(filepath.Join(h.Dir, SentinelFile))
	return err == nil
}

// serverHealthAtRebootLocked records, in the details of a host.reboot event, the
// health of every server cluster the host is a member of, as autopilot reported it
// the instant before the host went down: "<product>_server", "<product>_healthy",
// "<product>_failure_tolerance" and "<product>_leader" for nomad, consul and vault. An outside checker
// judges invariant 2 (never reboot a server of an unhealthy cluster, or one that
// cannot lose a server) from these alone.
func (s *Sim) serverHealthAtRebootLocked(h *Host, d map[string]string) {
	put := func(product string, healthy bool, ft int, leader bool) {
		d[product+"_server"] = "true"
		d[product+"_healthy"] = strconv.FormatBool(healthy)
		d[product+"_failure_tolerance"] = strconv.Itoa(ft)
		d[product+"_leader"] = strconv.FormatBool(leader)
	}
	if h.Server != nil {
		r := s.servers.Health()
		put("nomad", r.Healthy, r.FailureTolerance, s.servers.leaderLocked() == h.Server.ID)
	}
	for _, p := range []struct {
		name string
		c    *raftsim.Cluster
	}{{"consul", s.consul.Raft()}, {"vault", s.vault.Raft()}} {
		if m := p.c.ByHost(h.Name); m != nil {
			r := p.c.Health()
			put(p.name, r.Healthy, r.FailureTolerance, p.c.Leader() == m)
		}
	}
}
