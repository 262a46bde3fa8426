package agent

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

// sentRequests records the requests an agent sends, as it sends them.
type sentRequests struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (s *sentRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.mu.Unlock()
	return http.DefaultTransport.RoundTrip(r)
}

// matching returns the requests sent so far to paths ending in suffix, as
// blocking queries (a wait) or not.
func (s *sentRequests) matching(suffix string, blocking bool) []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*http.Request
	for _, r := range s.reqs {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, suffix) && r.URL.Query().Has("wait") == blocking {
			out = append(out, r)
		}
	}
	return out
}

// An agent's requests for one granted reboot. The watch of its own record
// never starts by reading back what the agent's start just wrote: its first
// query waits past that write. With nothing to run before the reboot (no
// pre-reboot hook, no delay) the reboot reads the plan and the node, outside
// their watch, once: the final go/no-go; and the record's watch, answered by
// the announcement of the reboot, asks no more (the reboot would cut its
// query). With a hook it reads each twice: the check that the grant is still
// current, whose read the first go/no-go takes (the node read again there),
// and the final go/no-go; and the record is watched through the hooks. The
// plan's watch waits meanwhile, and after a reboot starts past the agent's
// first write of its record. With the record it wrote before the reboot in
// its record file (recordfile.go), the start does not read the record back.
func TestRequestsOfOneReboot(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hooks      [][]string
		planReads  int
		nodeReads  int
		whatIsRead string
		guards     int  // the record watch's queries: exactly one, or at least two
		file       bool // the record of the boot before is in the record file
	}{
		{"nothing before the reboot", nil, 1, 1, "the final go/no-go", 1, false},
		{"a pre-reboot hook", [][]string{{"true"}}, 2, 2, "the grant's check or the first go/no-go, and the final go/no-go", 2, false},
		{"a record file", nil, 1, 1, "the final go/no-go", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newAgentEnv(t, nomadsim.Config{Clients: 1})
			sent := &sentRequests{}
			ctx := context.Background()
			idle, err := e.st.PutPlan(ctx, store.Plan{Host: e.h.Name, Phase: store.PhaseIdle})
			if err != nil {
				t.Fatal(err)
			}
			// The record of the boot before, as after a reboot.
			before := store.HostRecord{Host: e.h.Name, NodeID: e.h.NodeID, BootID: "the-boot-before"}
			if before.ModifyIndex, err = e.st.PutHost(ctx, before); err != nil {
				t.Fatal(err)
			}
			e.drainFor(t, "g1")
			reb := &countingRebooter{ch: make(chan struct{}, 4)}
			o := e.options(reb, nil)
			o.PreHooks = tc.hooks
			if tc.file {
				o.RecordFile = filepath.Join(t.TempDir(), "record.json")
				New(Options{Host: e.h.Name, RecordFile: o.RecordFile}).keepRecord(before) // as the agent before the reboot did
			}
			defer runCounted(t, e, o, sent)()
			if _, err := e.st.PutPlan(ctx, store.Plan{Host: e.h.Name, Phase: store.PhaseDrained, ManualRequest: true, GrantID: "g1",
				BootIDAtGrant: e.bootID, NodeID: e.h.NodeID, ModifyIndex: idle}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-reb.ch:
			case <-time.After(20 * time.Second):
				t.Fatal("no reboot")
			}
			watches := sent.matching("/hosts/"+e.h.Name, true)
			if n := len(watches); tc.guards == 1 && n != 1 || n < tc.guards {
				t.Errorf("%d queries of the record's watch, want %d", n, tc.guards)
			}
			for _, r := range watches {
				if i := r.URL.Query().Get("index"); i == "" || i == "0" {
					t.Errorf("a watch of the record from index %q, want past the agent's own write: %s", i, r.URL)
				}
			}
			if n, want := len(sent.matching("/hosts/"+e.h.Name, false)), map[bool]int{false: 1, true: 0}[tc.file]; n != want {
				t.Errorf("%d reads of the record outside its watch, want %d (the start's, without a record file)", n, want)
			}
			if n := len(sent.matching("/plan/"+e.h.Name, false)); n != tc.planReads {
				t.Errorf("%d reads of the plan outside its watch, want %d (%s)", n, tc.planReads, tc.whatIsRead)
			}
			if n := len(sent.matching("/node/"+e.h.NodeID, false)); n != tc.nodeReads {
				t.Errorf("%d reads of the node, want %d (%s)", n, tc.nodeReads, tc.whatIsRead)
			}
			// The plan's watch starts past the agent's first write of its record
			// after the reboot (no plan before it can grant this boot), and asks nothing more once
			// it offered the grant, until the attempt is over: one query, which
			// the grant answered.
			planWatch := sent.matching("/plan/"+e.h.Name, true)
			if n := len(planWatch); n != 1 {
				t.Errorf("%d queries of the plan's watch by the reboot, want 1", n)
			}
			for _, r := range planWatch {
				if i := r.URL.Query().Get("index"); i == "" || i == "0" || i == strconv.FormatUint(idle, 10) {
					t.Errorf("a watch of the plan from index %q, want past the agent's own write: %s", i, r.URL)
				}
			}
		})
	}
}

// A host without a plan (the coordinator never queued it): Nomad answers its
// plan's watch at the writes of other plans near its path (store/absent.go),
// and the watch waits after such an answer instead of asking again at once; a
// write of the agent's record (its need) ends the wait, so the plan the
// coordinator answers it with is seen at once.
func TestPlanWatchWithoutAPlan(t *testing.T) {
	e := newAgentEnv(t, nomadsim.Config{Clients: 1})
	sent := &sentRequests{}
	ctx := t.Context()
	neighbour := store.Plan{Host: e.h.Name + "x", Phase: store.PhaseIdle} // beside the host's plan in Nomad's radix tree
	var err error
	if neighbour.ModifyIndex, err = e.st.PutPlan(ctx, neighbour); err != nil {
		t.Fatal(err)
	}
	reb := &countingRebooter{ch: make(chan struct{}, 4)}
	var log syncbuf.Buffer
	o := e.options(reb, &log)
	defer func() {
		if t.Failed() {
			t.Log(log.String())
		}
	}()
	o.AbsentPlanWait = 30 * time.Second // longer than the test: a wait not ended by the need fails it
	defer runCounted(t, e, o, sent)()
	for range 50 {
		neighbour.LastError = time.Now().String()
		if neighbour.ModifyIndex, err = e.st.PutPlan(ctx, neighbour); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(sent.matching("/plan/"+e.h.Name, true)); n > 2 {
		t.Fatalf("%d queries of the absent plan's watch while 50 plans beside it were written, want 2 at most", n)
	}

	// The need: the agent writes its record, and the coordinator grants it.
	e.drainFor(t, "g1")
	if err := os.WriteFile(filepath.Join(e.h.Dir, "reboot-required"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, e.st, e.h.Name, "the need", func(r store.HostRecord) bool { return r.RebootRequired })
	if _, err := e.st.PutPlan(ctx, store.Plan{Host: e.h.Name, Phase: store.PhaseDrained, ManualRequest: true, GrantID: "g1",
		BootIDAtGrant: e.bootID, NodeID: e.h.NodeID}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-reb.ch:
	case <-time.After(15 * time.Second):
		t.Fatal("no reboot: the plan's watch still waited after the agent wrote its need")
	}
}

// runCounted runs the agent with o, every request it sends to Nomad through
// sent, until it wrote its first record of this boot and its plan's watch sent
// a query. It returns the agent's stop.
func runCounted(t *testing.T, e *agentEnv, o Options, sent *sentRequests) (stop func()) {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: "http://" + e.h.Addr, SecretID: tokenOf(e.sim), HttpClient: &http.Client{Transport: sent}})
	if err != nil {
		t.Fatal(err)
	}
	o.Store, o.Local, o.NodeList, o.Nodes = store.New(c.Variables(), "rollboot", ""), c.Agent(), c.Nodes(), c.Nodes()
	stop, _ = run(t, New(o))
	waitRecord(t, e.st, e.h.Name, "the first record", func(r store.HostRecord) bool { return r.BootID == e.bootID })
	for deadline := time.Now().Add(20 * time.Second); len(sent.matching("/plan/"+e.h.Name, true)) < 1; {
		if time.Now().After(deadline) {
			stop()
			t.Fatal("the plan's watch sent no query")
		}
		time.Sleep(time.Millisecond)
	}
	return stop
}
