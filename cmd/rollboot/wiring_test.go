package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

// The shared flags are the root's persistent flags, and no command registers
// its own under their names: sim-ctl's -address, the emulator's address, is the
// one flag of its own that has a shared flag's name.
func TestSharedFlagsRegisteredOnce(t *testing.T) {
	root := newRootCmd()
	shared := []string{"config", "address", "prefix", "log-json", "log-level"}
	for _, name := range shared {
		if root.PersistentFlags().Lookup(name) == nil {
			t.Errorf("-%s is not a persistent flag of the root", name)
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			for _, name := range shared {
				f := sub.LocalFlags().Lookup(name)
				if f == nil || sub.CommandPath() == "rollboot sim-ctl" && name == "address" {
					continue
				}
				t.Errorf("%s registers -%s itself", sub.CommandPath(), name)
			}
			walk(sub)
		}
	}
	walk(root)
}

// The commands that name a host check it before anything is stored: request
// and cancel refuse an unknown host, release one that is not stuck; pause
// names none. history -host refuses an unknown host rather than print an empty
// table, which would read as "never rebooted".
func TestHostChecks(t *testing.T) {
	sim, c := simtest.Start(t, nomadsim.Config{Clients: 1}, nil)
	st := store.New(c.Variables(), "rollboot", "")
	host := sim.Hosts()[0]
	if _, err := st.PutHost(context.Background(), store.HostRecord{Host: host.Name, NodeID: host.NodeID, BootID: "b1"}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) error {
		root := newRootCmd()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(append(args, "--address", sim.Address()))
		return root.ExecuteContext(context.Background())
	}
	for _, tt := range []struct {
		name string
		args []string
		want string // "": no error
	}{
		{"request", []string{"request", "nohost"}, `unknown host "nohost"`},
		{"cancel", []string{"cancel", "nohost"}, `unknown host "nohost"`},
		{"release", []string{"release", "nohost"}, `unknown host "nohost"`},
		{"release of a host not stuck", []string{"release", host.Name}, `host "` + host.Name + `" is idle, not stuck`},
		{"pause", []string{"pause"}, ""},
		{"history of an unknown host", []string{"history", "--host", "nohost"}, `unknown host "nohost"`},
		{"request without a host", []string{"request"}, "rollboot request needs the host's name: rollboot request HOST (rollboot status lists the hosts)"},
		{"cancel of two hosts", []string{"cancel", "a", "b"}, `rollboot cancel takes one argument, the host's name, got 2: ["a" "b"] (rollboot cancel HOST)`},
		{"policy apply without a file", []string{"policy", "apply"}, "rollboot policy apply needs the policy file's path: rollboot policy apply FILE"},
		{"history of a host never rebooted", []string{"history", "--host", host.Name}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := run(tt.args...)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
	ctl, err := st.Control(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ctl.Requests) != 0 || len(ctl.Cancels) != 0 || len(ctl.Releases) != 0 || !ctl.Paused {
		t.Errorf("control after the refusals: %+v", ctl)
	}
}
