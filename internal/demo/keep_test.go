package demo

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

// With Keep the cluster and its agents outlive the rollout: the printed
// NOMAD_ADDR takes a manual request, which its agents carry out; with UI the
// status page answers meanwhile. Ctrl-C (ctx) then ends the demo cleanly.
func TestDemoKeepAndUI(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: TestDemo runs the demo; the full suite (go test -race ./...) runs it again with -keep and -ui")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ui := ln.Addr().String()
	ln.Close()
	out := &syncbuf.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		sum *Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		sum, err := Run(ctx, Options{Out: out, Timeout: 90 * time.Second, Keep: true, UI: ui})
		done <- result{sum, err}
	}()
	addr := regexp.MustCompile(`export NOMAD_ADDR=(\S+)`)
	var m []string
	waitUntil(t, 2*time.Minute, func() bool { m = addr.FindStringSubmatch(out.String()); return m != nil })
	for _, want := range []string{"Status page: http://" + ui + "/", "rollboot status -watch", "sim-ctl need-reboot"} {
		if !bytes.Contains([]byte(out.String()), []byte(want)) {
			t.Errorf("output lacks %q", want)
		}
	}
	c, err := api.NewClient(&api.Config{Address: m[1]})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(c.Variables(), "rollboot", "")
	if _, err := st.UpdateControl(ctx, func(ctl *store.Control) error {
		if ctl.Requests == nil {
			ctl.Requests = map[string]store.Request{}
		}
		ctl.Requests["client-1"] = store.Request{At: time.Now().UTC(), By: "TestDemoKeepAndUI"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, time.Minute, func() bool {
		hist, err := st.History(ctx)
		n := 0
		for _, r := range hist {
			if r.Host == "client-1" && r.Outcome == "rebooted" {
				n++
			}
		}
		return err == nil && n == 2
	})
	resp, err := http.Get("http://" + ui + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status page: %d", resp.StatusCode)
	}
	cancel()
	r := <-done
	if r.err != nil || !r.sum.OK() {
		t.Fatalf("demo: %v, checks ok %v\n%s", r.err, r.sum != nil && r.sum.OK(), out.String())
	}
}

func waitUntil(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
