// Package deadline gives every HTTP request rollboot sends to Nomad, Consul and
// Vault a deadline, so that one request a server accepts and never answers cannot
// hold up the agent or the coordinator.
//
// A plain request gets Timeout. A blocking query (an `index` parameter above 0)
// is meant to wait: it gets its own `wait` (Nomad and Consul default and cap it
// at 5 minutes) plus the jitter the server may add, wait/16 (Nomad's
// nomad/rpc.go blockingRPC, structs.JitterFraction; Consul's agent/consul/rpc.go
// blockingQuery), plus Margin for the answer to travel. Nomad's event stream
// (/v1/event/stream) stays open: it gets the deadline of a blocking query of
// the servers' 5 minutes, as long as rollboot follows one subscription (the
// coordinator's node follower subscribes again every 5 minutes).
package deadline

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Defaults for Transport.
const (
	DefaultTimeout = 10 * time.Second
	DefaultMargin  = 10 * time.Second
	// defaultWait is the wait of a blocking query that sets none: 5 minutes in
	// Nomad (structs.DefaultBlockingRPCQueryTime) and Consul (defaultQueryTime).
	defaultWait = 5 * time.Minute
	// eventStreamPath is Nomad's event stream (command/agent/event_endpoint.go).
	eventStreamPath = "/v1/event/stream"
)

// Transport is an http.RoundTripper that bounds each request, from sending it to
// reading the last byte of the answer.
type Transport struct {
	Base    http.RoundTripper // nil: http.DefaultTransport
	Timeout time.Duration     // a plain request; 0: DefaultTimeout
	Margin  time.Duration     // added to a blocking query's wait; 0: DefaultMargin
}

// Wrap returns base with the default deadlines.
func Wrap(base http.RoundTripper) *Transport { return &Transport{Base: base} }

// For returns the deadline of a request.
func (t *Transport) For(req *http.Request) time.Duration {
	timeout, margin := t.Timeout, t.Margin
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if margin <= 0 {
		margin = DefaultMargin
	}
	if req.URL.Path == eventStreamPath {
		return defaultWait + defaultWait/16 + margin
	}
	q := req.URL.Query()
	if idx, err := strconv.ParseUint(q.Get("index"), 10, 64); err != nil || idx == 0 {
		return timeout
	}
	wait := defaultWait
	if w, err := time.ParseDuration(q.Get("wait")); err == nil && w > 0 {
		wait = w
	}
	return wait + wait/16 + margin
}

// RoundTrip sends req with its deadline. The deadline covers reading the body:
// it is released when the body is closed.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.For(req))
	resp, err := base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the base.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.Base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
