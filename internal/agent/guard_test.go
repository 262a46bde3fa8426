package agent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// TestAgentRestoresItsRecord: a record forged by someone else (another host's
// agent token can write it), garbled or deleted is put back by the agent.
func TestAgentRestoresItsRecord(t *testing.T) {
	sim, err := nomadsim.New(nomadsim.Config{Clients: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	h := sim.Hosts()[0]
	other, _ := sim.Node(sim.Hosts()[1].Name)
	client, err := api.NewClient(&api.Config{Address: "http://" + h.Addr})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(client.Variables(), "rollboot", "")
	ctx := context.Background()
	a := New(Options{Host: h.Name, Store: st, Local: client.Agent(), NodeList: client.Nodes(), BootIDFile: filepath.Join(h.Dir, "boot_id"),
		Rebooter: &flakyRebooter{ch: make(chan struct{}, 1)}, PollEvery: 20 * time.Millisecond})
	stop, _ := run(t, a)

	var own store.HostRecord
	waitRecord := func(what string, ok func(store.HostRecord, error) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			rec, err := st.Host(ctx, h.Name)
			if ok(rec, err) {
				own = rec
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (record %+v, err %v)", what, rec, err)
			}
			sctx, c := context.WithTimeout(ctx, 50*time.Millisecond)
			sim.WaitIndex(sctx, sim.Index())
			c()
		}
	}
	mine := func(r store.HostRecord, err error) bool {
		return err == nil && r.NodeID == h.NodeID && !r.RebootRequired
	}
	waitRecord("the first record", mine)

	tests := []struct {
		name  string
		forge func(t *testing.T)
	}{
		{name: "shadowing node id and a forged need", forge: func(t *testing.T) {
			f := own
			f.NodeID, f.RebootRequired, f.Reason, f.RequestedAt = other.ID, true, "forged", time.Now().UTC()
			if _, err := st.PutHost(ctx, f); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "garbled", forge: func(t *testing.T) {
			v := &api.Variable{Path: "rollboot/hosts/" + h.Name, Items: map[string]string{"host": h.Name, "reboot_required": "maybe"},
				ModifyIndex: own.ModifyIndex}
			if _, _, err := client.Variables().CheckedUpdate(v, nil); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "deleted", forge: func(t *testing.T) {
			if err := st.DeleteHost(ctx, own); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := own.ModifyIndex
			tt.forge(t)
			waitRecord("the agent to restore its record", func(r store.HostRecord, err error) bool {
				return mine(r, err) && r.ModifyIndex > before+1
			})
		})
	}
	stop()
}

// TestAgentStartsOverAGarbledRecord: an agent whose record was garbled while it
// was down starts anyway and writes its record anew.
func TestAgentStartsOverAGarbledRecord(t *testing.T) {
	sim, h, client := simHost(t, 1)
	if _, _, err := client.Variables().Create(&api.Variable{Path: "rollboot/hosts/" + h.Name,
		Items: map[string]string{"host": h.Name, "reboot_required": "maybe"}}, nil); err != nil {
		t.Fatal(err)
	}
	st := store.New(client.Variables(), "rollboot", "")
	ctx := context.Background()
	a := New(Options{Host: h.Name, Store: st, Local: client.Agent(), NodeList: client.Nodes(), BootIDFile: filepath.Join(h.Dir, "boot_id"),
		Rebooter: &flakyRebooter{ch: make(chan struct{}, 1)}, PollEvery: 20 * time.Millisecond})
	stop, exited := run(t, a)
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec, err := st.Host(ctx, h.Name)
		if err == nil && rec.NodeID == h.NodeID {
			break
		}
		select {
		case <-exited:
			t.Fatal("the agent stopped")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("record not rewritten: %+v, %v", rec, err)
		}
		sctx, c := context.WithTimeout(ctx, 50*time.Millisecond)
		sim.WaitIndex(sctx, sim.Index())
		c()
	}
	stop()
}
