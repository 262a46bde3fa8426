package fleetlock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestLimitersPerClient(t *testing.T) {
	l := newLimiters(1, 0) // bursts of 2
	allowed := 0
	for range 50 {
		if l.allow("addr:10.0.0.1", t0) {
			allowed++
		}
	}
	if allowed != 2 {
		t.Fatalf("a flood of 50 at one instant: %d allowed, want the burst of 2", allowed)
	}
	if !l.allow("addr:10.0.0.2", t0) {
		t.Fatal("another client is limited by the first one's flood")
	}
	if !l.allow("addr:10.0.0.1", t0.Add(time.Second)) {
		t.Fatal("the flooding client gets no token a second later")
	}
}

// The clients tracked stay bounded; to make room, a client whose bucket is full
// again goes first (forgetting it changes nothing), before the one seen longest
// ago.
func TestLimitersBounded(t *testing.T) {
	l := newLimiters(1, 3)
	for i := range 100 {
		l.allow(fmt.Sprintf("addr:10.0.%d.%d", i/256, i%256), t0.Add(time.Duration(i)*time.Millisecond))
		if n := l.tracked(); n > 3 {
			t.Fatalf("%d clients tracked, at most 3", n)
		}
	}

	l = newLimiters(1, 2)
	for range 3 {
		l.allow("busy", t0.Add(500*time.Millisecond)) // empty at 0.5s: 1.5 tokens at 2s
	}
	l.allow("quiet", t0.Add(600*time.Millisecond)) // 1 token left: full again at 1.6s
	at := t0.Add(2 * time.Second)
	l.allow("new", at) // no room: "quiet" (full again) goes, not "busy", seen longer ago
	if !l.allow("busy", at) || l.allow("busy", at) {
		t.Fatal("the busy client lost its bucket to make room, while a full one was there")
	}
}

// testServer is a FleetLock server over an emulated cluster, with a fixed clock
// (no bucket refills during the test).
func testServer(t *testing.T, opt Options) *Server {
	t.Helper()
	sim, err := nomadsim.New(nomadsim.Config{Clients: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	client, err := api.NewClient(&api.Config{Address: sim.Address()})
	if err != nil {
		t.Fatal(err)
	}
	opt.Store, opt.Nodes = store.New(client.Variables(), "rollboot", "default"), client.Nodes()
	opt.Now = func() time.Time { return t0 }
	return New(opt)
}

// serveFrom answers one steady-state request for id from addr.
func serveFrom(h http.Handler, addr, id, body string) (int, string) {
	if body == "" {
		body = fmt.Sprintf(`{"client_params":{"id":%q,"group":"default"}}`, id)
	}
	req := httptest.NewRequest(http.MethodPost, PathSteadyState, strings.NewReader(body))
	req.Header.Set("fleet-lock-protocol", "true")
	req.RemoteAddr = addr
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// Without client certificates a client is its source address: a flood of junk
// ids from one address gets 429, another address is still answered; requests
// refused before any Nomad call (a bad body) take nothing from the budget.
func TestRateLimitPerAddress(t *testing.T) {
	const a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	h := testServer(t, Options{AllowedIDs: []string{a}, RateLimit: 1}).Handler()
	limited := 0
	for i := range 20 {
		code, body := serveFrom(h, "10.0.0.1:4000", fmt.Sprintf("%032x", i), "")
		if code == http.StatusTooManyRequests {
			limited++
		} else if !strings.Contains(body, KindUnknownID) {
			t.Fatalf("junk id %d: %d %s", i, code, body)
		}
	}
	if limited != 18 {
		t.Fatalf("20 junk requests at one instant with rate_limit 1: %d limited, want 18", limited)
	}
	if code, body := serveFrom(h, "10.0.0.1:4001", a, ""); code != http.StatusTooManyRequests {
		t.Fatalf("the flooding address, another port: %d %s", code, body)
	}
	if code, body := serveFrom(h, "10.0.0.2:4000", a, ""); code != http.StatusOK {
		t.Fatalf("another address after the flood: %d %s", code, body)
	}
	for range 20 {
		if code, body := serveFrom(h, "10.0.0.3:4000", a, `{"client_params":{}}`); code != http.StatusBadRequest {
			t.Fatalf("a bad body: %d %s", code, body)
		}
	}
	if code, body := serveFrom(h, "10.0.0.3:4000", a, ""); code != http.StatusOK {
		t.Fatalf("after bad requests of its own: %d %s", code, body)
	}
}

// With mutual TLS a client is its certificate: clients behind one address keep
// their own budgets, and requests for ids a certificate does not name (refused
// 403 forbidden) take nothing from that certificate's budget.
func TestRateLimitPerCertificate(t *testing.T) {
	dir := t.TempDir()
	serverCert := newCert(t, "rollboot-fleetlock", nil, false, true)
	ca := newCert(t, "fleet CA", nil, true, false)
	const a, junk = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "0123456789abcdef0123456789abcdef"
	certA, certJunk := clientCert(t, ca, a, nil), clientCert(t, ca, junk, nil)
	certPath, keyPath := serverCert.write(t, dir, "server")
	caPath, _ := ca.write(t, dir, "ca")
	cfg, err := TLSConfig(TLSFiles{Cert: certPath, Key: keyPath, ClientCA: caPath})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := Listen("127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := testServer(t, Options{AllowedIDs: []string{a}, RateLimit: 1, ClientCertID: CertIDSANOrCN})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, srv.Handler()) }()
	t.Cleanup(func() { cancel(); <-done })
	roots := x509.NewCertPool()
	roots.AddCert(serverCert.cert)
	call := func(c *testCert, id string) int {
		t.Helper()
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{c.tlsCert()}},
		}}
		defer hc.CloseIdleConnections()
		req, _ := http.NewRequest(http.MethodPost, "https://"+ln.Addr().String()+PathSteadyState,
			strings.NewReader(fmt.Sprintf(`{"client_params":{"id":%q,"group":"default"}}`, id)))
		req.Header.Set("fleet-lock-protocol", "true")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 10 {
		if code := call(certA, junk); code != http.StatusForbidden {
			t.Fatalf("certificate of %s asking for %s: %d, want 403", a, junk, code)
		}
	}
	limited := 0
	for range 10 {
		if call(certJunk, junk) == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited != 8 {
		t.Fatalf("10 requests of one certificate at one instant: %d limited, want 8", limited)
	}
	if code := call(certA, a); code != http.StatusOK {
		t.Fatalf("another certificate from the same address, after the flood: %d", code)
	}
}
