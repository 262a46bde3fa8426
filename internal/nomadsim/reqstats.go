package nomadsim

import (
	"cmp"
	"context"
	"fmt"
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
	Requests uint64 // requests answered
	// RanOut are the requests of Requests that were blocking queries answered
	// because their wait ran out with no change (command/agent/http.go
	// parseWait, nomad/rpc.go blockingRPC): an idle watch's renewal, which its
	// client asks again. They are counted by route too.
	RanOut   uint64
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
	// Variables are the variable requests (GET and PUT /v1/var/..., GET
	// /v1/vars, DELETE) again, by method and variable folder: the path with
	// its last part replaced by "*" ("GET rollboot/plan/*"), or the listed
	// prefix ("LIST rollboot/hosts/"). Most requests first.
	Variables []RouteStats
}

// RouteStats are one route's share of the request figures.
type RouteStats struct {
	Route    string
	Requests uint64
	// Local are the requests of Requests that came through a host's own
	// listener (its local Nomad agent, Host.Addr) rather than the cluster
	// address: in the demo and the bench, the agents' requests, since each
	// agent talks to its own host's Nomad agent and the coordinator to the
	// cluster.
	Local uint64
	// RanOut and LocalRanOut are the requests of Requests and of Local whose
	// wait ran out (RequestStats.RanOut).
	RanOut, LocalRanOut uint64
	Busy                time.Duration
}

// maxReqSamples bounds the per-request samples kept for the percentiles; past
// it, samples overwrite the oldest (a ring).
const maxReqSamples = 1 << 18

type reqStats struct {
	mu          sync.Mutex
	n           uint64
	ranOut      uint64
	busy        time.Duration
	samples     []time.Duration
	backgroundT time.Duration
	latencyT    time.Duration
	routes      map[string]*RouteStats
	vars        map[string]*RouteStats
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

// count adds one request to key's entry of m, creating both as needed.
func count(m *map[string]*RouteStats, key string, local, ranOut bool, d time.Duration) {
	if *m == nil {
		*m = make(map[string]*RouteStats)
	}
	rs := (*m)[key]
	if rs == nil {
		rs = &RouteStats{Route: key}
		(*m)[key] = rs
	}
	rs.Requests++
	rs.Busy += d
	if local {
		rs.Local++
	}
	if ranOut {
		rs.RanOut++
		if local {
			rs.LocalRanOut++
		}
	}
}

func (r *reqStats) record(route, variable string, local, ranOut bool, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	count(&r.routes, route, local, ranOut, d)
	if variable != "" {
		count(&r.vars, variable, local, ranOut, d)
	}
	if ranOut {
		r.ranOut++
	}
	if len(r.samples) < maxReqSamples {
		r.samples = append(r.samples, d)
	} else {
		r.samples[r.n%maxReqSamples] = d
	}
	r.n++
	r.busy += d
}

// reqTimer collects, for one request, the time it slept in blocking-query
// waits, and whether its wait ran out with no change.
type reqTimer struct {
	waited time.Duration
	ranOut bool
}

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
		h, _ := r.Context().Value(ctxHost).(*Host)
		s.logRequest(r, h, start)
		s.reqs.record(routeOf(req), variableOf(req), h != nil, rt.ranOut, time.Since(start)-rt.waited)
	})
}

// RequestStats returns the request figures since the emulator started or the
// last ResetRequestStats.
func (s *Sim) RequestStats() RequestStats {
	s.reqs.mu.Lock()
	defer s.reqs.mu.Unlock()
	out := RequestStats{Requests: s.reqs.n, RanOut: s.reqs.ranOut, Busy: s.reqs.busy, Background: s.reqs.backgroundT, Latency: s.reqs.latencyT}
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
	for _, rs := range s.reqs.vars {
		out.Variables = append(out.Variables, *rs)
	}
	slices.SortFunc(out.Variables, func(a, b RouteStats) int {
		if a.Requests != b.Requests {
			return cmp.Compare(b.Requests, a.Requests)
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
	s.reqs.ranOut = 0
	s.reqs.vars = nil
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

// variableOf names a variable request's folder for the statistics: its method
// and the variable's path with its last part replaced by "*", or LIST and the
// prefix listed; "" for any other request. The folders are few (rollboot's
// kinds of variables), whatever the number of hosts.
func variableOf(r *http.Request) string {
	switch r.Pattern {
	case "/v1/vars":
		return "LIST " + r.URL.Query().Get("prefix")
	case "/v1/var/":
		p := strings.TrimPrefix(r.URL.Path, "/v1/var/")
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			p = p[:i+1] + "*"
		}
		return r.Method + " " + p
	}
	return ""
}

// logRequest writes one line about a request served to Config.RequestLog: when
// its handler began (after the request latency), how long the handler took
// (a blocking query's sleep included), the listener that served it
// ("cluster" or the host's name), method, path, and a blocking query's index.
func (s *Sim) logRequest(r *http.Request, h *Host, start time.Time) {
	if s.cfg.RequestLog == nil {
		return
	}
	by := "cluster"
	if h != nil {
		by = h.Name
	}
	line := fmt.Sprintf("%s %s %s %s %s", start.UTC().Format("15:04:05.000000"), time.Since(start).Round(time.Microsecond), by, r.Method, r.URL.Path)
	if idx := r.URL.Query().Get("index"); idx != "" {
		line += " index=" + idx
	}
	s.logMu.Lock()
	defer s.logMu.Unlock()
	fmt.Fprintln(s.cfg.RequestLog, line)
}
