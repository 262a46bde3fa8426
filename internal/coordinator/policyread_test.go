package coordinator

import (
	"context"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/store"
)

// countedPolicy is a PolicySource that counts its reads; its watch answers
// with the index the test set.
type countedPolicy struct {
	rules rules.Rules
	reads int
	index uint64
	err   error
}

func (p *countedPolicy) Rules(context.Context) (rules.Rules, error) { p.reads++; return p.rules, nil }
func (p *countedPolicy) Watch(context.Context, uint64, time.Duration) (uint64, error) {
	return p.index, p.err
}

// A pass reads the stored policy only when its watch is not live, or saw it
// change since the last read; what the last read said stays in force between.
func TestStoredPolicyReadOnlyAfterAChange(t *testing.T) {
	_, client, _ := simStore(t, nomadsim.Config{Clients: 1, HeartbeatTTL: time.Hour})
	ctx := t.Context()
	src := &countedPolicy{rules: rules.Rules{Version: 1, DefaultGroup: policy.Group{Name: "all", Concurrency: 2}}, index: 10}
	co := New(Options{
		Deps: Deps{Nodes: client.Nodes(), Store: store.New(client.Variables(), "rollboot", ""), Policy: src},
	})
	pass := func(wantReads int, wantVersion int, what string) {
		t.Helper()
		co.takeMail() // a pass
		if err := co.refreshPolicy(ctx); err != nil {
			t.Fatal(err)
		}
		if src.reads != wantReads || co.policy.keep.Version != wantVersion {
			t.Fatalf("%s: %d reads, version %d; want %d reads, version %d", what, src.reads, co.policy.keep.Version, wantReads, wantVersion)
		}
	}
	pass(1, 1, "no watch")
	pass(2, 1, "no watch, again")
	if _, err := co.watchPolicy(ctx, 0); err != nil { // the first answer: a change
		t.Fatal(err)
	}
	pass(3, 1, "after the watch's first answer")
	pass(3, 1, "watch live, nothing changed")
	if _, err := co.watchPolicy(ctx, 10); err != nil { // a timeout: the same index
		t.Fatal(err)
	}
	pass(3, 1, "the watch timed out unchanged")
	src.rules.Version, src.index = 2, 11
	if _, err := co.watchPolicy(ctx, 10); err != nil {
		t.Fatal(err)
	}
	pass(4, 2, "the watch saw a change")
	pass(4, 2, "and nothing since")
	src.err = context.DeadlineExceeded
	if _, err := co.watchPolicy(ctx, 11); err == nil {
		t.Fatal("the watch's failure was not returned")
	}
	pass(5, 2, "the watch failed")
	pass(6, 2, "the watch failed, again")
	src.err = nil
	if _, err := co.watchPolicy(ctx, 11); err != nil {
		t.Fatal(err)
	}
	pass(6, 2, "the watch answered unchanged after its failure: the last read is at its generation")
	co.endTerm()
	pass(7, 2, "a new term reads it again")
}
