package nomadsim

import (
	"fmt"
	"time"

	"github.com/hashicorp/nomad/api"
)

// A client's drain on shutdown. A Nomad client agent configured with a
// drain_on_shutdown block (command/agent/config.go ClientConfig.Drain,
// nomad/structs/config/drain.go DrainConfig: deadline, ignore_system_jobs,
// force) drains its own node when the agent leaves the cluster gracefully:
// on SIGTERM with leave_on_terminate, on SIGINT with leave_on_interrupt
// (command/agent/command.go handleSignals → terminateGracefully →
// Agent.Leave → client/client.go Leave → client/drain.go DrainSelf). DrainSelf
// asks the servers for a drain of its node (Node.UpdateDrain with the
// configured deadline and ignore_system_jobs, MarkEligible false, meta
// message "shutting down"), which the servers record with the client's
// identity as LastDrain.AccessorID, "client:<node ID>"
// (nomad/node_endpoint.go UpdateDrain: UpdatedBy, AuthenticatedIdentity.String;
// Nomad 1.7.7 and later). It then polls its node every second
// (pollServerForDrainStatus) until the drain is done (DrainStrategy nil) or
// the deadline and five seconds have passed, and only then stops; the agent
// waits for it (terminateGracefully adds the drain deadline to its graceful
// timeout). The drain's end leaves the node ineligible, and Nomad keeps it so
// across the restart (state_store.go upsertNodeTxn).
//
// The emulator models it on Reboot of a host whose DrainOnShutdown is set: the
// host's init system stops the client first (SIGTERM, as systemd does, with
// leave_on_terminate assumed), the client drains its node, and the host goes
// down once the drain is done or the deadline passed (polled every
// selfDrainPoll, Nomad's second scaled to the emulator's times). force is
// accepted and not modelled (the drainer's force is a negative deadline).

// DrainOnShutdown is a client's drain_on_shutdown block.
type DrainOnShutdown struct {
	// Deadline is the drain's deadline (Nomad's default 1h; 0: none, as
	// deadline = "0s" disables it).
	Deadline         time.Duration
	IgnoreSystemJobs bool
}

// selfDrainPoll is how often the shutting-down client looks at its drain.
const selfDrainPoll = 20 * time.Millisecond

// selfDrainGrace is DrainSelf's allowance past the deadline for the servers
// to record it (Nomad: 5s), scaled.
const selfDrainGrace = 100 * time.Millisecond

// SetDrainOnShutdown sets (nil: removes) the drain_on_shutdown block of host's
// client, as a restart of its agent with a changed configuration would.
func (s *Sim) SetDrainOnShutdown(host string, d *DrainOnShutdown) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.hosts[host]
	if !ok {
		return fmt.Errorf("host %q not found", host)
	}
	if h.NodeID == "" {
		return fmt.Errorf("host %q runs no Nomad client", host)
	}
	if d != nil {
		c := *d
		d = &c
	}
	h.DrainOnShutdown = d
	return nil
}

// selfDrainLocked is the client's DrainSelf on h's shutdown; h goes down
// (goDownLocked) once its drain is done or past its deadline.
func (s *Sim) selfDrainLocked(h *Host) {
	cfg := *h.DrainOnShutdown
	req := &api.NodeUpdateDrainRequest{
		NodeID:    h.NodeID,
		DrainSpec: &api.DrainSpec{Deadline: cfg.Deadline, IgnoreSystemJobs: cfg.IgnoreSystemJobs},
		Meta:      map[string]string{"message": "shutting down"},
	}
	h.shuttingDown = true
	if _, err := s.updateDrainLocked("client:"+h.NodeID, h.NodeID, req); err != nil {
		// DrainSelf's error is logged by the agent, which goes on stopping.
		s.goDownLocked(h)
		return
	}
	var until time.Time
	if cfg.Deadline > 0 {
		until = time.Now().Add(cfg.Deadline + selfDrainGrace)
	}
	var poll func()
	poll = func() {
		if !h.shuttingDown {
			return
		}
		sn, ok := s.cluster.nodes[h.NodeID]
		if !ok || sn.node.DrainStrategy == nil || (!until.IsZero() && !time.Now().Before(until)) {
			s.goDownLocked(h)
			return
		}
		s.after(selfDrainPoll, poll)
	}
	s.after(selfDrainPoll, poll)
}
