package coordinator

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// A pass reads the control state again only after its watches saw a change
// since the last pass read it, or after the coordinator wrote it itself (the
// next pass sees its own write at once, before any watch answers); without
// both watches live, and after their term ends, every pass reads it.
func TestControlReadOnlyAfterAChange(t *testing.T) {
	// The reads of the control variable that are not blocking queries.
	reads := &countRequests{match: func(r *http.Request) bool {
		return r.Method == http.MethodGet && r.URL.Path == "/v1/var/rollboot/control" && r.URL.Query().Get("index") == ""
	}}
	_, client, st := simStoreVia(t, nomadsim.Config{Clients: 1, HeartbeatTTL: time.Hour}, reads)
	ctx := t.Context()
	request := func(host string) {
		t.Helper()
		if _, err := st.UpdateControl(ctx, func(ctl *store.Control) error {
			if ctl.Requests == nil {
				ctl.Requests = map[string]store.Request{}
			}
			ctl.Requests[host] = store.Request{At: time.Now(), By: "test"}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		reads.n.Store(0) // the write's own read is not a pass's
	}
	request("a")
	co := New(Options{Nodes: client.Nodes(), Store: st})
	read := func(want ...string) {
		t.Helper()
		ctl, err := co.control(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ctl.Requests) != len(want) {
			t.Fatalf("requests %v, want %v", ctl.Requests, want)
		}
		for _, h := range want {
			if _, ok := ctl.Requests[h]; !ok {
				t.Fatalf("requests %v, want %v", ctl.Requests, want)
			}
		}
	}

	read("a")
	read("a")
	reads.expect(t, 2, "no watch: every pass reads")
	term, end := context.WithCancel(ctx)
	co.controlCache.start(term)
	cidx, err := co.watchControl(term, 0)
	if err != nil {
		t.Fatal(err)
	}
	read("a")
	reads.expect(t, 2, "one watch answered (its first answer reads it): the pass reads")
	ridx, err := co.watchRequests(term, 0)
	if err != nil {
		t.Fatal(err)
	}
	read("a")
	read("a")
	read("a")
	reads.expect(t, 1, "both watches answered: only the first pass reads")

	request("b")
	if n, err := co.watchRequests(term, ridx); err != nil || n == ridx {
		t.Fatalf("watch: %d, %v; want a change past %d", n, err, ridx)
	}
	read("a", "b")
	read("a", "b")
	reads.expect(t, 1, "after a change the watch saw: one pass reads")

	// The coordinator's own write: the next pass sees it without a watch.
	if err := co.clearControl(ctx, "a", true, false); err != nil {
		t.Fatal(err)
	}
	reads.n.Store(0) // the write's own read is not a pass's
	read("b")
	read("b")
	reads.expect(t, 1, "after its own write: one pass reads")

	co.controlCache.failed(controlWatch)
	read("b")
	read("b")
	reads.expect(t, 2, "a watch failed: every pass reads")
	if _, err := co.watchControl(term, cidx); err != nil {
		t.Fatal(err)
	}
	read("b")
	read("b")
	reads.expect(t, 1, "the watch answered again: one pass reads")

	end()
	read("b")
	read("b")
	reads.expect(t, 2, "the watches' term ended: every pass reads")
}
