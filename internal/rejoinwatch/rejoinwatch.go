// Package rejoinwatch watches what the hosts back from their reboot wait on,
// their node's allocations and their Consul checks (which it also reads once
// for a pass: ReadChecks), with one blocking query per node, and pokes the
// coordinator's loop when it changes.
package rejoinwatch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/allocsource"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/rejoin"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/watch"
)

// An allocation starting or a check turning passing changes nothing the node
// list shows: without these watches, a host would wait for the resync.

// Allocations reads a node's allocations, also with a blocking query;
// *api.Nodes implements it.
type Allocations interface {
	Allocations(nodeID string, q *api.QueryOptions) ([]*api.Allocation, *api.QueryMeta, error)
}

// ConsulHealth reads a node's Consul checks, also with a blocking query;
// *consulapi.Health implements it.
type ConsulHealth interface {
	Node(node string, q *consulapi.QueryOptions) (consulapi.HealthChecks, *consulapi.QueryMeta, error)
}

// ReadChecks reads the Consul checks of node (its name) once, as package rejoin
// takes them; consul nil: no Consul client is configured.
func ReadChecks(ctx context.Context, consul ConsulHealth, node string) ([]rejoin.Check, error) {
	if consul == nil {
		return nil, fmt.Errorf("healthy.consul_checks is set but no Consul client is configured (CONSUL_HTTP_ADDR)")
	}
	if node == "" {
		return nil, fmt.Errorf("cannot read Consul checks: the node's name is unknown")
	}
	checks, _, err := consul.Node(node, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("cannot read the Consul checks of node %s: %w", node, err)
	}
	return rejoin.ConsulChecks(checks), nil
}

// Sink keeps the newest allocations an allocation watch read, for the next
// pass (nil: forget them, the watch failed or ended).
type Sink interface {
	SetAllocs(nodeID string, allocs []*api.Allocation)
}

// AllocNodes are the nodes whose allocations the loop watches for plans:
// those of hosts rejoining that wait for their system jobs, or for their
// workloads to be healthy, but the hosts whose rejoin has not come to these
// checks (before, as the last pass found them): those awaiting their agent's
// report (phase.AwaitsReport), and those whose node is not ready. Their
// node's allocations are read once the report comes (the host watch wakes a
// pass for it) and the node is ready (the node list's watch does), not
// watched through every change before, which at a reboot are many (the
// agent's own allocation and the other system jobs placed again, the
// workloads the scheduler brings back).
func AllocNodes(plans map[string]store.Plan, before map[string]bool) map[string]bool {
	want := map[string]bool{}
	for name, p := range plans {
		if before[name] {
			continue
		}
		if (p.Phase == store.PhaseRejoining && p.NodeID != "" && len(p.SystemJobs) > 0) || phase.WaitsForHealth(p) {
			want[p.NodeID] = true
		}
	}
	return want
}

// MaxAllocWatches bounds the allocation watches that run at once. Each holds
// a connection to Nomad while it waits (HTTP/1.1 carries one request at a
// time), and Nomad accepts 100 connections from one client by default
// (http_max_conns_per_client, command/agent/config.go): beside the 32
// requests a step of a pass keeps in flight and the coordinator's other
// watches, one watch per rejoining host would pass it once about sixty hosts
// rejoin at once, and Nomad would refuse the pass's own requests. A node
// wanted beyond the bound is not watched: each pass reads its allocations
// (package allocsource), and a change on it waits for the next pass.
const MaxAllocWatches = 24

// Allocs watch the allocations of the nodes whose hosts wait for their
// system jobs to run again, or for their workloads to be healthy, and poke
// the loop when they change, at most MaxAllocWatches at once. Each runs until
// its node is no longer wanted or the context of NewAllocs ends.
type Allocs struct {
	set   set
	nodes Allocations
	sink  Sink
	poke  func()
}

// NewAllocs returns the allocation watches of a term, ended with ctx.
func NewAllocs(ctx context.Context, nodes Allocations, sink Sink, poke func()) *Allocs {
	return &Allocs{set: set{ctx: ctx}, nodes: nodes, sink: sink, poke: poke}
}

// Set watches the nodes of want, at most MaxAllocWatches: those watched
// already first, then the others in the order of their IDs. A new watch
// starts from what the last pass read of its node (reads): kept as the
// watch's first answer, and asked past its index.
func (w *Allocs) Set(want map[string]bool, reads map[string]allocsource.Read) {
	w.set.keep(want, MaxAllocWatches, func(ctx context.Context, id string) {
		defer w.sink.SetAllocs(id, nil)
		from := reads[id]
		if from.Index > 0 {
			w.sink.SetAllocs(id, from.Allocs)
		}
		watch.Loop{Index: from.Index, Query: func(ctx context.Context, idx uint64) (uint64, error) {
			q := (&api.QueryOptions{WaitIndex: idx, WaitTime: 5 * time.Minute}).WithContext(ctx)
			allocs, meta, err := w.nodes.Allocations(id, q)
			if err != nil {
				w.sink.SetAllocs(id, nil) // a pass reads them itself meanwhile
				return 0, err
			}
			w.sink.SetAllocs(id, allocs) // before the poke: the next pass takes it
			return meta.LastIndex, nil
		}, OnChange: func(uint64) { w.poke() }}.Run(ctx)
	})
}

// Stop ends every watch and waits for them.
func (w *Allocs) Stop() { w.set.stop() }

// Checks watch the Consul checks of the nodes whose hosts wait for them to
// pass (healthy.consul_checks) with blocking queries on
// /v1/health/node/<node>, and poke the loop when they change. Each runs until
// its node is no longer wanted or the context of NewChecks ends.
type Checks struct {
	set    set
	consul ConsulHealth
	poke   func()
}

// NewChecks returns the Consul check watches of a term, ended with ctx; with
// no Consul client (nil) they watch nothing.
func NewChecks(ctx context.Context, consul ConsulHealth, poke func()) *Checks {
	return &Checks{set: set{ctx: ctx}, consul: consul, poke: poke}
}

// Set watches exactly the Consul nodes of want (between passes: want is the
// caller's no more).
func (w *Checks) Set(want map[string]bool) {
	if w.consul == nil {
		return
	}
	w.set.keep(want, 0, func(ctx context.Context, node string) {
		watch.Loop{Query: func(ctx context.Context, idx uint64) (uint64, error) {
			q := (&consulapi.QueryOptions{WaitIndex: idx, WaitTime: 5 * time.Minute}).WithContext(ctx)
			_, meta, err := w.consul.Node(node, q)
			if err != nil {
				return 0, err
			}
			return meta.LastIndex, nil
		}, OnChange: func(uint64) { w.poke() }}.Run(ctx)
	})
}

// Stop ends every watch and waits for them.
func (w *Checks) Stop() { w.set.stop() }

// set runs one watch per key of a set that each pass may change: keep starts
// the watches of new keys and ends those of keys no longer wanted. Each runs
// until its key is dropped or ctx ends.
type set struct {
	ctx     context.Context
	wg      sync.WaitGroup
	running map[string]context.CancelFunc
}

// keep ends the watches of the keys not in want, and runs run for the keys
// of want that have no watch yet, in the order of the keys, while fewer than
// most run (0: no bound).
func (w *set) keep(want map[string]bool, most int, run func(ctx context.Context, key string)) {
	if w.running == nil {
		w.running = map[string]context.CancelFunc{}
	}
	for key, cancel := range w.running {
		if !want[key] {
			cancel()
			delete(w.running, key)
		}
	}
	keys := maps.Keys(want)
	if most > 0 {
		keys = slices.Values(slices.Sorted(keys)) // which ones are watched is then a choice: the same each time
	}
	for key := range keys {
		if _, ok := w.running[key]; ok {
			continue
		}
		if most > 0 && len(w.running) >= most {
			return
		}
		ctx, cancel := context.WithCancel(w.ctx)
		w.running[key] = cancel
		w.wg.Go(func() { run(ctx, key) })
	}
}

// stop ends every watch and waits for them.
func (w *set) stop() {
	for _, cancel := range w.running {
		cancel()
	}
	w.wg.Wait()
}
