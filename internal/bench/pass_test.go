package bench

import (
	"context"
	"fmt"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/coordinator"
	"github.com/rollboot/rollboot/internal/daemon"
)

// BenchmarkPass is the pass `rollboot bench` times at its largest size, as a Go
// benchmark: a cluster mid-rollout (a tenth of the hosts need a reboot, a first
// coordinator granted what it may), the bench's policy and gates, and a
// coordinator that has led a while with its watches running (Follow). Its
// passes over an unchanged cluster, and each after one host record changed
// (seen by the host watch first), and each after one node changed (seen by the
// node watch first). Run with
//
//	go test ./internal/bench -run '^$' -bench Pass -benchmem
//
// ns/op on a loaded machine varies by a factor of several; allocs/op does not.
func BenchmarkPass(b *testing.B) {
	const hosts = 5000
	ctx := b.Context()
	c, err := startCluster(ctx, clusterSpec{hosts: hosts, groups: 10, concurrency: 5, log: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.stop)
	if _, err := c.writeRecords(ctx); err != nil {
		b.Fatal(err)
	}
	cfg := *c.cfg
	cfg.Nomad.Address = c.sim.Address()
	newCoord := func() *coordinator.Coordinator {
		client, err := daemon.Client(&cfg)
		if err != nil {
			b.Fatal(err)
		}
		clusters, err := c.clusters()
		if err != nil {
			b.Fatal(err)
		}
		return daemon.Coordinator(&cfg, client, daemon.Store(&cfg, client), c.log, clusters)
	}
	first := newCoord()
	for range 3 {
		if err := first.ReconcileOnce(ctx); err != nil {
			b.Fatal(err)
		}
	}
	co := newCoord()
	if err := co.ReconcileOnce(ctx); err != nil {
		b.Fatal(err)
	}
	stop, err := co.Follow(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	b.Run(fmt.Sprintf("hosts=%d/unchanged", hosts), func(b *testing.B) {
		b.ReportAllocs()
		m := c.measure()
		for b.Loop() {
			if err := co.ReconcileOnce(ctx); err != nil {
				b.Fatal(err)
			}
		}
		m.report(b, true)
	})
	b.Run(fmt.Sprintf("hosts=%d/one-record", hosts), func(b *testing.B) {
		passesAfter(b, c, co, func(j int) { changeRecord(ctx, b, c, co, j) })
	})
	b.Run(fmt.Sprintf("hosts=%d/one-node", hosts), func(b *testing.B) {
		passesAfter(b, c, co, func(j int) { changeNode(b, c, co, j) })
	})
}

// passesAfter times co's passes, each after change(j) changed something of
// host j (every tenth host in turn) and co's watches saw it. The CPU is not
// reported: the bench's change and the watch's answer would count.
func passesAfter(b *testing.B, c *cluster, co *coordinator.Coordinator, change func(j int)) {
	b.ReportAllocs()
	m := c.measure()
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		change((i * 10) % len(c.hosts))
		b.StartTimer()
		if err := co.ReconcileOnce(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	m.report(b, false)
}

// passFigures are what a benchmark reports besides time and allocations.
type passFigures struct {
	c        *cluster
	requests uint64
	own      uint64
	cpu0     time.Duration
}

func (c *cluster) measure() *passFigures {
	return &passFigures{c: c, requests: c.sim.RequestStats().Requests, own: c.own.n.Load(), cpu0: processCPU()}
}

// report reports the requests the emulator served per operation, the bench's
// own left out (with a change, the host watch's answer to it is counted), and
// with cpu the process's CPU time per operation (the in-process emulator's
// included).
func (m *passFigures) report(b *testing.B, cpu bool) {
	req := m.c.sim.RequestStats().Requests - m.requests - (m.c.own.n.Load() - m.own)
	b.ReportMetric(float64(req)/float64(b.N), "requests/op")
	if cpu {
		b.ReportMetric(float64(processCPU()-m.cpu0)/float64(b.N), "cpu-ns/op")
	}
}

// processCPU is the CPU time the process has used, every thread's.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// changeNode changes the node of host j (a meta key no group selects on, as a
// rollout changes nodes: every drain, eligibility and status change moves a
// node's ModifyIndex) and waits until co's node watch has seen it.
func changeNode(b *testing.B, c *cluster, co *coordinator.Coordinator, j int) {
	b.Helper()
	before := co.WatchedNodes()
	if err := c.sim.SetNodeMeta(c.hosts[j].Name, map[string]string{"bench": fmt.Sprint(time.Now().UnixNano())}); err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for co.WatchedNodes() <= before {
		if time.Now().After(deadline) {
			b.Fatalf("the node watch did not see node %d change within 30s", j)
		}
		time.Sleep(time.Millisecond)
	}
}

// changeRecord changes host j's record (its agent's version, which decides
// nothing) and waits until co's host watch has seen it.
func changeRecord(ctx context.Context, b *testing.B, c *cluster, co *coordinator.Coordinator, j int) {
	b.Helper()
	if j%10 == 9 {
		j-- // a host that needs no reboot (writeRecords)
	}
	rec, err := c.st.Host(ctx, c.hosts[j].Name)
	if err != nil {
		b.Fatal(err)
	}
	rec.AgentVersion = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	idx, err := c.st.PutHost(ctx, rec)
	if err != nil {
		b.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for co.WatchedHosts() < idx {
		if time.Now().After(deadline) {
			b.Fatalf("the host watch did not see the record written at index %d within 30s", idx)
		}
		time.Sleep(time.Millisecond)
	}
}
