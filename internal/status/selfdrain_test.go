package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/store"
)

// A node whose last drain its own client made on shutdown (Nomad records the
// client as the drain's author) shows it; the table says so while the host
// reboots, where it explains a drain that is not rollboot's.
func TestStatusShowsTheClientsOwnDrain(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	stub := func(accessor string) *api.NodeListStub {
		return &api.NodeListStub{ID: "n1", LastDrain: &api.DrainMetadata{StartedAt: at, AccessorID: accessor}}
	}
	tests := []struct {
		name  string
		node  *api.NodeListStub
		phase string
		want  time.Time
		shown bool
	}{
		{name: "the client's own, rebooting", node: stub("client:n1"), phase: store.PhaseRebooting, want: at, shown: true},
		{name: "the client's own, idle: in JSON only", node: stub("client:n1"), phase: store.PhaseIdle, want: at},
		{name: "another node's client", node: stub("client:n2"), phase: store.PhaseRebooting},
		{name: "an operator's", node: stub("token:5a1d"), phase: store.PhaseRebooting},
		{name: "never drained", node: &api.NodeListStub{ID: "n1"}, phase: store.PhaseRebooting},
		{name: "no node", phase: store.PhaseRebooting},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := drainedItself(tc.node)
			if !got.Equal(tc.want) {
				t.Fatalf("drainedItself = %s, want %s", got, tc.want)
			}
			var b bytes.Buffer
			if err := WriteText(&b, View{Hosts: []Host{{Host: "c1", Phase: tc.phase, DrainedItself: got}}}, at); err != nil {
				t.Fatal(err)
			}
			if shown := strings.Contains(b.String(), "drain_on_shutdown"); shown != tc.shown {
				t.Errorf("status:\n%s\nshows the client's own drain: %v, want %v", b.String(), shown, tc.shown)
			}
		})
	}
}
