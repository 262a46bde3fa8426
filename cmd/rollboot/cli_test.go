package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// nomadError returns the error the Nomad client gives for an HTTP status.
func nomadError(t *testing.T, status int) error {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, http.StatusText(status), status)
	}))
	defer srv.Close()
	c, err := api.NewClient(&api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Variables().PrefixList("rollboot/hosts/", nil)
	if err == nil {
		t.Fatalf("status %d: no error", status)
	}
	return fmt.Errorf("list rollboot/hosts/: %w", err)
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func withTokenOf(c connInfo, t tokenInfo) connInfo {
	c.token = func() tokenInfo { return t }
	return c
}

func TestExplain(t *testing.T) {
	c := connInfo{Address: "http://nomad:4646", Namespace: "ops", Prefix: "rollboot/prod", Timeout: 30 * time.Second}
	withToken := c
	withToken.TokenSet = true
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tt := range []struct {
		name string
		err  error
		c    connInfo
		want []string // empty: the error is returned as is
	}{
		{"nil", nil, c, nil},
		{"deadline", fmt.Errorf("read: %w", context.DeadlineExceeded), c,
			[]string{"no answer from Nomad at http://nomad:4646 within 30s", "-timeout"}},
		{"net timeout", fmt.Errorf("read: %w", timeoutErr{}), c, []string{"no answer from Nomad"}},
		{"403 without a token", nomadError(t, 403), c,
			[]string{"permission denied at http://nomad:4646", "no token is set", `"rollboot/prod/*"`, `"rollboot/prod/control"`, `"rollboot/prod/requests/*"`, `"rollboot/prod/policy"`, `namespace "ops"`, "rollboot-operator.policy.hcl"}},
		{"403 with a token", nomadError(t, 403), withToken, []string{"the token lacks variables read on", "rollboot-operator.policy.hcl"}},
		{"403 with an unknown token", nomadError(t, 403), withTokenOf(withToken, tokenInfo{kind: tokenInvalid}),
			[]string{"does not know the token given", "another region"}},
		{"403 with a known token", nomadError(t, 403), withTokenOf(withToken, tokenInfo{kind: tokenKnown, name: "ci", policies: []string{"ro"}}),
			[]string{`token "ci" (policies: ro) lacks variables read on "rollboot/prod/*"`}},
		{"404", nomadError(t, 404), c, []string{"not found at http://nomad:4646", "Nomad HTTP API address"}},
		{"refused", fmt.Errorf("list: %w", dial), c, []string{"cannot reach Nomad at http://nomad:4646"}},
		{"500 as is", nomadError(t, 500), c, nil},
		{"other as is", errors.New("boom"), c, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := explain(tt.err, tt.c)
			if len(tt.want) == 0 {
				if got != tt.err {
					t.Fatalf("changed: %v", got)
				}
				return
			}
			if !errors.Is(got, tt.err) {
				t.Errorf("the cause is not kept: %v", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("%q lacks %q", got, w)
				}
			}
			if strings.Contains(got.Error(), "secret") {
				t.Error("a token in the error")
			}
		})
	}
}

func TestAddressHint(t *testing.T) {
	base := errors.New("nomad.address: invalid")
	for _, tt := range []struct {
		name, addr, want string
	}{
		{"no scheme", "127.0.0.1:4646", `use "http://127.0.0.1:4646"`},
		{"host name", "nomad.service:4646", `use "http://nomad.service:4646"`},
		{"scheme", "ftp://nomad", ""},
		{"empty", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := addressHint(base, tt.addr)
			if tt.want == "" {
				if got != base {
					t.Fatalf("changed: %v", got)
				}
				return
			}
			if !strings.Contains(got.Error(), tt.want) || !errors.Is(got, base) {
				t.Fatalf("%v lacks %q", got, tt.want)
			}
		})
	}
	if addressHint(nil, "x:1") != nil {
		t.Fatal("a hint without an error")
	}
}

func TestCloseMatches(t *testing.T) {
	names := []string{"client-1", "client-2", "client-10", "web-a.example.com", "db-1", "fleetlock-0123456789abcdef"}
	for _, tt := range []struct {
		name, host string
		want       []string
	}{
		{"typo", "clinet-1", []string{"client-1"}},
		{"one off", "client-3", []string{"client-1", "client-2", "client-10"}},
		{"case", "DB-1", []string{"db-1"}},
		{"short name", "web-a", []string{"web-a.example.com"}},
		{"prefix of an id", "fleetlock-0123", []string{"fleetlock-0123456789abcdef"}},
		{"nothing close", "zzz", []string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := closeMatches(tt.host, names, 3); !slices.Equal(got, tt.want) {
				t.Fatalf("closeMatches(%q) = %v, want %v", tt.host, got, tt.want)
			}
		})
	}
}

func TestUnknownHostError(t *testing.T) {
	for _, tt := range []struct {
		name  string
		names []string
		want  string
	}{
		{"close", []string{"client-1"}, `unknown host "client-l": no agent published it and rollboot never planned it; did you mean "client-1"?`},
		{"none known", nil, `(no host is known at all)`},
		{"none close", []string{"db-1"}, `never planned it`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := unknownHostError("client-l", tt.names).Error(); !strings.Contains(got, tt.want) {
				t.Fatalf("%q lacks %q", got, tt.want)
			}
		})
	}
}

func TestSingleDashFlags(t *testing.T) {
	root := newRootCmd()
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"status", []string{"status", "-json", "-address=http://x:4646", "-timeout", "2s"}, []string{"status", "--json", "--address=http://x:4646", "--timeout", "2s"}},
		{"double dash kept", []string{"status", "--json"}, []string{"status", "--json"}},
		{"request", []string{"request", "web-1", "-reason", "kernel"}, []string{"request", "web-1", "--reason", "kernel"}},
		{"unknown flag left", []string{"status", "-bogus"}, []string{"status", "-bogus"}},
		{"help", []string{"pause", "-help"}, []string{"pause", "--help"}},
		{"after --", []string{"request", "--", "-json"}, []string{"request", "--", "-json"}},
		{"agent", []string{"agent", "-config", "/etc/rollboot.hcl", "-log-level", "debug"}, []string{"agent", "--config", "/etc/rollboot.hcl", "--log-level", "debug"}},
		{"short flag", []string{"status", "-h"}, []string{"status", "-h"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := normalizeArgs(root, tt.args); !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}
