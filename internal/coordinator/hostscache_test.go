package coordinator

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
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
	co := New(Options{Deps: Deps{Nodes: client.Nodes(), Store: st}})
	read := func(want string) {
		t.Helper()
		co.takeMail() // a pass
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

	co.mail.hostsFailed()
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
	co := New(Options{Deps: Deps{Nodes: client.Nodes(), Store: st}})
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
	co.takeMail() // the pass takes the list
	if _, _, err := co.hostRecords(ctx); err != nil {
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
	co.takeMail()
	if recs, _, err := co.hostRecords(ctx); err != nil || len(recs) != 1 || recs[0].BootID != "b2" {
		t.Fatalf("next pass read %+v, %v; want a at boot b2", recs, err)
	}
}

// A host record list older than one a pass read itself is not used: the
// watch's first answer, read before the pass listed the records and coming
// after it, would lack a record the pass saw (a host with a plan and no record
// is one whose need went away).
func TestHostListNeverOlderThanAPassSaw(t *testing.T) {
	_, client, world := simStore(t, nomadsim.Config{Clients: 1, HeartbeatTTL: time.Hour})
	ctx := t.Context()
	co := New(Options{Deps: Deps{Nodes: client.Nodes(), Store: store.New(client.Variables(), "rollboot", "")}})
	old, idx, err := world.HostList(ctx, 0, 0) // the watch's first answer, read now
	if err != nil {
		t.Fatal(err)
	}
	if _, err := world.PutHost(ctx, store.HostRecord{Host: "a", RebootRequired: true}); err != nil {
		t.Fatal(err)
	}
	pass := func() int {
		t.Helper()
		co.takeMail()
		recs, _, err := co.hostRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	if n := pass(); n != 1 { // no watch: the pass lists the records itself
		t.Fatalf("%d records, want a's", n)
	}
	co.mail.hostsAnswered(idx, old, true)
	if n := pass(); n != 1 {
		t.Fatalf("the pass after the late answer saw %d records, want a's", n)
	}
}

// The host records a pass takes are, over a randomly changing world, those a
// store that never read them before reads, whenever the host watch has
// answered every change (a change it has not answered yet wakes a pass once
// it does); no pass sees a record older than the pass before saw, nor loses
// one that still exists, even when the watch's answer was read before a pass
// listed the records itself and comes after it; a pass over records that did
// not change lists none and reads none. The world: records written, created
// and deleted; the watch answering (only after a pass took its last list, and
// only with a change to show, as it blocks otherwise), at once or late,
// failing and coming back; passes.
func TestHostRecordsEqualFreshOnes(t *testing.T) {
	reqs := &countRequests{match: func(r *http.Request) bool {
		q := r.URL.Query()
		return r.Method == http.MethodGet && q.Get("index") == "" &&
			(r.URL.Path == "/v1/vars" && q.Get("prefix") == "rollboot/hosts/" || len(r.URL.Path) > len("/v1/var/rollboot/hosts/") &&
				r.URL.Path[:len("/v1/var/rollboot/hosts/")] == "/v1/var/rollboot/hosts/")
	}}
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 31))
		_, client, world := simStoreVia(t, nomadsim.Config{Clients: 1, HeartbeatTTL: time.Hour}, reqs)
		ctx := t.Context()
		fresh := func() ([]store.HostRecord, []store.BadRecord) {
			t.Helper()
			recs, bad, _, err := store.New(client.Variables(), "rollboot", "").HostsChecked(ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			return recs, bad
		}
		current := func() uint64 { // the index the watch would answer at now
			t.Helper()
			_, idx, err := world.HostList(ctx, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			return idx
		}
		co := New(Options{Deps: Deps{Nodes: client.Nodes(), Store: store.New(client.Variables(), "rollboot", "")}})
		var (
			idx     uint64 // the watch's last answer (0: none since it failed)
			live    bool
			untaken bool   // the watch's last list waits for a pass
			dirty   = true // a record was written that no pass saw yet
			late    *store.HostList
			lateIdx uint64                // an answer read, not delivered yet, and its index
			seen    = map[string]uint64{} // the ModifyIndex of each record the last pass saw
			deleted = map[string]uint64{} // the index of each record's last deletion
		)
		for step := range 40 {
			switch rng.IntN(8) {
			case 0, 1: // a record written, created or deleted
				name := fmt.Sprintf("h%d", rng.IntN(5))
				rec, err := world.Host(ctx, name)
				switch {
				case err == nil && rng.IntN(4) == 0:
					if err = world.DeleteHost(ctx, rec); err == nil {
						deleted[name] = current()
					}
				default:
					rec.Host, rec.BootID, rec.RebootRequired = name, fmt.Sprintf("b%d", rng.IntN(3)), rng.IntN(2) == 0
					_, err = world.PutHost(ctx, rec)
				}
				if err != nil {
					t.Fatal(err)
				}
				dirty = true
			case 6: // the watch reads its answer, to deliver it later
				if late != nil || untaken || live && current() == idx {
					continue
				}
				l, n, err := world.HostList(ctx, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				late, lateIdx = &l, n
			case 7: // the answer read earlier arrives
				if late == nil {
					continue
				}
				co.mail.hostsAnswered(lateIdx, *late, lateIdx != idx)
				untaken = untaken || lateIdx != idx
				idx, live, late, dirty = lateIdx, true, nil, true
			case 2: // the watch answers, if it has something to answer with
				if late != nil || untaken || live && current() == idx {
					continue // it waits: for a pass, or for a change
				}
				n, err := co.watchVars(ctx, idx)
				if err != nil {
					t.Fatal(err)
				}
				untaken = untaken || n != idx
				idx, live = n, true
			case 3: // the watch fails
				if rng.IntN(3) == 0 {
					co.mail.hostsFailed()
					idx, live, untaken, late = 0, false, false, nil
				}
			default: // a pass
				co.takeMail()
				untaken = false
				reqs.n.Store(0)
				recs, bad, err := co.hostRecords(ctx)
				if err != nil {
					t.Fatal(err)
				}
				n := reqs.n.Load()
				now := map[string]uint64{}
				for _, r := range recs {
					now[r.Host] = r.ModifyIndex
				}
				for h, m := range seen {
					if deleted[h] < m && now[h] < m {
						t.Fatalf("seed %d step %d: record %s at %d, the pass before saw it at %d", seed, step, h, now[h], m)
					}
				}
				seen = now
				if !live || current() == idx {
					wantRecs, wantBad := fresh()
					if !reflect.DeepEqual(recs, wantRecs) || !reflect.DeepEqual(bad, wantBad) {
						t.Fatalf("seed %d step %d: records %+v %+v, want %+v %+v", seed, step, recs, bad, wantRecs, wantBad)
					}
				}
				if live && !dirty && n != 0 {
					t.Fatalf("seed %d step %d: %d lists and reads with nothing written", seed, step, n)
				}
				// What the watch has not answered yet this pass did not see.
				dirty = live && current() != idx
			}
		}
	}
}
