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
	// Passes are back-to-back passes of a coordinator that has led a while,
	// its watches running as in Run (nothing changed between them); Changed
	// are passes each after one host record changed (seen by the host watch);
	// ReadAll are passes without watches, each reading every list itself.
	Passes, Changed, ReadAll []time.Duration
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
	first, err := c.newCoordinator(o)
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
		if co, err = c.newCoordinator(o); err != nil {
			return nil, err
		}
		t := time.Now()
		if err := co.ReconcileOnce(ctx); err != nil {
			return nil, fmt.Errorf("cold start: %w", err)
		}
		r.ColdStart = append(r.ColdStart, time.Since(t))
	}
	if err := c.timePasses(ctx, co, o.Passes, r); err != nil {
		return nil, err
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

// timePasses times n passes of co of each kind: reading every list itself
// (no watches), then with its watches running as in Run, over an unchanged
// cluster and after a change of one host's record (its agent's version, which
// decides nothing), written by the bench and seen by the host watch first.
func (c *cluster) timePasses(ctx context.Context, co *coordinator.Coordinator, n int, r *Coord) error {
	pass := func(to *[]time.Duration) error {
		t := time.Now()
		if err := co.ReconcileOnce(ctx); err != nil {
			return fmt.Errorf("pass: %w", err)
		}
		*to = append(*to, time.Since(t))
		return nil
	}
	for range n {
		if err := pass(&r.ReadAll); err != nil {
			return err
		}
	}
	stop, err := co.Follow(ctx)
	if err != nil {
		return err
	}
	defer stop()
	for range n {
		if err := pass(&r.Passes); err != nil {
			return err
		}
	}
	for i := range n {
		j := (i * 10) % len(c.hosts)
		if j%10 == 9 {
			j-- // a host that needs no reboot (writeRecords)
		}
		h := c.hosts[j]
		rec, err := c.st.Host(ctx, h.Name)
		if err != nil {
			return err
		}
		rec.AgentVersion = fmt.Sprintf("bench-%d", i)
		idx, err := c.st.PutHost(ctx, rec)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		for co.WatchedHosts() < idx && wctx.Err() == nil {
			_ = sleep(wctx, time.Millisecond)
		}
		cancel()
		if co.WatchedHosts() < idx {
			return fmt.Errorf("the coordinator's host watch did not see the record written at index %d within 30s", idx)
		}
		if err := pass(&r.Changed); err != nil {
			return err
		}
	}
	return nil
}

// newCoordinator is a new coordinator of c, with a Nomad client of its own, as
// a new leader would start; the bench calls its passes itself.
func (c *cluster) newCoordinator(o *Options) (*coordinator.Coordinator, error) {
	cfg := *c.cfg
	cfg.Nomad.Address = c.sim.Address()
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

// writeRecords writes every host's record as its agent would (boot ID, node
// ID), a tenth of them needing a reboot, with 16 writers at once.
func (c *cluster) writeRecords(ctx context.Context) (needing int, err error) {
	return c.writeRecordsEvery(ctx, 10)
}

// writeRecordsEvery writes every host's record as its agent would (boot ID,
// node ID), one host in every `every` needing a reboot (the last of each run
// of that many: all of them for 1), with 16 writers at once.
func (c *cluster) writeRecordsEvery(ctx context.Context, every int) (needing int, err error) {
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
				if i%every == every-1 {
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
		if i%every == every-1 {
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
