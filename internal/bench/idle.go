package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/watch"
)

// Idle is the load an idle cluster puts on Nomad.
type Idle struct {
	Hosts    int
	Window   time.Duration
	Requests uint64 // requests rollboot sent during the window
	// Watches are the requests of Requests that read a host's plan or
	// record (GET <prefix>/plan/* and <prefix>/hosts/*): on an idle cluster
	// the agents' watches of their own, each answered when Nomad's longest
	// wait runs out (an idle pass reads neither).
	Watches uint64
	// Variables are the window's variable requests by method and folder.
	Variables []nomadsim.RouteStats
}

// LongestWait is how long one of Nomad's blocking queries waits at most: its
// cap, 300 s, plus its jitter of up to a sixteenth of that (watch.LongestWait;
// nomadsim http.go maxQueryTime). An idle cluster's watches each ask again
// once per such wait, so an idle window shorter than it misses the asks of
// the watches started before it, every agent's included.
const LongestWait = watch.LongestWait

// DefaultIdle is the idle window when none is given: one longest wait, and
// a few seconds for the answers.
const DefaultIdle = 5*time.Minute + 30*time.Second

// PerMinute is the window's requests a minute.
func (id *Idle) PerMinute() float64 { return float64(id.Requests) / id.Window.Minutes() }

// hostWatches are the folders, under the state's prefix, of the agents'
// watches of their own variables.
func hostWatches(prefix string) []string {
	return []string{"GET " + prefix + "/plan/*", "GET " + prefix + "/hosts/*"}
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
	stats := c.sim.RequestStats()
	n := stats.Requests - (c.own.n.Load() - own)
	idle := &Idle{Hosts: hosts, Window: wall, Requests: n, Variables: stats.Variables}
	watches := hostWatches(c.st.Prefix())
	for _, v := range stats.Variables {
		if slices.Contains(watches, v.Route) {
			idle.Watches += v.Requests
		}
	}
	return idle, nil
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
