//go:build !norollbootsim

package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

func TestSimCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncbuf.Buffer{}
	cmd := newSimCmd()
	cmd.SetOut(out)
	cmd.SetErr(out)
	// Single-dash long flags work as well as double-dash ones.
	cmd.SetArgs([]string{"-listen", "127.0.0.1:0", "--servers", "1", "-clients=3", "-acl",
		"-state-dir", t.TempDir(), "-pools", "a,b", "-boot-time", "300ms", "-heartbeat-ttl", "100ms",
		"-migrate-time", "20ms", "-jobs"})
	errc := make(chan error, 1)
	go func() { errc <- cmd.ExecuteContext(ctx) }()

	addrRe := regexp.MustCompile(`Cluster address: (http://\S+)`)
	tokRe := regexp.MustCompile(`Management token: (\S+)`)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "Serving until interrupted") {
		select {
		case err := <-errc:
			t.Fatalf("sim exited early: %v\n%s", err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("sim did not start:\n%s", out.String())
		}
	}
	text := out.String()
	addr, tok := addrRe.FindStringSubmatch(text), tokRe.FindStringSubmatch(text)
	if addr == nil || tok == nil {
		t.Fatalf("no address or token in output:\n%s", text)
	}
	for _, want := range []string{"server-1", "client-1", "client-3", "server", "client", "NODE ID", "FOLDER", "node-exporter (system)"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}

	c, err := api.NewClient(&api.Config{Address: addr[1], SecretID: tok[1]})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	nodes, _, err := c.Nodes().List(&api.QueryOptions{Filter: `NodePool == "b"`})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].Name != "client-2" || !strings.Contains(text, nodes[0].ID) {
		t.Fatalf("pool b nodes: %+v", nodes)
	}
	// The default jobs run (the system job on every client).
	var idx uint64
	for {
		as, meta, err := c.Nodes().Allocations(nodes[0].ID, &api.QueryOptions{WaitIndex: idx, WaitTime: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if slices.ContainsFunc(as, func(a *api.Allocation) bool { return a.JobID == "node-exporter" && a.ClientStatus == "running" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("system job not running")
		}
		idx = meta.LastIndex
	}
	// Without the token: 403.
	anon, _ := api.NewClient(&api.Config{Address: addr[1]})
	defer anon.Close()
	if _, _, err := anon.Nodes().List(nil); err == nil {
		t.Fatal("ACLs not enforced")
	}

	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("sim: %v", err)
	}
}

func TestSimCommandBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-clients", "0", "-servers", "0"},
		{"-boot-time", "0s"},
		{"-pools", "a,,b"},
		{"-clients", "2", "-no-raw-exec", "client-3"},
		{"-no-raw-exec", "server-1"},
		{"-nope"},
		{"extra"},
	} {
		cmd := newSimCmd()
		cmd.SetOut(&syncbuf.Buffer{})
		cmd.SetErr(&syncbuf.Buffer{})
		cmd.SetArgs(append([]string{"-listen", "127.0.0.1:0"}, args...))
		if err := cmd.Execute(); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// sim-ctl drives a running emulator through its control client: the sentinel
// appears, the host reboots, and a refusal is an error naming the call.
func TestSimCtlCommand(t *testing.T) {
	s, err := nomadsim.New(nomadsim.Config{Servers: 1, Clients: 1, BootTime: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	host := s.Hosts()[1]
	run := func(args ...string) error {
		cmd := newSimCtlCmd()
		cmd.SetOut(&syncbuf.Buffer{})
		cmd.SetErr(&syncbuf.Buffer{})
		cmd.SetArgs(append(args, "--address", s.Address()))
		return cmd.Execute()
	}
	if err := run("need-reboot", host.Name); err != nil {
		t.Fatal(err)
	}
	if st := s.HostStatuses()[1]; !st.RebootRequired {
		t.Fatalf("no sentinel after need-reboot: %+v", st)
	}
	if err := run("reboot", host.Name); err != nil {
		t.Fatal(err)
	}
	if st := s.HostStatuses()[1]; st.Up && st.Boots == host.Boots {
		t.Fatalf("host did not reboot: %+v", st)
	}
	err = run("reboot", "nope")
	if err == nil || !strings.Contains(err.Error(), "POST /sim/v1/hosts/nope/reboot: 404 Not Found") {
		t.Fatalf("unknown host: %v", err)
	}
}

// -no-raw-exec names client hosts whose raw_exec driver is disabled.
func TestSimNoRawExecFlag(t *testing.T) {
	f := simFlags{servers: 1, clients: 3, bootTime: time.Second, heartbeatTTL: time.Second, migrateTime: time.Second, noRawExec: "client-1, client-3"}
	cfg, err := f.config()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.NoRawExec, []string{"client-1", "client-3"}) {
		t.Fatalf("NoRawExec = %q, want client-1 and client-3", cfg.NoRawExec)
	}
}
