package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rollboot/rollboot/internal/coordinator"
	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/store"
)

// Coord is what the coordinator alone measured on a large cluster.
type Coord struct {
	Hosts     int
	Needing   int             // hosts whose record asks for a reboot
	ColdStart []time.Duration // a new coordinator's first pass, one per new coordinator
	Passes    []time.Duration // back-to-back passes of a coordinator that has led a while
	// RSS is the peak resident set (VmHWM) of a `rollboot coordinator` process
	// that led the same cluster; 0 when not measured.
	RSS     int64
	RSSNote string // why it was not measured
}

// runCoord measures the coordinator at the given size: every host has an
// agent's record (written by the bench, no agent runs), a tenth of them need a
// reboot. A first coordinator grants what it may (the cluster is mid-rollout);
// then new coordinators each make their first pass (cold start: everything is
// read afresh), and one makes passes back to back.
func runCoord(ctx context.Context, o *Options, hosts int) (*Coord, error) {
	c, err := startCluster(ctx, clusterSpec{hosts: hosts, groups: o.Groups, concurrency: o.Concurrency, log: o.Log})
	if err != nil {
		return nil, err
	}
	defer c.stop()
	r := &Coord{Hosts: hosts}
	if r.Needing, err = c.writeRecords(ctx); err != nil {
		return nil, err
	}
	cfg := *c.cfg
	cfg.Nomad.Address = c.sim.Address()
	newCoord := func() (*coordinator.Coordinator, error) {
		client, err := daemon.Client(&cfg)
		if err != nil {
			return nil, err
		}
		clusters, err := c.clusters()
		if err != nil {
			return nil, err
		}
		return daemon.Coordinator(&cfg, client, daemon.Store(&cfg, client), o.Log, clusters), nil
	}
	first, err := newCoord()
	if err != nil {
		return nil, err
	}
	for range 3 {
		if err := first.ReconcileOnce(ctx); err != nil {
			return nil, fmt.Errorf("first coordinator: %w", err)
		}
	}
	var co *coordinator.Coordinator
	for range 3 {
		if co, err = newCoord(); err != nil {
			return nil, err
		}
		t := time.Now()
		if err := co.ReconcileOnce(ctx); err != nil {
			return nil, fmt.Errorf("cold start: %w", err)
		}
		r.ColdStart = append(r.ColdStart, time.Since(t))
	}
	for range o.Passes {
		t := time.Now()
		if err := co.ReconcileOnce(ctx); err != nil {
			return nil, fmt.Errorf("pass: %w", err)
		}
		r.Passes = append(r.Passes, time.Since(t))
	}
	if o.Exe == "" {
		r.RSSNote = "no rollboot binary to run"
		return r, nil
	}
	p, err := startProcess(ctx, o.Exe, "coordinator", coordinatorHCL(c), o.Log)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	// Let it lead: lock, cold start, and passes on every resync (1s) and change.
	if err := c.waitLeader(ctx); err != nil {
		return nil, fmt.Errorf("%w; the coordinator's output:\n%s", err, p.tail())
	}
	if err := sleep(ctx, o.Settle); err != nil {
		return nil, err
	}
	st, err := p.status()
	if err != nil {
		return nil, err
	}
	r.RSS = st.hwm
	return r, nil
}

// writeRecords writes every host's record as its agent would (boot ID, node
// ID), a tenth of them needing a reboot, with 16 writers at once.
func (c *cluster) writeRecords(ctx context.Context) (needing int, err error) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				h := c.hosts[i]
				rec := store.HostRecord{Host: h.Name, NodeID: h.NodeID, Hostname: h.Name, BootID: h.BootID}
				if i%10 == 9 {
					rec.RebootRequired, rec.Reason, rec.RequestedAt = true, "kernel update installed", time.Now()
				}
				if _, err := c.st.PutHost(ctx, rec); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := range c.hosts {
		if i%10 == 9 {
			needing++
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if len(errs) > 0 {
		return 0, fmt.Errorf("write host records: %w (and %d more)", errs[0], len(errs)-1)
	}
	return needing, nil
}

// coordinatorHCL is the configuration of a `rollboot coordinator` process on c.
func coordinatorHCL(c *cluster) string {
	return fmt.Sprintf("nomad {\n  address = %q\n}\n%s", c.sim.Address(), c.policy)
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)) * p)
	return s[min(i, len(s)-1)]
}

func maxOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}
