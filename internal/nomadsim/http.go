package nomadsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

type ctxKey int

const (
	ctxHost ctxKey = iota
	ctxToken
)

// handler builds the HTTP handler of one listener. h is the host whose local agent
// this listener is, or nil for the cluster address.
func (s *Sim) handler(h *Host) http.Handler {
	mux := http.NewServeMux()
	s.registerNodeRoutes(mux)
	s.registerVarRoutes(mux)
	s.registerOperatorRoutes(mux)
	s.registerAgentRoutes(mux)
	s.registerJobRoutes(mux)
	s.registerAllocRoutes(mux)
	s.registerACLRoutes(mux)
	s.registerEventRoutes(mux) // eventstream.go
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		control := strings.HasPrefix(r.URL.Path, controlPrefix)
		if !control {
			waited, ok := s.awaitLatency(r)
			s.reqs.latency(waited)
			if !ok {
				return
			}
		}
		if h != nil {
			s.mu.Lock()
			up := h.Up
			s.mu.Unlock()
			if !up {
				// The host is rebooting: nothing listens. Drop the connection so the
				// caller sees a transport error, as with a real powered-off host.
				dropConnection(w)
				return
			}
		}
		if control {
			s.control.ServeHTTP(w, r)
			return
		}
		if s.applyFaults(w, r) {
			return
		}
		ctx := context.WithValue(r.Context(), ctxHost, h)
		s.timed(mux).ServeHTTP(w, r.WithContext(ctx))
	})
}

// awaitLatency holds a request for the request latency (Config.RequestLatency,
// SetRequestLatency) before anything serves it, as the network to a remote or
// loaded leader would. It returns how long it waited, and false when the caller
// gave up or the emulator closed meanwhile: the request then gets no answer.
func (s *Sim) awaitLatency(r *http.Request) (time.Duration, bool) {
	d := time.Duration(s.latency.Load())
	if d <= 0 {
		return 0, true
	}
	start := time.Now()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return time.Since(start), true
	case <-r.Context().Done():
	case <-s.ctx.Done():
	}
	return time.Since(start), false
}

// SetRequestLatency sets the request latency (Config.RequestLatency) from the next
// request on.
func (s *Sim) SetRequestLatency(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("latency %v: must not be negative", d)
	}
	s.latency.Store(int64(d))
	return nil
}

// RequestLatency is the current request latency.
func (s *Sim) RequestLatency() time.Duration { return time.Duration(s.latency.Load()) }

func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "host is down", http.StatusServiceUnavailable)
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	conn.Close()
}

// requestHost is the host whose local agent received r, or nil for the cluster address.
func requestHost(r *http.Request) *Host {
	h, _ := r.Context().Value(ctxHost).(*Host)
	return h
}

// methods wraps h so that only the given methods reach it; others get Nomad's
// 405 "Invalid method" (command/agent/http.go CodedError(405, ErrInvalidMethod)).
func methods(h http.HandlerFunc, allowed ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for _, m := range allowed {
			if r.Method == m {
				h(w, r)
				return
			}
		}
		simhttp.WriteError(w, http.StatusMethodNotAllowed, "Invalid method")
	}
}

var (
	errPermissionDenied = simhttp.Code(http.StatusForbidden, "Permission denied")
	errTokenNotFound    = simhttp.Code(http.StatusForbidden, "ACL token not found")
	errNoLeader         = simhttp.Code(http.StatusInternalServerError, "No cluster leader")
)

// writeJSON writes v as JSON with the given status.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	switch raw := v.(type) {
	case rawArray:
		raw.write(w)
		return
	case rawJSON:
		_, _ = w.Write(append(raw, '\n'))
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}

// rawArray is a JSON array of elements already encoded (cached node stubs),
// written as is: json.Encoder would compact each element again.
type rawArray []json.RawMessage

// rawJSON is a JSON value already encoded, written as is.
type rawJSON []byte

// encodeLocked encodes v, as the answer's copy of state that changes once the
// lock is released: one encoding, where a copy (cloneAPI) and then its
// encoding took three.
func encodeLocked(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (a rawArray) write(w io.Writer) {
	b := make([]byte, 0, 2+len(a)*512)
	b = append(b, '[')
	for i, e := range a {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	b = append(b, ']', '\n')
	_, _ = w.Write(b)
}

// setIndex sets X-Nomad-Index. Nomad never sends index 0 for a read of an existing
// table; a missing header makes api clients spin, so the emulator always sends >= 1.
func setIndex(w http.ResponseWriter, idx uint64) {
	if idx == 0 {
		idx = 1
	}
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(idx, 10))
}

// setQueryMeta sets the read meta headers (nomad/rpc.go setQueryMeta): on the leader
// KnownLeader=true and LastContact=0; a stale read on a follower reports the time
// since it last heard from the leader.
func (s *Sim) setQueryMetaLocked(w http.ResponseWriter, idx uint64) {
	setIndex(w, idx)
	known := s.servers.leaderLocked() != ""
	w.Header().Set("X-Nomad-KnownLeader", strconv.FormatBool(known))
	w.Header().Set("X-Nomad-LastContact", "0")
}

// queryParams are the blocking-query parameters (command/agent/http.go parseWait,
// parseConsistency).
type queryParams struct {
	minIndex uint64
	wait     time.Duration
	stale    bool
}

// maxQueryTime and defaultQueryTime: Nomad caps and defaults wait at 300s
// (nomad/structs/structs.go QueryOptions, MaxBlockingRPCQueryTime).
const maxQueryTime = 300 * time.Second

func parseQuery(r *http.Request) (queryParams, error) {
	var qp queryParams
	q := r.URL.Query()
	if v := q.Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return qp, simhttp.Code(http.StatusBadRequest, "Invalid wait time")
		}
		qp.wait = d
	}
	if v := q.Get("index"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return qp, simhttp.Code(http.StatusBadRequest, "Invalid index")
		}
		qp.minIndex = n
	}
	if _, ok := q["stale"]; ok {
		v := q.Get("stale")
		qp.stale = v == "" || v == "true"
	}
	return qp, nil
}

// blockingRead answers a read endpoint with Nomad's blocking-query semantics
// (nomad/rpc.go blockingRPC): when index > 0 the query re-runs while the result's
// index is <= index, until wait (default and cap 300s, plus up to wait/16 jitter)
// expires; then 200 with the current data. read runs with s.mu held. The query
// watches the index read returns: use blockingReadWatch when what the query
// watches is narrower than what its index covers (watch.go).
func (s *Sim) blockingRead(w http.ResponseWriter, r *http.Request, read func() (any, uint64, error)) {
	s.blockingReadWatch(w, r, nil, read)
}

// blockingReadWatch is blockingRead for a query whose memdb watch set covers less
// than its index: between runs it sleeps until watch (run with s.mu held) returns
// another version, as blockingRPC sleeps on ws.WatchCtx, not on the index.
func (s *Sim) blockingReadWatch(w http.ResponseWriter, r *http.Request, watch *watcher, read func() (any, uint64, error)) {
	qp, err := parseQuery(r)
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	var deadline <-chan time.Time
	if qp.minIndex > 0 {
		wait := qp.wait
		if wait <= 0 || wait > maxQueryTime {
			wait = maxQueryTime
		}
		s.mu.Lock()
		jitter := time.Duration(s.rng.Int64N(int64(wait/16) + 1))
		s.mu.Unlock()
		t := time.NewTimer(wait + jitter)
		defer t.Stop()
		deadline = t.C
	}
	for {
		s.mu.Lock()
		if !qp.stale && s.servers.leaderLocked() == "" {
			s.mu.Unlock()
			simhttp.WriteErr(w, errNoLeader)
			return
		}
		out, idx, err := read()
		closed := s.closed
		var ie *indexedError
		if errors.As(err, &ie) {
			idx = ie.index
		} else if err != nil {
			s.mu.Unlock()
			simhttp.WriteErr(w, err)
			return
		}
		if qp.minIndex == 0 || idx > qp.minIndex || closed {
			s.setQueryMetaLocked(w, idx)
			s.mu.Unlock()
			if ie != nil {
				simhttp.WriteErr(w, ie.err)
				return
			}
			writeJSON(w, http.StatusOK, out)
			return
		}
		if watch == nil {
			watch = &watcher{version: indexWatch(read)}
		}
		var ver watchVersion
		if watch.topic == nil {
			ver = watch.version()
		}
		slept := time.Now()
		changed := s.waitWatchLocked(*watch, ver, deadline, r.Context().Done())
		if rt := requestTimer(r.Context()); rt != nil {
			rt.waited += time.Since(slept)
		}
		s.mu.Unlock()
		if r.Context().Err() != nil {
			return
		}
		if !changed {
			qp.minIndex = 0 // the wait ran out: answer with what there is now
			if rt := requestTimer(r.Context()); rt != nil {
				rt.ranOut = true
			}
		}
	}
}

// indexWatch watches the index a read answers with.
func indexWatch(read func() (any, uint64, error)) func() watchVersion {
	return func() watchVersion {
		_, idx, err := read()
		var ie *indexedError
		if errors.As(err, &ie) {
			idx = ie.index
		}
		return watchVersion{max: idx}
	}
}

// indexedError is a read result that is an error but still carries the index the
// query ran at. Nomad sets the query meta before it turns an empty result into an
// error (command/agent/variable_endpoint.go variableQuery: setMeta, then
// 404 "variable not found"), and blockingRPC blocks on that index like on data.
type indexedError struct {
	err   error
	index uint64
}

func (e *indexedError) Error() string { return e.err.Error() }
func (e *indexedError) Unwrap() error { return e.err }

// decodeBody decodes a JSON request body into v, with Nomad's 400 on bad JSON.
func decodeBody(r *http.Request, v any) error {
	if r.Body == nil {
		return simhttp.Code(http.StatusBadRequest, "Request body is empty")
	}
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		return simhttp.Code(http.StatusBadRequest, "Failed to decode request body: %v", err)
	}
	return nil
}
