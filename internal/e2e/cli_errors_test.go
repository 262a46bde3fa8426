package e2e

// The CLI does not mislead: bounded waits, errors with hints, no state stored
// for a host that does not exist, single-dash flags.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

type cliResult struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// runCLI runs the rollboot binary with a deadline far above what any case needs.
func runCLI(t *testing.T, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, rollbootBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("rollboot %s: %v", strings.Join(args, " "), err)
	}
	if ctx.Err() != nil {
		t.Fatalf("rollboot %s did not end within 60s:\n%s%s", strings.Join(args, " "), r.stdout, r.stderr)
	}
	return r
}

// seeded starts an emulator with two hosts published (as their agents would)
// and client-2 stuck.
func seeded(t *testing.T) (*nomadsim.Sim, *store.Store) {
	t.Helper()
	sim, err := nomadsim.New(nomadsim.Config{Clients: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	st := storeFor(t, sim)
	ctx := context.Background()
	for _, h := range []string{"client-1", "client-2"} {
		if _, err := st.PutHost(ctx, store.HostRecord{Host: h, BootID: "b-" + h, AgentVersion: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.PutPlan(ctx, store.Plan{Host: "client-2", Phase: store.PhaseStuck, PhaseSince: time.Now().UTC(),
		GrantID: "g1", LastError: "the host did not come back"}); err != nil {
		t.Fatal(err)
	}
	return sim, st
}

func TestCLIUnknownHostIsAnError(t *testing.T) {
	t.Parallel()
	sim, st := seeded(t)
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"request typo", []string{"request", "client-l"}, []string{`unknown host "client-l"`, `did you mean "client-1" or "client-2"?`}},
		{"cancel typo", []string{"cancel", "clinet-1"}, []string{`unknown host "clinet-1"`, `"client-1"`}},
		{"release unknown", []string{"release", "db-7"}, []string{`unknown host "db-7"`}},
		{"release not stuck", []string{"release", "client-1"}, []string{`host "client-1" is idle, not stuck`, "rollboot cancel client-1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, append(tt.args, "-address", sim.Address())...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1:\n%s%s", r.code, r.stdout, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}
	ctl, err := st.Control(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ctl.Requests) != 0 || len(ctl.Cancels) != 0 || len(ctl.Releases) != 0 {
		t.Fatalf("refused commands were stored: %+v", ctl)
	}
	// The right names still work: a request, and the release of the stuck host.
	if r := runCLI(t, "request", "client-1", "-reason", "kernel", "-address", sim.Address()); r.code != 0 {
		t.Fatalf("request client-1: %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "release", "client-2", "-address", sim.Address()); r.code != 0 {
		t.Fatalf("release client-2: %d\n%s", r.code, r.stderr)
	}
	ctl, _ = st.Control(context.Background())
	if _, ok := ctl.Requests["client-1"]; !ok {
		t.Errorf("request of client-1 not stored: %+v", ctl)
	}
	if _, ok := ctl.Releases["client-2"]; !ok {
		t.Errorf("release of client-2 not stored: %+v", ctl)
	}
}

// A server that accepts connections and never answers: status gives up at the
// timeout with a message that says so, instead of hanging.
func TestCLITimesOutOnSilentServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // read nothing, answer nothing
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	addr := "http://" + ln.Addr().String()
	r := runCLI(t, "status", "-address", addr, "-timeout", "1s")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, w := range []string{"no answer from Nomad at " + addr + " within 1s", "-timeout"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
	t.Logf("status gave up after %s", r.took)
}

func TestCLIHints(t *testing.T) {
	t.Parallel()
	acl, err := nomadsim.New(nomadsim.Config{Clients: 1, ACL: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(acl.Close)
	notNomad := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notNomad.Close)
	sim, _ := seeded(t)
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"ACLs on without a token", []string{"status", "-address", acl.Address()},
			[]string{"no rollboot state visible", "no token is set", "ACLs are on at " + acl.Address(), `"rollboot/*"`, `namespace "default"`}},
		{"404 from something else", []string{"status", "-address", notNomad.URL},
			[]string{"not found at " + notNomad.URL, "Nomad HTTP API address"}},
		{"no scheme", []string{"status", "-address", strings.TrimPrefix(sim.Address(), "http://")},
			[]string{`has no scheme: use "` + sim.Address() + `"`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, tt.args...)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1:\n%s%s", r.code, r.stdout, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}
}

// Nomad-style single-dash flags on every command; an empty prefix is an error
// naming the namespace and the prefix.
func TestCLISingleDashAndEmptyState(t *testing.T) {
	t.Parallel()
	sim, _ := seeded(t)
	r := runCLI(t, "status", "-json", "-address="+sim.Address())
	if r.code != 0 {
		t.Fatalf("status -json: exit %d\n%s", r.code, r.stderr)
	}
	var s statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || len(s.Hosts) != 2 {
		t.Fatalf("status -json: %v, %+v\n%s", err, s, r.stdout)
	}
	if r.stderr != "" {
		t.Errorf("warnings with state present: %s", r.stderr)
	}
	r = runCLI(t, "status", "--json", "--address", sim.Address(), "-prefix", "nothing-here")
	if r.code != 1 || r.stdout != "" {
		t.Fatalf("status of an empty prefix: exit %d, want 1 and nothing on stdout\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, w := range []string{emptyState, `prefix "nothing-here"`, `namespace "default"`} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, r.stderr)
		}
	}
	// pause takes single-dash flags too.
	if r := runCLI(t, "pause", "-reason", "freeze", "-address", sim.Address()); r.code != 0 || !strings.Contains(r.stdout, "paused") {
		t.Fatalf("pause -reason: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
