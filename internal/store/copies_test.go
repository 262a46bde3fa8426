package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
	"pgregory.net/rapid"

	"github.com/rollboot/rollboot/internal/store"
)

// copiesCluster writes n hosts' records (as their agents would) and plans
// (as a coordinator would), each with reason text of its own.
func copiesCluster(t *testing.T, c *api.Client, n int, reason func(i int) string) {
	t.Helper()
	copiesClusterAt(t, c, "rollboot", n, reason)
}

// copiesClusterAt is copiesCluster under prefix.
func copiesClusterAt(t *testing.T, c *api.Client, prefix string, n int, reason func(i int) string) {
	t.Helper()
	ctx := context.Background()
	agents := store.New(c.Variables(), prefix, "")
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for i := range n {
		h := fmt.Sprintf("host-%03d", i)
		rec := store.HostRecord{Host: h, NodeID: "node-" + h, BootID: "boot-" + h, RebootRequired: true, Reason: reason(i), RequestedAt: at}
		if _, err := agents.PutHost(ctx, rec); err != nil {
			t.Fatal(err)
		}
		p := store.Plan{Host: h, Phase: store.PhasePending, PhaseSince: at, Group: "default", Reason: reason(i), RequestedAt: at}
		if _, err := agents.PutPlan(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
}

// readBoth reads every plan and record as a new leader's first pass does.
func readBoth(t *testing.T, st *store.Store) (map[string]store.Plan, []store.HostRecord) {
	t.Helper()
	ctx := context.Background()
	plans, badPlans, err := st.PlansChecked(ctx)
	if err != nil || len(badPlans) > 0 {
		t.Fatal(err, badPlans)
	}
	recs, bad, _, err := st.HostsChecked(ctx, 0, 0)
	if err != nil || len(bad) > 0 {
		t.Fatal(err, bad)
	}
	return plans, recs
}

// A new leader that loads the copies reads only what changed since they were
// written, and finds the very plans and records a leader reading each one
// finds: a copy at an index the list no longer shows (a plan written, a
// record changed, a plan deleted after the copies, as a leader killed between
// its writes leaves them) is not used.
func TestCopiesSpareReadsAndNeverDecide(t *testing.T) {
	_, _, c := newStore(t)
	ctx := context.Background()
	copiesCluster(t, c, 60, func(int) string { return "kernel update" })

	leader := store.New(c.Variables(), "rollboot", "")
	leader.KeepCopies()
	readBoth(t, leader)
	n, err := leader.WriteCopies(ctx)
	if err != nil || n == 0 {
		t.Fatalf("WriteCopies = %d, %v: want shards written", n, err)
	}
	if again, err := leader.WriteCopies(ctx); err != nil || again != 0 {
		t.Fatalf("WriteCopies with nothing changed = %d, %v: want none", again, err)
	}

	// Changed after the copies: two plans, a record, a plan deleted.
	plans, recs := readBoth(t, leader)
	for _, h := range []string{"host-003", "host-040"} {
		p := plans[h]
		p.Phase, p.Waiting = store.PhaseDraining, "changed after the copies"
		if _, err := leader.PutPlan(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := leader.DeletePlan(ctx, plans["host-007"]); err != nil {
		t.Fatal(err)
	}
	rec := recs[11]
	rec.Reason = "changed after the copies"
	if _, err := store.New(c.Variables(), "rollboot", "").PutHost(ctx, rec); err != nil {
		t.Fatal(err)
	}

	cv := &countingVars{Variables: c.Variables()}
	next := store.New(cv, "rollboot", "")
	next.KeepCopies()
	if err := next.LoadCopies(ctx); err != nil {
		t.Fatal(err)
	}
	shards := cv.reads.Load()
	gotPlans, gotRecs := readBoth(t, next)
	if extra := cv.reads.Load() - shards; extra != 3 {
		t.Errorf("with the copies loaded, the plans and records took %d reads, want 3 (the two plans and the record changed since)", extra)
	}
	wantPlans, wantRecs := readBoth(t, store.New(c.Variables(), "rollboot", ""))
	if !maps.EqualFunc(gotPlans, wantPlans, func(a, b store.Plan) bool { return reflect.DeepEqual(a, b) }) {
		t.Errorf("plans through the copies differ from the plans read one by one")
	}
	if !reflect.DeepEqual(gotRecs, wantRecs) {
		t.Errorf("records through the copies differ from the records read one by one")
	}
	if _, ok := gotPlans["host-007"]; ok {
		t.Errorf("the deleted plan came back from its copy")
	}
}

// A shard over Nomad's limit on a variable is never sent: the shards double
// until each fits, and every entry is then copied.
func TestCopiesShardsDoubleToFit(t *testing.T) {
	_, _, c := newStore(t)
	ctx := context.Background()
	copiesCluster(t, c, 200, func(int) string { // incompressible, 400 characters
		b := make([]byte, 200)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	})
	leader := store.New(c.Variables(), "rollboot", "")
	leader.KeepCopies()
	readBoth(t, leader)
	for range 10 {
		if _, err := leader.WriteCopies(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cv := &countingVars{Variables: c.Variables()}
	next := store.New(cv, "rollboot", "")
	if err := next.LoadCopies(ctx); err != nil {
		t.Fatal(err)
	}
	shards := cv.reads.Load()
	if shards < 2 {
		t.Errorf("%d shards hold 400 entries of 400 random characters: want them split under the 64 KiB limit", shards)
	}
	readBoth(t, next)
	if extra := cv.reads.Load() - shards; extra != 0 {
		t.Errorf("%d reads beside the copies: want every entry copied", extra)
	}
}

// Only a coordinator's store (KeepCopies) writes copies.
func TestCopiesOnlyWhenKept(t *testing.T) {
	_, _, c := newStore(t)
	copiesCluster(t, c, 20, func(int) string { return "kernel update" })
	st := store.New(c.Variables(), "rollboot", "")
	readBoth(t, st)
	if n, err := st.WriteCopies(context.Background()); n != 0 || err != nil {
		t.Errorf("WriteCopies without KeepCopies = %d, %v: want nothing written", n, err)
	}
}

// Hosts under way change their plans every few seconds: their changes alone
// write no shard; hosts coming to rest (a cycle ended) do.
func TestCopiesWrittenForHostsAtRest(t *testing.T) {
	_, _, c := newStore(t)
	ctx := context.Background()
	copiesCluster(t, c, 40, func(int) string { return "kernel update" })
	leader := store.New(c.Variables(), "rollboot", "")
	leader.KeepCopies()
	plans, _ := readBoth(t, leader)
	if n, err := leader.WriteCopies(ctx); err != nil || n == 0 {
		t.Fatalf("WriteCopies = %d, %v: want the shards written", n, err)
	}
	move := func(phase string) {
		t.Helper()
		for i := range 20 {
			p := plans[fmt.Sprintf("host-%03d", i)]
			p.Phase = phase
			idx, err := leader.PutPlan(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			p.ModifyIndex = idx
			plans[p.Host] = p
		}
	}
	move(store.PhaseDraining)
	if n, err := leader.WriteCopies(ctx); err != nil || n != 0 {
		t.Errorf("after 20 hosts went under way, WriteCopies = %d, %v: want none written", n, err)
	}
	move(store.PhaseIdle)
	if n, err := leader.WriteCopies(ctx); err != nil || n == 0 {
		t.Errorf("after 20 hosts came to rest, WriteCopies = %d, %v: want the shards written", n, err)
	}
}

// The copies against a from-scratch reference over a randomly changing world:
// plans written and deleted by the leader, records by their agents, the
// copies written now and then by the leader and by a stale leader that lost
// its term, and leaders replaced at any point. Every new leader that loads the
// copies finds the plans and records that reading each one finds.
func TestCopiesMatchReadsOverRandomChanges(t *testing.T) {
	_, _, c := newStore(t)
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		prefix := fmt.Sprintf("run%d", run) // a world of its own in the one emulator
		ctx := context.Background()
		hosts := rapid.IntRange(1, 24).Draw(rt, "hosts")
		copiesClusterAt(t, c, prefix, hosts, func(int) string { return "kernel update" })
		agents := store.New(c.Variables(), prefix, "")
		newLeader := func() (*store.Store, map[string]store.Plan) {
			st := store.New(c.Variables(), prefix, "")
			st.KeepCopies()
			if err := st.LoadCopies(ctx); err != nil {
				rt.Fatal(err)
			}
			plans, recs := readBoth(t, st)
			wantPlans, wantRecs := readBoth(t, store.New(c.Variables(), prefix, ""))
			if !reflect.DeepEqual(plans, wantPlans) || !reflect.DeepEqual(recs, wantRecs) {
				rt.Fatalf("a new leader through the copies found other plans or records than reading each one")
			}
			return st, plans
		}
		leader, plans := newLeader()
		var stale *store.Store
		host := func() string { return fmt.Sprintf("host-%03d", rapid.IntRange(0, hosts-1).Draw(rt, "host")) }
		for range rapid.IntRange(1, 40).Draw(rt, "steps") {
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0: // the leader writes a plan
				h := host()
				p, ok := plans[h]
				if !ok {
					p = store.Plan{Host: h}
				}
				p.Phase = rapid.SampledFrom([]string{store.PhaseIdle, store.PhasePending, store.PhaseDraining}).Draw(rt, "phase")
				idx, err := leader.PutPlan(ctx, p)
				if err != nil {
					rt.Fatal(err)
				}
				p.ModifyIndex = idx
				plans[h] = p
			case 1: // the leader deletes a plan
				if p, ok := plans[host()]; ok {
					if err := leader.DeletePlan(ctx, p); err != nil {
						rt.Fatal(err)
					}
					delete(plans, p.Host)
				}
			case 2: // an agent changes its record
				rec, err := agents.Host(ctx, host())
				if err != nil {
					rt.Fatal(err)
				}
				rec.Reason = fmt.Sprintf("need %d", rapid.IntRange(0, 9).Draw(rt, "need"))
				if _, err := agents.PutHost(ctx, rec); err != nil && !errors.Is(err, store.ErrConflict) {
					rt.Fatal(err)
				}
			case 3: // the leader reads the records and writes its copies
				plans, _ = readBoth(t, leader)
				if _, err := leader.WriteCopies(ctx); err != nil {
					rt.Fatal(err)
				}
			case 4: // a stale leader writes its copies late
				if stale != nil {
					_, _ = stale.WriteCopies(ctx)
				}
			case 5: // the leader is replaced
				stale = leader
				leader, plans = newLeader()
			}
		}
		newLeader()
	})
}
