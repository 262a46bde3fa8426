package approvalhook

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAsk(t *testing.T) {
	const secret = "Bearer s3cr3t-token"
	var mu sync.Mutex // the handler of one case may still run when the next begins
	var got Request
	var gotAuth string
	answer := func(w http.ResponseWriter) {}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body Request
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got, gotAuth = body, r.Header.Get("X-Approval")
		answer := answer
		mu.Unlock()
		answer(w)
	}))
	defer srv.Close()
	t.Setenv("APPROVAL_SECRET", secret)
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	req := Request{Host: "web-1", Group: "web", Reason: "kernel 6.1", Fingerprint: "k:6.1"}
	hook := func() *Hook {
		return &Hook{URL: srv.URL + "/approve", Timeout: 200 * time.Millisecond, Header: "X-Approval", Env: "APPROVAL_SECRET"}
	}
	tests := []struct {
		name     string
		answer   func(w http.ResponseWriter)
		hook     func() *Hook
		approved bool
		want     string
	}{
		{name: "2xx approves", answer: func(w http.ResponseWriter) { w.WriteHeader(204) }, hook: hook, approved: true, want: "HTTP 204"},
		{name: "200 with a body", answer: func(w http.ResponseWriter) { w.Write([]byte("go ahead\nmore")) }, hook: hook, approved: true, want: "HTTP 200: go ahead"},
		{name: "403 refuses, the secret echoed is masked", answer: func(w http.ResponseWriter) {
			w.WriteHeader(403)
			w.Write([]byte("change freeze (you sent " + secret + ")"))
		}, hook: hook, want: "HTTP 403: change freeze (you sent xxxxx)"},
		{name: "a redirect is not followed: it holds", answer: func(w http.ResponseWriter) {
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(302)
		}, hook: hook, want: "HTTP 302"},
		{name: "no answer in time holds", answer: func(w http.ResponseWriter) { time.Sleep(400 * time.Millisecond) }, hook: hook,
			want: "no answer within 200ms"},
		{name: "the secret's variable not set holds, without asking", answer: func(w http.ResponseWriter) { t.Error("asked") },
			hook: func() *Hook { h := hook(); h.Env = "APPROVAL_UNSET"; return h },
			want: "environment variable APPROVAL_UNSET is not set"},
		{name: "unreachable holds, the URL's credentials not shown", hook: func() *Hook {
			return &Hook{URL: "http://user:pw-123@127.0.0.1:1/approve", Timeout: time.Second}
		}, want: "http://127.0.0.1:1/approve unreachable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			answer, got, gotAuth = tc.answer, Request{}, ""
			if answer == nil {
				answer = func(http.ResponseWriter) {}
			}
			mu.Unlock()
			a := tc.hook().Ask(context.Background(), req, now)
			mu.Lock()
			defer mu.Unlock()
			if a.Approved != tc.approved || !strings.Contains(a.Answer, tc.want) || !a.At.Equal(now) {
				t.Errorf("answer %+v, want approved %v, %q", a, tc.approved, tc.want)
			}
			if strings.Contains(a.Answer, "s3cr3t") || strings.Contains(a.Answer, "pw-123") {
				t.Errorf("answer shows a secret: %q", a.Answer)
			}
			if tc.approved && (got != req || gotAuth != secret) {
				t.Errorf("sent %+v with %q", got, gotAuth)
			}
		})
	}
}

func TestSecretFromFile(t *testing.T) {
	var gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { gotAuth = r.Header.Get("Authorization") }))
	defer srv.Close()
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte("Bearer abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &Hook{URL: srv.URL, Timeout: time.Second, Header: "Authorization", File: f}
	if a := h.Ask(context.Background(), Request{Host: "h"}, time.Now()); !a.Approved || gotAuth != "Bearer abc" {
		t.Errorf("answer %+v, header %q", a, gotAuth)
	}
	h.File = filepath.Join(t.TempDir(), "missing")
	if a := h.Ask(context.Background(), Request{Host: "h"}, time.Now()); a.Approved || !strings.Contains(a.Answer, "cannot be read") {
		t.Errorf("answer %+v", a)
	}
}
