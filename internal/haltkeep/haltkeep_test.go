package haltkeep

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/policy"
)

// memStore keeps one halt state with an index; it counts the reads and fails
// the reads or the writes while told to.
type memStore struct {
	st                  policy.HaltState
	index               uint64
	reads               int
	failRead, failWrite bool
}

func (m *memStore) Halts(context.Context) (policy.HaltState, uint64, error) {
	m.reads++
	if m.failRead {
		return policy.HaltState{}, 0, errors.New("unexpected EOF")
	}
	return m.st, m.index, nil
}

func (m *memStore) PutHalts(_ context.Context, st policy.HaltState, index uint64) (uint64, error) {
	if m.failWrite || index != m.index {
		return 0, errors.New("check-and-set failed")
	}
	m.st, m.index = st, m.index+1
	return m.index, nil
}

// The halt state is read again only after its watch saw a change or a write
// failed; a failed read fails closed; a failure under a budget is stored with
// the halt it causes before its decision may be carried out, and a write that
// fails leaves the decision for the next pass.
func TestKeeperReadsAndRecords(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	st := &memStore{index: 1}
	k := New(st, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	budgets := policy.FailureBudgets{Rollout: policy.FailureBudget{MaxFailures: 1, Window: time.Hour, Count: policy.FailureKinds}}
	fail := []policy.Failure{{Host: "h1", Group: "web", Grant: "g1", Kind: policy.FailStuck, At: t0}}

	st.failRead = true
	if p := k.Read(ctx, 1, true); p.Err == "" {
		t.Fatal("a failed read did not fail closed")
	}
	st.failRead = false
	p := k.Read(ctx, 1, true)
	if p.Err != "" || p.Index != 1 {
		t.Fatalf("read %+v", p)
	}
	if k.Read(ctx, 1, true); st.reads != 2 {
		t.Fatalf("%d reads, want the kept one used", st.reads)
	}

	st.failWrite = true
	if ok, err := k.Record(ctx, 1, &p, budgets, fail, t0); ok || err == nil {
		t.Fatalf("a failure whose write failed may be carried out (%v, %v)", ok, err)
	}
	if k.Read(ctx, 1, true); st.reads != 3 {
		t.Fatalf("%d reads, want the state read again after a failed write", st.reads)
	}
	st.failWrite = false
	if ok, err := k.Record(ctx, 1, &p, budgets, fail, t0); !ok || err != nil {
		t.Fatalf("record: %v, %v", ok, err)
	}
	if _, halted := p.State.Halts[policy.RolloutScope]; !halted || st.index != 2 || p.Index != 2 {
		t.Fatalf("after the failure: %+v stored at %d, want the rollout halted", p, st.index)
	}
	if n := k.Notified(); len(n) != 1 || n[0].Scope != policy.RolloutScope {
		t.Errorf("notified %+v", n)
	}
	if ok, _ := k.Record(ctx, 1, &p, policy.FailureBudgets{}, fail, t0); !ok || st.index != 2 {
		t.Errorf("without budgets a failure is written (%d) or held (%v)", st.index, ok)
	}
	k.EndTerm()
	if k.Read(ctx, 1, true); st.reads != 4 || k.Notified() != nil {
		t.Errorf("a new term: %d reads, notified %v; want the state read again and nothing notified", st.reads, k.Notified())
	}
}
