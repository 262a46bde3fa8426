package bench

import (
	"context"
	"fmt"
	"time"
)

// Idle is the load an idle cluster puts on Nomad.
type Idle struct {
	Hosts     int
	Window    time.Duration
	Requests  uint64  // requests rollboot sent during the window
	PerMinute float64 // the same, per minute
}

// runIdle runs the one-job deployment (every agent a coordinator candidate,
// production timings) on an idle cluster, lets it settle (every record written,
// a leader elected and its first passes done), then counts the requests sent to
// Nomad over window.
func runIdle(ctx context.Context, o *Options, hosts int) (*Idle, error) {
	c, err := startCluster(ctx, clusterSpec{hosts: hosts, groups: o.Groups, concurrency: o.Concurrency,
		agents: true, candidates: true, log: o.Log})
	if err != nil {
		return nil, err
	}
	defer c.stop()
	if err := c.waitRecords(ctx, 2*time.Minute+time.Duration(hosts)*50*time.Millisecond); err != nil {
		return nil, err
	}
	if err := c.waitLeader(ctx); err != nil {
		return nil, err
	}
	if err := c.waitCensus(ctx, hosts); err != nil {
		return nil, err
	}
	// Settle: the leader's first pass, every candidate's first lock attempt,
	// and every candidate's first read of the census (QuietSettle).
	if err := sleep(ctx, o.Settle+o.QuietSettle); err != nil {
		return nil, err
	}
	c.sim.ResetRequestStats()
	own := c.own.n.Load()
	start := time.Now()
	if err := sleep(ctx, o.Idle); err != nil {
		return nil, err
	}
	wall := time.Since(start)
	n := c.sim.RequestStats().Requests - (c.own.n.Load() - own)
	return &Idle{Hosts: hosts, Window: wall, Requests: n, PerMinute: float64(n) / wall.Minutes()}, nil
}

// waitCensus waits until the leader's census counts every host.
func (c *cluster) waitCensus(ctx context.Context, hosts int) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		n, err := c.st.Census(ctx)
		if err == nil && n == hosts {
			return nil
		}
		if err := sleep(ctx, time.Second); err != nil {
			return fmt.Errorf("the leader's census of %d hosts: %w (read %d)", hosts, err, n)
		}
	}
}

// waitLeader waits until a coordinator holds the leader lock.
func (c *cluster) waitLeader(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		v, _, err := c.api.Variables().Peek(c.st.LeaderPath(), nil)
		if err == nil && v != nil && v.Lock != nil && v.Lock.ID != "" {
			return nil
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
