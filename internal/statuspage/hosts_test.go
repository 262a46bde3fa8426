package statuspage

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHostAllowed(t *testing.T) {
	srv := New(Source{}, nil)
	srv.AllowHosts("rollboot.service.consul", "Coord-1.Example.COM.", "")
	tests := []struct {
		host string
		want bool
	}{
		{"", true}, // HTTP/1.0 without a Host header: no browser
		{"127.0.0.1", true},
		{"127.0.0.1:9464", true},
		{"10.0.0.5:9464", true},
		{"[::1]:9464", true},
		{"[::1]", true},
		{"[fe80::1%25eth0]:9464", true},
		{"localhost", true},
		{"localhost:9464", true},
		{"LOCALHOST.:9464", true},
		{"page.localhost:9464", true},
		{"rollboot.service.consul:9464", true},
		{"ROLLBOOT.Service.Consul", true},
		{"coord-1.example.com:9464", true},
		{"evil.example", false},
		{"evil.example:9464", false},
		{"rollboot.service.consul.evil.example:9464", false},
		{"localhost.evil.example", false},
		{"127.0.0.1.nip.io:9464", false},
		{"2130706433:9464", false}, // 127.0.0.1 as a number is a name to the server
		{"service.consul", false},
	}
	for _, tt := range tests {
		if got := srv.hostAllowed(tt.host); got != tt.want {
			t.Errorf("Host %q allowed = %v, want %v", tt.host, got, tt.want)
		}
	}
}

// A request naming another host is refused on every route of the page (the
// event stream too, without taking a stream's room); an IP address, localhost
// and an allowed name are served.
func TestForeignHostRefused(t *testing.T) {
	srv, url := testServerOf(t, newFakeState(), func(s *Server) { s.AllowHosts("rollboot.service.consul") })
	port := url[strings.LastIndex(url, ":"):]
	for _, path := range []string{PathPage, "/app.js", PathJSON, PathEvents} {
		for _, tt := range []struct {
			host string
			want int
		}{
			{"evil.example" + port, http.StatusMisdirectedRequest},
			{"127.0.0.1.nip.io" + port, http.StatusMisdirectedRequest},
			{"127.0.0.1" + port, http.StatusOK},
			{"localhost" + port, http.StatusOK},
			{"rollboot.service.consul" + port, http.StatusOK},
		} {
			req, _ := http.NewRequest(http.MethodGet, url+path, nil)
			req.Host = tt.host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body []byte
			if resp.StatusCode != http.StatusOK {
				body, _ = io.ReadAll(resp.Body)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("GET %s with Host %q: %d, want %d", path, tt.host, resp.StatusCode, tt.want)
			}
			if tt.want != http.StatusOK && !strings.Contains(string(body), "telemetry.allowed_hosts") {
				t.Errorf("GET %s with Host %q: %q does not say what to do", path, tt.host, body)
			}
		}
	}
	waitUntil(t, "the accepted streams to end", func() bool { return srv.subscribers() == 0 })
}

// Beyond maxStreams live pages the stream is refused with 503 and Retry-After;
// a page that leaves frees its room.
func TestStreamsCapped(t *testing.T) {
	srv, url := testServerOf(t, newFakeState(), func(s *Server) { s.maxStreams = 2 })
	open := func() *http.Response {
		t.Helper()
		resp, err := http.Get(url + PathEvents)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	first, second := open(), open()
	if first.StatusCode != http.StatusOK || second.StatusCode != http.StatusOK {
		t.Fatalf("streams within the cap: %d, %d", first.StatusCode, second.StatusCode)
	}
	third := open()
	if third.StatusCode != http.StatusServiceUnavailable || third.Header.Get("Retry-After") != "30" {
		t.Fatalf("a stream beyond the cap: %d, Retry-After %q; want 503, 30", third.StatusCode, third.Header.Get("Retry-After"))
	}
	if j, err := http.Get(url + PathJSON); err != nil || j.StatusCode != http.StatusOK {
		t.Fatalf("the JSON beside full streams: %v %v", j, err)
	} else {
		j.Body.Close()
	}
	first.Body.Close()
	waitUntil(t, "the first stream's room", func() bool { return srv.subscribers() == 1 })
	if again := open(); again.StatusCode != http.StatusOK || again.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("a stream after one left: %d %q", again.StatusCode, again.Header.Get("Content-Type"))
	}
}

// waitUntil waits for cond, failing after 30 seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
