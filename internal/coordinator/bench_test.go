package coordinator

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/deadline"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// The coordinator's cost at scale, against the in-process emulator: a steady
// pass over an idle cluster (what every resync and every wake-up costs), and the
// cold start of a new leader (its first pass, reading every variable). Run with
//
//	go test ./internal/coordinator -run '^$' -bench Coordinator -benchmem
//
// Each prints ns/op and allocations, the Nomad requests one operation sent, and
// (the passes) the CPU time the process used per operation, the in-process
// emulator's included.

type benchCluster struct {
	sim     *nomadsim.Sim
	client  *api.Client
	store   *store.Store
	groups  []rules.GroupSpec
	counter *countingTransport
}

// countingTransport counts the requests sent to Nomad, and the variable writes.
type countingTransport struct {
	base           http.RoundTripper
	requests, puts atomic.Int64
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.requests.Add(1)
	if r.Method == http.MethodPut && len(r.URL.Path) > len("/v1/var/") && r.URL.Path[:len("/v1/var/")] == "/v1/var/" {
		t.puts.Add(1)
	}
	return t.base.RoundTrip(r)
}

// newBenchCluster starts an emulator with hosts clients in ten node pools, one
// group of concurrency 1 per pool, and a published record and an idle plan for
// every host.
func newBenchCluster(tb testing.TB, hosts int) *benchCluster {
	tb.Helper()
	pools := make([]string, 10)
	groups := make([]rules.GroupSpec, 10)
	for i := range pools {
		pools[i] = fmt.Sprintf("pool%d", i)
		groups[i] = rules.GroupSpec{Group: policy.Group{Name: pools[i], Concurrency: 1}, Filter: fmt.Sprintf("NodePool == %q", pools[i])}
	}
	// Heartbeats far apart: the emulator's own load stays out of the figures.
	sim, err := nomadsim.New(nomadsim.Config{Clients: hosts, ClientPools: pools, HeartbeatTTL: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(sim.Close)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = deadline.MaxIdleConnsPerHost // as deadline.NomadClient
	ct := &countingTransport{base: deadline.Wrap(tr)}
	client, err := api.NewClient(&api.Config{Address: sim.Address(), HttpClient: &http.Client{Transport: ct}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(client.Close)
	st := store.New(client.Variables(), "rollboot", "")
	ctx := context.Background()
	names := make(chan string)
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 16 {
		wg.Go(func() {
			for name := range names {
				h, _ := sim.Host(name)
				rec := store.HostRecord{Host: h.Name, NodeID: h.NodeID, BootID: h.BootID, Roles: []string{store.RoleNomadClient}}
				if _, err := st.PutHost(ctx, rec); err != nil {
					failed.Store(err)
				}
				// Every host has a plan, idle, as after a rollout.
				plan := store.Plan{Host: h.Name, Phase: store.PhaseIdle, Group: "pool0", NodeID: h.NodeID}
				if _, err := st.PutPlan(ctx, plan); err != nil {
					failed.Store(err)
				}
			}
		})
	}
	for i := 1; i <= hosts; i++ {
		names <- fmt.Sprintf("client-%d", i)
	}
	close(names)
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		tb.Fatal(err)
	}
	return &benchCluster{sim: sim, client: client, store: st, groups: groups, counter: ct}
}

func (b *benchCluster) coordinator() *Coordinator {
	return New(Options{
		Deps: Deps{Nodes: b.client.Nodes(), Store: store.New(b.client.Variables(), "rollboot", "")},
		Rules: rules.Rules{
			Groups: b.groups,
			Timing: phase.Timing{DrainDeadline: time.Hour, RejoinTimeout: time.Hour, RetryBackoff: time.Second, RetryMaxBackoff: time.Minute},
		},
		Runtime: Runtime{Resync: time.Minute},
	})
}

func BenchmarkCoordinatorPass(b *testing.B) {
	for _, hosts := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			cl := newBenchCluster(b, hosts)
			co := cl.coordinator()
			if err := co.ReconcileOnce(b.Context()); err != nil {
				b.Fatal(err)
			}
			// As in Run, the node and host record watches have answered once
			// (the cluster is idle: nothing changes).
			if _, err := co.watchNodes(b.Context(), 0); err != nil {
				b.Fatal(err)
			}
			if _, err := co.watchVars(b.Context(), 0); err != nil {
				b.Fatal(err)
			}
			cl.counter.requests.Store(0)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for b.Loop() {
				if err := co.ReconcileOnce(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cl.counter.requests.Load())/float64(b.N), "requests/op")
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkCoordinatorColdStart is a new leader's first pass: every plan and
// host record read for the first time. With latency=1ms every request to the
// emulator takes a millisecond more, as a request to Nomad over a network does:
// what the parallel reads save shows there, where the in-process emulator on a
// loaded machine hides it.
func BenchmarkCoordinatorColdStart(b *testing.B) {
	for _, hosts := range []int{1000, 5000} {
		for _, latency := range []time.Duration{0, time.Millisecond} {
			b.Run(fmt.Sprintf("hosts=%d/latency=%s", hosts, latency), func(b *testing.B) {
				cl := newBenchCluster(b, hosts)
				if latency > 0 {
					if err := cl.sim.InjectFault(nomadsim.Fault{Latency: latency}); err != nil {
						b.Fatal(err)
					}
				}
				cl.counter.requests.Store(0)
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if err := cl.coordinator().ReconcileOnce(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cl.counter.requests.Load())/float64(b.N), "requests/op")
			})
		}
	}
}

// BenchmarkCoordinatorPassAfterChange is a pass after one host record changed
// (its agent's version, which decides nothing): the host watch listed the
// records, and the pass reads that one and builds its view again.
func BenchmarkCoordinatorPassAfterChange(b *testing.B) {
	for _, hosts := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("hosts=%d", hosts), func(b *testing.B) {
			cl := newBenchCluster(b, hosts)
			co := cl.coordinator()
			ctx := b.Context()
			if _, err := co.watchNodes(ctx, 0); err != nil {
				b.Fatal(err)
			}
			idx, err := co.watchVars(ctx, 0)
			if err != nil {
				b.Fatal(err)
			}
			// The first pass takes the watch's list: it lists again only then.
			if err := co.ReconcileOnce(ctx); err != nil {
				b.Fatal(err)
			}
			cl.counter.requests.Store(0)
			b.ReportAllocs()
			b.ResetTimer()
			var cpu time.Duration // in the passes only
			i := 0
			for b.Loop() {
				b.StopTimer()
				i++
				rec, err := cl.store.Host(ctx, fmt.Sprintf("client-%d", i%hosts+1))
				if err != nil {
					b.Fatal(err)
				}
				rec.AgentVersion = fmt.Sprintf("v%d", i)
				if _, err := cl.store.PutHost(ctx, rec); err != nil {
					b.Fatal(err)
				}
				if idx, err = co.watchVars(ctx, idx); err != nil {
					b.Fatal(err)
				}
				cl.counter.requests.Add(-3) // the bench's read and write, the watch's list
				b.StartTimer()
				cpu0 := processCPU()
				if err := co.ReconcileOnce(ctx); err != nil {
					b.Fatal(err)
				}
				cpu += processCPU() - cpu0
			}
			b.ReportMetric(float64(cl.counter.requests.Load())/float64(b.N), "requests/op")
			b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the CPU time the process has used (user and system, every
// thread: the coordinator's and the in-process emulator's): on a loaded machine
// it varies far less than the wall-clock time of an operation.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPlansAfterPass: what the loop copies of the plans after each pass,
// to set its timers and allocation watches: every plan (as it did), against
// the plans under way only (plansUnderWay), at 1,000 and 5,000 hosts with 50
// under way, as mid-rollout in ten groups of five. Compare the two in one run:
//
//	go test ./internal/coordinator -run '^$' -bench PlansAfterPass -benchmem
func BenchmarkPlansAfterPass(b *testing.B) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, hosts := range []int{1000, 5000} {
		plans := make(map[string]store.Plan, hosts)
		for i := range hosts {
			p := store.Plan{Host: fmt.Sprintf("host-%05d", i), Phase: store.PhaseIdle, PhaseSince: now, Group: "g1",
				NodeID: fmt.Sprintf("node-%05d", i), LastAfterBootID: "boot", LastCompleted: now,
				Timeline: map[string]time.Time{store.PhaseDraining: now, store.PhaseRejoining: now}}
			if i%(hosts/50) == 0 {
				p.Phase = store.PhaseRebooting
			}
			plans[p.Host] = p
		}
		for _, copyOf := range []struct {
			name string
			copy func(map[string]store.Plan) map[string]store.Plan
		}{{"every-plan", maps.Clone[map[string]store.Plan]}, {"under-way", plansUnderWay}} {
			b.Run(fmt.Sprintf("%d-hosts/%s", hosts, copyOf.name), func(b *testing.B) {
				for b.Loop() {
					if got := copyOf.copy(plans); len(got) < 50 {
						b.Fatalf("%d plans copied", len(got))
					}
				}
			})
		}
	}
}
