package coordinator

import (
	"net/http"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// A pass reads the host records again only when the host watch saw them change
// since the last pass read them, and then from the list the watch read; without
// a live watch it lists them every time.
func TestHostRecordsReadOnlyAfterAChange(t *testing.T) {
	// The lists of host records that are not blocking queries.
	lists := &countRequests{match: func(r *http.Request) bool {
		q := r.URL.Query()
		return r.URL.Path == "/v1/vars" && q.Get("prefix") == "rollboot/hosts/" && q.Get("index") == ""
	}}
	_, client, st := simStoreVia(t, nomadsim.Config{Clients: 1, HeartbeatTTL: time.Hour}, lists)
	ctx := t.Context()
	if _, err := st.PutHost(ctx, store.HostRecord{Host: "a", BootID: "b1"}); err != nil {
		t.Fatal(err)
	}
	co := New(Options{Nodes: client.Nodes(), Store: st})
	read := func(want string) {
		t.Helper()
		recs, _, err := co.hostRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || recs[0].BootID != want {
			t.Fatalf("records %+v, want a with boot %s", recs, want)
		}
	}

	read("b1")
	read("b1")
	lists.expect(t, 2, "no watch: every pass reads")
	idx, err := co.watchVars(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	read("b1")
	read("b1")
	read("b1")
	lists.expect(t, 1, "the watch's first answer lists them, passes do not")

	rec, _ := st.Host(ctx, "a")
	rec.BootID = "b2"
	if _, err := st.PutHost(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if idx2, err := co.watchVars(ctx, idx); err != nil || idx2 == idx {
		t.Fatalf("watch: %d, %v; want a change past %d", idx2, err, idx)
	}
	read("b2")
	read("b2")
	lists.expect(t, 0, "after a change the watch lists them (a blocking query), passes do not")

	co.hostsCache.failed()
	read("b2")
	read("b2")
	lists.expect(t, 2, "watch failed: every pass reads")
}

// The host watch lists again only once a pass took its last list: records
// written meanwhile are seen by the list that follows, at once.
func TestHostWatchListsAgainOnlyAfterAPass(t *testing.T) {
	watchLists := &countRequests{match: func(r *http.Request) bool {
		return r.URL.Path == "/v1/vars" && r.URL.Query().Get("prefix") == "rollboot/hosts/" && r.URL.Query().Get("index") != ""
	}}
	_, client, st := simStoreVia(t, nomadsim.Config{Clients: 1, HeartbeatTTL: time.Hour}, watchLists)
	ctx := t.Context()
	put := func(boot string) {
		t.Helper()
		rec, _ := st.Host(ctx, "a") // its index for the write, when it exists
		if rec.Host == "" {
			rec = store.HostRecord{Host: "a"}
		}
		rec.BootID = boot
		if _, err := st.PutHost(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	put("b1")
	co := New(Options{Nodes: client.Nodes(), Store: st})
	idx, err := co.watchVars(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	watchLists.n.Store(0)

	type answer struct {
		idx uint64
		err error
	}
	next := make(chan answer, 1)
	go func() {
		i, err := co.watchVars(ctx, idx)
		next <- answer{i, err}
	}()
	put("b2") // a change the untaken list does not show
	select {
	case a := <-next:
		t.Fatalf("the watch answered (%d, %v) before any pass took its list", a.idx, a.err)
	case <-time.After(300 * time.Millisecond):
	}
	if n := watchLists.n.Load(); n != 0 {
		t.Fatalf("%d lists before a pass took the last one, want 0", n)
	}
	if _, _, err := co.hostRecords(ctx); err != nil { // the pass takes the list
		t.Fatal(err)
	}
	select {
	case a := <-next:
		if a.err != nil || a.idx == idx {
			t.Fatalf("watch answered %d, %v; want the change past %d", a.idx, a.err, idx)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not list again after the pass took its list")
	}
	if recs, _, err := co.hostRecords(ctx); err != nil || len(recs) != 1 || recs[0].BootID != "b2" {
		t.Fatalf("next pass read %+v, %v; want a at boot b2", recs, err)
	}
}
