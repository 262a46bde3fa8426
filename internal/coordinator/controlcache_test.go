package coordinator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/watched"
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
	co := New(Options{Deps: Deps{Nodes: client.Nodes(), Store: st}})
	read := func(want ...string) {
		t.Helper()
		co.takeMail() // a pass
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
	co.mail.start(term)
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

	co.mail.update(func(a *answers) { a.control.Failed() })
	read("b")
	read("b")
	reads.expect(t, 2, "a watch failed: every pass reads")
	if _, err := st.UpdateControl(ctx, func(ctl *store.Control) error { ctl.Paused = true; return nil }); err != nil {
		t.Fatal(err)
	}
	reads.n.Store(0) // the write's own read is not a pass's
	if n, err := co.watchControl(term, cidx); err != nil || n == cidx {
		t.Fatalf("watch: %d, %v; want a change past %d", n, err, cidx)
	}
	read("b")
	read("b")
	reads.expect(t, 1, "the watch answered again: one pass reads")

	end()
	read("b")
	read("b")
	reads.expect(t, 2, "the watches' term ended: every pass reads")
}

// The control state a pass takes is, over a randomly changing world, what a
// store that never read it before reads, whenever both watches have answered
// every change and after the coordinator's own writes; a pass with nothing
// changed since the last read reads nothing. The world: the pause flag and
// hosts' requests, cancels and releases written by others, requests cleared
// by the coordinator, the two watches answering (only with a change to show:
// they block otherwise), failing and coming back; passes.
func TestControlEqualsFreshOne(t *testing.T) {
	reads := &countRequests{match: func(r *http.Request) bool {
		q := r.URL.Query()
		return r.Method == http.MethodGet && q.Get("index") == "" &&
			(r.URL.Path == "/v1/var/rollboot/control" || r.URL.Path == "/v1/vars" && q.Get("prefix") == "rollboot/requests/")
	}}
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 37))
		_, client, world := simStoreVia(t, nomadsim.Config{Clients: 1, HeartbeatTTL: time.Hour}, reads)
		ctx := t.Context()
		co := New(Options{Deps: Deps{Nodes: client.Nodes(), Store: store.New(client.Variables(), "rollboot", "")}})
		// What the two watches keep (the control variable, the requests'
		// marker: store/absent.go) exists, as a coordinator's first term
		// leaves it: asking the world's index below never creates it.
		for _, keep := range []func(context.Context, uint64, time.Duration) (uint64, error){world.WatchControl, world.WatchRequests} {
			if _, err := keep(ctx, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
		term, end := context.WithCancel(ctx)
		co.mail.start(term)
		type watchOf struct {
			query   func(context.Context, uint64) (uint64, error)
			current func(context.Context, uint64, time.Duration) (uint64, error)
			which   func(*answers) *watched.Value[struct{}]
			idx     uint64
			live    bool
		}
		watches := []*watchOf{
			{query: co.watchControl, current: world.WatchControl, which: func(a *answers) *watched.Value[struct{}] { return &a.control }},
			{query: co.watchRequests, current: world.WatchRequests, which: func(a *answers) *watched.Value[struct{}] { return &a.requests }},
		}
		pending := func() bool { // a change a live watch has not answered
			t.Helper()
			for _, w := range watches {
				n, err := w.current(ctx, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				if w.live && n != w.idx {
					return true
				}
			}
			return false
		}
		dirty := true // written, or a change told, since the last pass read it
		for step := range 40 {
			host := fmt.Sprintf("h%d", rng.IntN(4))
			switch rng.IntN(7) {
			case 0, 1: // others write
				if _, err := world.UpdateControl(ctx, func(ctl *store.Control) error {
					switch rng.IntN(4) {
					case 0:
						ctl.Paused, ctl.PauseReason = !ctl.Paused, "test"
					case 1:
						if ctl.Requests == nil {
							ctl.Requests = map[string]store.Request{}
						}
						ctl.Requests[host] = store.Request{At: t0.Add(time.Duration(step) * time.Minute), By: "test"}
					case 2:
						if ctl.Cancels == nil {
							ctl.Cancels = map[string]time.Time{}
						}
						ctl.Cancels[host] = t0.Add(time.Duration(step) * time.Minute)
					default:
						if ctl.Releases == nil {
							ctl.Releases = map[string]time.Time{}
						}
						ctl.Releases[host] = t0.Add(time.Duration(step) * time.Minute)
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				dirty = true
			case 2: // the coordinator clears a request
				if err := co.clearControl(ctx, host, true, false); err != nil {
					t.Fatal(err)
				}
				dirty = true
			case 3: // a watch answers, if it has something to answer with
				w := watches[rng.IntN(2)]
				n, err := w.current(ctx, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				if w.live && n == w.idx {
					continue // it waits for a change
				}
				idx, err := w.query(term, w.idx)
				if err != nil {
					t.Fatal(err)
				}
				dirty = dirty || idx != w.idx // a change told: read again
				w.idx, w.live = idx, true
			case 4: // a watch fails
				w := watches[rng.IntN(2)]
				co.mail.update(func(a *answers) { w.which(a).Failed() })
				w.idx, w.live = 0, false
			default: // a pass
				co.takeMail()
				reads.n.Store(0)
				ctl, err := co.control(ctx)
				if err != nil {
					t.Fatal(err)
				}
				n := reads.n.Load()
				if !pending() {
					want, err := store.New(client.Variables(), "rollboot", "").Control(ctx)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(ctl, want) {
						t.Fatalf("seed %d step %d: control %+v, want %+v", seed, step, ctl, want)
					}
				}
				if watches[0].live && watches[1].live && !dirty && n != 0 {
					t.Fatalf("seed %d step %d: %d reads with nothing written", seed, step, n)
				}
				dirty = false
			}
		}
		end()
	}
}
