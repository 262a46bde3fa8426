package nomadsim

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Request statistics: how much of a benchmark's time the emulator itself takes.
// Each request to the cluster or a host listener (the control API excluded) is
// timed from the handler's start to its end, minus the time a blocking query
// sleeps waiting for its data to change: what is left is the emulator's own work
// (and its waiting for the state lock), which a real Nomad server would spend in
// its own RPC handlers. The request latency (Config.RequestLatency) is waited
// before the handler starts, and counted apart: it is the network's and the
// leader's, not the emulator's.

// RequestStats are the emulator's request figures since the last ResetRequestStats.
type RequestStats struct {
	Requests uint64        // requests answered
	Busy     time.Duration // time inside the handlers, blocking-query sleeps excluded
	P50, P99 time.Duration // busy time of one request
	// Latency is the time Nomad API requests waited for the request latency
	// (Config.RequestLatency) before being served; it is not part of Busy. The
	// Consul and Vault requests wait too, but are not counted here.
	Latency time.Duration
	// Background is the time of the periodic rounds that make the cluster
	// live (the clients, the drainer and the scheduler, heartbeats, autopilot),
	// from their tick to the end of their round, waiting for the state lock
	// included. They hold the state lock: requests wait for them.
	Background time.Duration
	// Routes are the requests and busy time by route (the pattern that served
	// them, such as "GET /v1/nodes"), most busy first.
	Routes []RouteStats
}

// RouteStats are one route's share of the request figures.
type RouteStats struct {
	Route    string
	Requests uint64
	Busy     time.Duration
}

// maxReqSamples bounds the per-request samples kept for the percentiles; past
// it, samples overwrite the oldest (a ring).
const maxReqSamples = 1 << 18

type reqStats struct {
	mu          sync.Mutex
	n           uint64
	busy        time.Duration
	samples     []time.Duration
	backgroundT time.Duration
	latencyT    time.Duration
	routes      map[string]*RouteStats
}

func (r *reqStats) latency(d time.Duration) {
	if d == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latencyT += d
}

func (r *reqStats) background(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backgroundT += d
}

func (r *reqStats) record(route string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.routes == nil {
		r.routes = make(map[string]*RouteStats)
	}
	rs := r.routes[route]
	if rs == nil {
		rs = &RouteStats{Route: route}
		r.routes[route] = rs
	}
	rs.Requests++
	rs.Busy += d
	if len(r.samples) < maxReqSamples {
		r.samples = append(r.samples, d)
	} else {
		r.samples[r.n%maxReqSamples] = d
	}
	r.n++
	r.busy += d
}

// reqTimer collects, for one request, the time it slept in blocking-query waits.
type reqTimer struct{ waited time.Duration }

const ctxTimer ctxKey = 100

func requestTimer(ctx context.Context) *reqTimer {
	t, _ := ctx.Value(ctxTimer).(*reqTimer)
	return t
}

// timed serves next and records its busy time.
func (s *Sim) timed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rt := &reqTimer{}
		// The mux records the pattern it matched in the request it is given.
		req := r.WithContext(context.WithValue(r.Context(), ctxTimer, rt))
		next.ServeHTTP(w, req)
		s.reqs.record(routeOf(req), time.Since(start)-rt.waited)
	})
}

// RequestStats returns the request figures since the emulator started or the
// last ResetRequestStats.
func (s *Sim) RequestStats() RequestStats {
	s.reqs.mu.Lock()
	defer s.reqs.mu.Unlock()
	out := RequestStats{Requests: s.reqs.n, Busy: s.reqs.busy, Background: s.reqs.backgroundT, Latency: s.reqs.latencyT}
	if len(s.reqs.samples) > 0 {
		sorted := slices.Clone(s.reqs.samples)
		slices.Sort(sorted)
		out.P50 = sorted[len(sorted)/2]
		out.P99 = sorted[min(len(sorted)-1, len(sorted)*99/100)]
	}
	for _, rs := range s.reqs.routes {
		out.Routes = append(out.Routes, *rs)
	}
	slices.SortFunc(out.Routes, func(a, b RouteStats) int {
		if a.Busy != b.Busy {
			return cmp.Compare(b.Busy, a.Busy)
		}
		return strings.Compare(a.Route, b.Route)
	})
	return out
}

// ResetRequestStats starts the request figures afresh.
func (s *Sim) ResetRequestStats() {
	s.reqs.mu.Lock()
	defer s.reqs.mu.Unlock()
	s.reqs.n, s.reqs.busy, s.reqs.samples, s.reqs.backgroundT, s.reqs.routes = 0, 0, nil, 0, nil
	s.reqs.latencyT = 0
}

// routeOf names the request's route for the statistics: its method and the
// pattern that served it, with a node's endpoint after its ID
// ("GET /v1/node/:id/allocations"); never an ID or a variable's path.
func routeOf(r *http.Request) string {
	p := r.Pattern
	switch {
	case p == "":
		p = "unmatched"
	case p == "/v1/node/":
		p = "/v1/node/:id"
		if _, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/node/"), "/"); ok {
			p += "/" + rest
		}
	case strings.HasSuffix(p, "/"):
		p += "..."
	case p == "/v1/nodes" && r.URL.Query().Get("filter") != "":
		p += "?filter" // a list of some nodes, apart from the whole list
	}
	return r.Method + " " + p
}
