package nomadsim

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// A blocking query wakes only when what it watches changes, as Nomad's memdb watch
// sets do (nomad/rpc.go blockingRPC): a write elsewhere, even one that moves the
// index the query answers with, leaves it asleep; a write to its own data ends it.
// Each case runs the query through nomad/api, waits until it sleeps, makes the
// outside write, waits until the sleeping query has re-checked after that write,
// checks that it has not answered, then makes the inside write and checks that it
// answers with that write's index.
func TestBlockingQueryWakesOnlyOnItsData(t *testing.T) {
	type query func(s *Sim, c *api.Client, ctx context.Context, idx uint64) (uint64, error)
	type write func(t *testing.T, c *api.Client, s *Sim) uint64

	varList := func(prefix string) query {
		return func(s *Sim, c *api.Client, ctx context.Context, idx uint64) (uint64, error) {
			_, meta, err := c.Variables().PrefixList(prefix, (&api.QueryOptions{WaitIndex: idx, WaitTime: time.Minute}).WithContext(ctx))
			if err != nil {
				return 0, err
			}
			return meta.LastIndex, nil
		}
	}
	varRead := func(path string) query {
		return func(s *Sim, c *api.Client, ctx context.Context, idx uint64) (uint64, error) {
			_, meta, err := c.Variables().Read(path, (&api.QueryOptions{WaitIndex: idx, WaitTime: time.Minute}).WithContext(ctx))
			if err != nil {
				return 0, err
			}
			return meta.LastIndex, nil
		}
	}
	nodeList := func(s *Sim, c *api.Client, ctx context.Context, idx uint64) (uint64, error) {
		_, meta, err := c.Nodes().List((&api.QueryOptions{WaitIndex: idx, WaitTime: time.Minute}).WithContext(ctx))
		if err != nil {
			return 0, err
		}
		return meta.LastIndex, nil
	}
	nodeAllocs := func(host string) query {
		return func(s *Sim, c *api.Client, ctx context.Context, idx uint64) (uint64, error) {
			n, err := s.Node(host)
			if err != nil {
				return 0, err
			}
			_, meta, err := c.Nodes().Allocations(n.ID, (&api.QueryOptions{WaitIndex: idx, WaitTime: time.Minute}).WithContext(ctx))
			if err != nil {
				return 0, err
			}
			return meta.LastIndex, nil
		}
	}
	jobAllocs := func(job string) query {
		return func(s *Sim, c *api.Client, ctx context.Context, idx uint64) (uint64, error) {
			_, meta, err := c.Jobs().Allocations(job, false, (&api.QueryOptions{WaitIndex: idx, WaitTime: time.Minute}).WithContext(ctx))
			if err != nil {
				return 0, err
			}
			return meta.LastIndex, nil
		}
	}
	putVar := func(path string) write {
		return func(t *testing.T, c *api.Client, s *Sim) uint64 {
			_, meta, err := c.Variables().Create(&api.Variable{Path: path, Items: api.VariableItems{"k": time.Now().String()}}, nil)
			if err != nil {
				t.Fatalf("write %s: %v", path, err)
			}
			return meta.LastIndex
		}
	}
	ineligible := func(host string) write {
		return func(t *testing.T, c *api.Client, s *Sim) uint64 {
			n, err := s.Node(host)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Nodes().ToggleEligibility(n.ID, false, nil)
			if err != nil {
				t.Fatalf("eligibility of %s: %v", host, err)
			}
			return resp.NodeModifyIndex
		}
	}
	job := func(id, pool string) write {
		return func(t *testing.T, c *api.Client, s *Sim) uint64 {
			before := s.Index()
			if err := s.AddJob(JobSpec{ID: id, NodePool: pool}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			var idx uint64
			err := s.WaitFor(ctx, func(v *View) bool {
				for _, a := range v.s.cluster.allocs {
					if a.a.JobID == id && a.a.CreateIndex > before {
						idx = a.a.CreateIndex
						return true
					}
				}
				return false
			})
			if err != nil {
				t.Fatalf("job %s placed: %v", id, err)
			}
			return idx
		}
	}

	cases := []struct {
		name    string
		query   query
		outside write
		inside  write
	}{
		{"variable list, write under another prefix", varList("rollboot/hosts/"), putVar("rollboot/control"), putVar("rollboot/hosts/client-1")},
		{"variable list, write to a sibling folder", varList("rollboot/hosts/"), putVar("rollboot/history/h1"), putVar("rollboot/hosts/client-2")},
		{"variable list, node write", varList("rollboot/"), ineligible("client-1"), putVar("rollboot/plan/client-1")},
		{"variable read, another variable", varRead("rollboot/plan/client-1"), putVar("rollboot/plan/client-2"), putVar("rollboot/plan/client-1")},
		{"node list, variable write", nodeList, putVar("rollboot/hosts/client-1"), ineligible("client-2")},
		{"node allocations, another node's allocation", nodeAllocs("client-1"), job("on-b", "b"), job("on-a", "a")},
		{"job allocations, another job's allocation", jobAllocs("on-a"), job("on-b", "b"), job("on-a", "a")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := vtSim(t, Config{Servers: 1, Clients: 2, ClientPools: []string{"a", "b"}})
			c := vtClient(t, s, "", "")
			// The variables the queries read exist, and so do variables under
			// each prefix listed and beside it: a query on what does not exist
			// watches a radix node near it (radixwatch.go).
			for _, p := range []string{"rollboot/plan/client-1", "rollboot/hosts/client-0", "rollboot/history/h0"} {
				putVar(p)(t, c, s)
			}
			start, err := tc.query(s, c, t.Context(), 0)
			if err != nil {
				t.Fatalf("first query: %v", err)
			}

			type answer struct {
				idx uint64
				err error
			}
			done := make(chan answer, 1)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			go func() {
				idx, err := tc.query(s, c, ctx, start)
				done <- answer{idx, err}
			}()
			waitWatch(t, s, func(sleeping int, _ uint64) bool { return sleeping == 1 }, "the query to sleep")

			out := tc.outside(t, c, s)
			waitWatch(t, s, func(_ int, checked uint64) bool { return checked >= out }, "the query to re-check after the outside write")
			select {
			case a := <-done:
				t.Fatalf("the query answered after a write outside what it watches (index %d, err %v)", a.idx, a.err)
			default:
			}

			in := tc.inside(t, c, s)
			select {
			case a := <-done:
				if a.err != nil {
					t.Fatalf("query: %v", a.err)
				}
				if a.idx < in {
					t.Errorf("answered with index %d, before the inside write's %d", a.idx, in)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the query did not answer after a write to what it watches")
			}
		})
	}
}

// waitWatch waits until cond holds on the emulator's blocking-query counters.
func waitWatch(t *testing.T, s *Sim, cond func(sleeping int, checked uint64) bool, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		if cond(s.WatchStats()) {
			return
		}
		// The counters change with s.mu held, always right after a write or while a
		// query starts to sleep: wait for the next change or a short tick.
		tick, stop := context.WithTimeout(ctx, 5*time.Millisecond)
		s.WaitIndex(tick, s.Index())
		stop()
		if ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
