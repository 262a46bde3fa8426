package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

// AgentProc is what one real agent process measured while idle.
type AgentProc struct {
	RSS int64 // peak resident set (VmHWM), bytes
	// Anon and File split the resident set at the end of the window:
	// anonymous pages (heap, stacks) and file pages (the binary, libraries).
	Anon, File int64
	Exe        string        // the binary measured
	Binary     string        // what it is: a release build, this binary...
	CPU        time.Duration // CPU time (user + system) over the window
	Window     time.Duration
	Note       string // why it was not measured
}

// agentEnv is what the shipped agents' jobs and unit add to an agent's
// environment that changes its memory (deploy/nomad/rollboot.nomad.hcl): one Go
// processor from the start.
var agentEnv = []string{"GOMAXPROCS=1"}

// runAgentProcess runs one `rollboot agent` process of exe (no coordinator
// candidate, as the shipped deployment runs agents, with its agentEnv) against a
// host of a small emulated cluster, waits for its host record, then reads its
// CPU time over window.
func runAgentProcess(ctx context.Context, o *Options, exe string) (*AgentProc, error) {
	if exe == "" {
		return &AgentProc{Note: "no rollboot binary to run"}, nil
	}
	c, err := startCluster(ctx, clusterSpec{hosts: 3, groups: 1, concurrency: 1, log: o.Log})
	if err != nil {
		return nil, err
	}
	defer c.stop()
	h := c.hosts[0]
	// Every file of the host's is the emulated host's, never the machine's:
	// a record file left at the default path by an earlier run (the
	// emulator's seed gives the host the same node and boot) would be taken
	// for this cluster's.
	agent := fmt.Sprintf("agent {\n  host          = %q\n  boot_id_file  = %q\n  boot_time_file = %q\n  sentinel_file = %q\n  detector_root = %q\n  record_file = %q\n  server_lock_file = %q\n",
		h.Name, filepath.Join(h.Dir, "boot_id"), filepath.Join(h.Dir, nomadsim.StatFile), filepath.Join(h.Dir, "reboot-required"), h.Dir,
		filepath.Join(h.Dir, "record.json"), filepath.Join(h.Dir, "server-lock.json"))
	hcl := fmt.Sprintf("nomad {\n  address = %q\n}\n%s", "http://"+h.Addr, strings.Replace(c.policy, "agent {\n", agent, 1))
	p, err := startProcess(ctx, exe, "agent", hcl, o.Log, agentEnv...)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	if err := c.waitRecordsN(ctx, 1, time.Minute); err != nil {
		return nil, fmt.Errorf("%w; its output:\n%s", err, p.tail())
	}
	if err := sleep(ctx, o.Settle); err != nil {
		return nil, err
	}
	before, err := p.status()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := sleep(ctx, o.Idle); err != nil {
		return nil, err
	}
	after, err := p.status()
	if err != nil {
		return nil, err
	}
	return &AgentProc{RSS: after.hwm, Anon: after.anon, File: after.file, Exe: exe,
		CPU: after.cpu - before.cpu, Window: time.Since(start)}, nil
}
