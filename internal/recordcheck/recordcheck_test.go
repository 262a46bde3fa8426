package recordcheck

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/hostcheck"
	"github.com/rollboot/rollboot/internal/membership"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/syncbuf"
	"github.com/rollboot/rollboot/internal/watched"
)

// countedJobs lists the agent job's allocations, one running on n1, and
// counts the lists.
type countedJobs struct{ reads int }

func (j *countedJobs) Allocations(string, bool, *api.QueryOptions) ([]*api.AllocationListStub, *api.QueryMeta, error) {
	j.reads++
	return []*api.AllocationListStub{{ID: "a1", NodeID: "n1", ClientStatus: api.AllocClientStatusRunning}}, &api.QueryMeta{LastIndex: 40}, nil
}

func newChecker(jobs hostcheck.JobsAPI, log *syncbuf.Buffer) *Checker {
	now := func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }
	l := slog.New(slog.NewTextHandler(log, nil))
	return &Checker{Members: &membership.Reader{Now: now}, Reporter: membership.Reporter{Log: l},
		Jobs: jobs, AgentJob: "rollboot-agent", Unbacked: func(int) {}, Log: l, Now: now}
}

// A record that names another host's node is ignored and said why; the
// others are kept. What is wrong is logged once, and again only when it
// changes.
func TestCheckIgnoresAndLogsOnChange(t *testing.T) {
	nodes := map[string]*api.NodeListStub{
		"n1": {ID: "n1", Name: "a", Status: api.NodeStatusReady},
		"n2": {ID: "n2", Name: "b", Status: api.NodeStatusReady},
	}
	recs := []store.HostRecord{{Host: "a", NodeID: "n1"}, {Host: "b", NodeID: "n1"}}
	var log syncbuf.Buffer
	k := newChecker(&countedJobs{}, &log)
	live := watched.Value[hostcheck.AgentAllocs]{}
	ctx := context.Background()
	for range 2 {
		got := k.Check(ctx, recs, nil, nodes, store.Control{}, hostcheck.Backing{}, live)
		if len(got.Records) != 1 || got.Records[0].Host != "a" || len(got.Ignored) != 1 || got.Ignored[0].Host != "b" {
			t.Fatalf("Check kept %+v, ignored %+v; want a kept, b ignored", got.Records, got.Ignored)
		}
	}
	if n := strings.Count(log.String(), "host record ignored"); n != 1 {
		t.Errorf("the ignored record logged %d times over two passes, want once:\n%s", n, log.String())
	}
	k.Check(ctx, recs, nil, nodes, store.Control{Problems: []string{"request for x: bad"}}, hostcheck.Backing{}, live)
	if n := strings.Count(log.String(), "control entry skipped"); n != 1 {
		t.Errorf("a new problem logged %d times, want once:\n%s", n, log.String())
	}
}

// The agent job's allocations come from the watch while it is live and no
// older than a list a pass read itself; else a pass lists them.
func TestAgentAllocsFromTheWatchOrRead(t *testing.T) {
	jobs := &countedJobs{}
	var log syncbuf.Buffer
	k := newChecker(jobs, &log)
	ctx := context.Background()
	if _, err := k.agentAllocs(ctx, watched.Value[hostcheck.AgentAllocs]{}); err != nil || jobs.reads != 1 {
		t.Fatalf("without a live watch: %d lists, err %v; want one list", jobs.reads, err)
	}
	old := watched.Value[hostcheck.AgentAllocs]{Live: true, Index: 30, Val: hostcheck.AgentAllocs{Job: "old"}}
	if got, _ := k.agentAllocs(ctx, old); got.Job == "old" || jobs.reads != 2 {
		t.Errorf("a watch's answer older than the pass's own list was used (%d lists)", jobs.reads)
	}
	fresh := watched.Value[hostcheck.AgentAllocs]{Live: true, Index: 40, Val: hostcheck.AgentAllocs{Job: "watched"}}
	if got, _ := k.agentAllocs(ctx, fresh); got.Job != "watched" || jobs.reads != 2 {
		t.Errorf("a live watch's answer as new as the pass's list was not used (%d lists)", jobs.reads)
	}
	k.NewTerm()
	if got, _ := k.agentAllocs(ctx, old); got.Job != "old" || jobs.reads != 2 {
		t.Errorf("a new term still compares the watch with the last term's list (%d lists)", jobs.reads)
	}
}
