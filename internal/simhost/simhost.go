// Package simhost runs "processes" on the emulator's simulated hosts the way a real
// machine runs them: a process starts when its host boots and dies, without warning,
// when the host goes down for a reboot. The demo runs agents as goroutines with it;
// end-to-end tests run the real rollboot binary as child processes with it.
package simhost

import (
	"context"
	"sync"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

// StartFunc runs one host's process for one boot. It must return soon after ctx ends:
// for a child process, kill it with SIGKILL, as a reboot does.
type StartFunc func(ctx context.Context, h nomadsim.Host)

// Supervisor keeps one process per host running while the host is up.
type Supervisor struct {
	Sim   *nomadsim.Sim
	Hosts []string // hosts that run a process
	Start StartFunc
	// Job, when set, makes the process an allocation of that Nomad system job, as a
	// rollboot agent deployed as a system job is: it runs only while the host's node
	// has a running allocation of Job, and a new allocation is a new process. Nomad
	// places no allocation on a node that is ineligible, so a drained node gets its
	// agent back only once it is eligible again. Across a reboot its node did
	// not miss heartbeats for (or was only disconnected), the allocation stays
	// and the Nomad client restarts its task at boot: a new process.
	Job string

	mu      sync.Mutex
	running map[string]*proc
	paused  map[string]bool
	// synced: the processes match the hosts as they were at the emulator's
	// power generation gen, with no Kill or Restart since (kicks counts them).
	// Without Job nothing else decides what runs, so an unchanged generation
	// needs no look at every host on each emulator change.
	synced bool
	gen    uint64
	kicks  uint64
}

type proc struct {
	bootID  string
	allocID string
	cancel  context.CancelFunc
	done    chan struct{}
}

// Kill stops a host's process without a reboot (a crash); with restart false it
// stays stopped until Restart.
func (s *Supervisor) Kill(host string, restart bool) {
	s.mu.Lock()
	p := s.running[host]
	delete(s.running, host)
	s.synced = false
	s.kicks++
	if !restart {
		if s.paused == nil {
			s.paused = map[string]bool{}
		}
		s.paused[host] = true
	}
	s.mu.Unlock()
	if p != nil {
		p.cancel()
		<-p.done
	}
}

// Restart lets a host killed with Kill(host, false) run its process again.
func (s *Supervisor) Restart(host string) {
	s.mu.Lock()
	delete(s.paused, host)
	s.synced = false
	s.kicks++
	s.mu.Unlock()
}

// Run supervises until ctx ends, then stops every process.
func (s *Supervisor) Run(ctx context.Context) {
	s.mu.Lock()
	s.running = map[string]*proc{}
	s.mu.Unlock()
	defer s.stopAll()
	for ctx.Err() == nil {
		s.sync(ctx)
		// Wait for the next change of any host's state (or a Kill/Restart, which
		// polls back here through the next emulator change or the short wait).
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_ = s.Sim.WaitFor(wctx, func(v *nomadsim.View) bool { return s.changed(v) })
		cancel()
	}
}

// changed reports whether some host's process must be started or stopped.
func (s *Supervisor) changed(v *nomadsim.View) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Job == "" && s.synced && v.PowerGen() == s.gen {
		return false
	}
	for _, name := range s.Hosts {
		h, ok := v.Host(name)
		if !ok {
			continue
		}
		run, alloc := s.shouldRun(v, h)
		p := s.running[name]
		if p != nil && (!run || p.bootID != h.BootID || p.allocID != alloc) {
			return true
		}
		if p == nil && run && !s.paused[name] {
			return true
		}
	}
	return false
}

// shouldRun reports whether h's process should run, and for which allocation.
func (s *Supervisor) shouldRun(v *nomadsim.View, h nomadsim.Host) (bool, string) {
	if !h.Up {
		return false, ""
	}
	if s.Job == "" || h.NodeID == "" {
		return true, "" // a host without a Nomad client runs its agent as a service
	}
	alloc, ok := v.ClientAlloc(h.NodeID, s.Job)
	return ok, alloc
}

func (s *Supervisor) sync(ctx context.Context) {
	// Every host's state, read at once (one generation).
	type state struct {
		h       nomadsim.Host
		ok, run bool
		alloc   string
	}
	states := make([]state, len(s.Hosts))
	var gen uint64
	if s.Sim.WaitFor(ctx, func(v *nomadsim.View) bool {
		gen = v.PowerGen()
		for i, name := range s.Hosts {
			st := &states[i]
			if st.h, st.ok = v.Host(name); st.ok {
				st.run, st.alloc = s.shouldRun(v, st.h)
			}
		}
		return true
	}) != nil {
		return
	}
	s.mu.Lock()
	kicks := s.kicks
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		// Synced unless a Kill or Restart came meanwhile: the states read
		// may not show it.
		s.synced, s.gen = s.kicks == kicks, gen
		s.mu.Unlock()
	}()
	for i, name := range s.Hosts {
		h, ok, run, alloc := states[i].h, states[i].ok, states[i].run, states[i].alloc
		if !ok {
			continue
		}
		s.mu.Lock()
		p := s.running[name]
		paused := s.paused[name]
		s.mu.Unlock()
		if p != nil && (!run || p.bootID != h.BootID || p.allocID != alloc) {
			// The host went down (its processes die with it) or the
			// allocation was stopped or replaced.
			p.cancel()
			<-p.done
			s.mu.Lock()
			delete(s.running, name)
			s.mu.Unlock()
			p = nil
		}
		if p == nil && run && !paused {
			pctx, cancel := context.WithCancel(ctx)
			np := &proc{bootID: h.BootID, allocID: alloc, cancel: cancel, done: make(chan struct{})}
			s.mu.Lock()
			s.running[name] = np
			s.mu.Unlock()
			go func(h nomadsim.Host) {
				defer close(np.done)
				s.Start(pctx, h)
			}(h)
		}
	}
}

func (s *Supervisor) stopAll() {
	s.mu.Lock()
	procs := s.running
	s.running = map[string]*proc{}
	s.mu.Unlock()
	for _, p := range procs {
		p.cancel()
		<-p.done
	}
}
