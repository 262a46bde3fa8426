package deadline

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	tr := &Transport{Timeout: 3 * time.Second, Margin: time.Second}
	cases := []struct {
		name  string
		query string
		want  time.Duration
	}{
		{"plain request", "", 3 * time.Second},
		{"index 0 is not blocking", "?index=0&wait=1m", 3 * time.Second},
		{"blocking query with its wait", "?index=7&wait=160000ms", 160*time.Second + 10*time.Second + time.Second},
		{"blocking query without wait: the servers' 5 minutes", "?index=7", 5*time.Minute + 5*time.Minute/16 + time.Second},
		{"bad wait: the servers' default", "?index=7&wait=soon", 5*time.Minute + 5*time.Minute/16 + time.Second},
		{"event stream: as a 5-minute blocking query", "/v1/event/stream?topic=Node&index=0", 5*time.Minute + 5*time.Minute/16 + time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := "/v1/vars" + tc.query
			if strings.HasPrefix(tc.query, "/") {
				path = tc.query
			}
			req := httptest.NewRequest(http.MethodGet, "http://x"+path, nil)
			if got := tr.For(req); got != tc.want {
				t.Errorf("For(%q) = %s, want %s", tc.query, got, tc.want)
			}
		})
	}
}

// A server that accepts a request and never answers: the request ends at its
// deadline, plain or blocking, and an answer in time is read whole.
func TestHangingServer(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("hang") == "" {
			_, _ = io.WriteString(w, "ok")
			return
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	c := &http.Client{Transport: &Transport{Timeout: 100 * time.Millisecond, Margin: 100 * time.Millisecond}}
	defer c.CloseIdleConnections()

	for _, tc := range []struct{ name, query string }{
		{"plain", "?hang=1"},
		{"blocking", "?hang=1&index=3&wait=100ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Get(srv.URL + tc.query)
			if err == nil {
				resp.Body.Close()
				t.Fatal("a request that got no answer succeeded")
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want a deadline", err)
			}
		})
	}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "ok" {
		t.Errorf("answer %q, %v", b, err)
	}
}
