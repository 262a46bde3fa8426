package raftsim

import (
	"slices"
	"testing"
	"time"
)

// fakeEnv runs a cluster without an emulator: timers wait until the test fires
// them, the index is the cluster's own, and Pick takes the first candidate.
type fakeEnv struct {
	index   uint64
	pending []func()
	events  []string // type:reason
}

func (e *fakeEnv) Apply() uint64                   { e.index++; return e.index }
func (e *fakeEnv) Index() uint64                   { return e.index }
func (e *fakeEnv) Wake()                           {}
func (e *fakeEnv) After(_ time.Duration, f func()) { e.pending = append(e.pending, f) }
func (e *fakeEnv) Pick(int) int                    { return 0 }

func (e *fakeEnv) Event(typ, _ string, d map[string]string) {
	e.events = append(e.events, typ+":"+d["reason"])
}

// fire runs the timers pending now (not those they start).
func (e *fakeEnv) fire() {
	p := e.pending
	e.pending = nil
	for _, f := range p {
		f()
	}
}

func newTestCluster(t *testing.T, n int, cfg Config) (*Cluster, *fakeEnv, []*Member) {
	t.Helper()
	env := &fakeEnv{}
	cfg.LeaderEvent, cfg.HealthEvent = "leader", "health"
	c := New(env, cfg)
	var ms []*Member
	for i := range n {
		m := &Member{ID: string(rune('a' + i)), Host: string(rune('a' + i))}
		c.Add(m, true)
		ms = append(ms, m)
	}
	c.Elect()
	if c.Leader() != ms[0] {
		t.Fatalf("leader %v, want a", c.Leader())
	}
	return c, env, ms
}

func TestLeaderDownElectionAndCatchUp(t *testing.T) {
	c, env, ms := newTestCluster(t, 3, Config{})
	if h := c.Health(); !h.Healthy || h.FailureTolerance != 1 || len(h.Voters) != 3 {
		t.Fatalf("start: %+v", h)
	}
	c.HostDown(ms[0])
	if c.Leader() != nil || !slices.Contains(env.events, "leader:leader down") {
		t.Fatalf("leader %v after its host went down; events %v", c.Leader(), env.events)
	}
	env.fire() // the election timeout
	if c.Leader() != ms[1] {
		t.Fatalf("new leader %v, want b", c.Leader())
	}
	if h := c.Health(); h.Healthy || h.FailureTolerance != 0 {
		t.Fatalf("one down: %+v", h)
	}
	c.HostUp(ms[0], false)
	if ms[0].Healthy() {
		t.Fatal("healthy before catching up")
	}
	env.fire() // caught up
	if h := c.Health(); !ms[0].Healthy() || !h.Healthy || h.FailureTolerance != 1 {
		t.Fatalf("back: %+v", h)
	}
}

func TestStalledLeaderDeposed(t *testing.T) {
	c, env, ms := newTestCluster(t, 3, Config{})
	c.SetStalled(ms[0], true)
	if c.Leader() != ms[0] {
		t.Fatal("a stalled leader is deposed only after the election timeout")
	}
	env.fire()
	if c.Leader() == nil || c.Leader() == ms[0] {
		t.Fatalf("leader %v after the timeout", c.Leader())
	}
}

func TestNoQuorumNoLeader(t *testing.T) {
	c, env, ms := newTestCluster(t, 3, Config{})
	c.HostDown(ms[1])
	c.HostDown(ms[2])
	env.fire()
	if c.Leader() != nil {
		t.Fatalf("leader %v without a quorum", c.Leader())
	}
	c.HostUp(ms[1], false)
	env.fire()
	if c.Leader() == nil {
		t.Fatal("no leader with the quorum back")
	}
}

func TestDeadServerRemovedRejoinsAsNonVoter(t *testing.T) {
	c, env, ms := newTestCluster(t, 3, Config{CleanupDeadServers: true, Product: "p"})
	c.HostDown(ms[2])
	env.fire()
	c.AutopilotPass(time.Now())
	if c.ByHost("c") != nil || c.RemovedByHost("c") != ms[2] || ms[2].Voter() {
		t.Fatalf("not removed: %v", env.events)
	}
	c.HostUp(ms[2], false)
	if c.ByHost("c") != ms[2] || ms[2].Voter() {
		t.Fatal("not back as a non-voter")
	}
	env.fire() // caught up
	c.AutopilotPass(time.Now())
	if !ms[2].Voter() {
		t.Fatalf("not promoted: %v", env.events)
	}
	for _, want := range []string{EventRemoved, EventRejoined, EventPromoted} {
		if !slices.Contains(env.events, want+":") {
			t.Errorf("no %s event in %v", want, env.events)
		}
	}
}

func TestStandInReplaced(t *testing.T) {
	env := &fakeEnv{}
	c := New(env, Config{LeaderEvent: "leader", StandIn: func() *Member { return &Member{ID: "implicit"} }})
	c.Elect()
	if l := c.Leader(); l == nil || l.ID != "implicit" || len(c.Members()) != 1 {
		t.Fatalf("stand-in not leader: %v", l)
	}
	c.Add(&Member{ID: "a", Host: "a"}, true)
	if c.Leader() != nil || c.ByID("implicit") != nil || !slices.Contains(env.events, "leader:implicit server replaced") {
		t.Fatalf("stand-in still there: leader %v, events %v", c.Leader(), env.events)
	}
	c.Elect()
	if l := c.Leader(); l == nil || l.ID != "a" {
		t.Fatalf("leader %v, want a", l)
	}
}

func TestRemovals(t *testing.T) {
	cases := []struct {
		name      string
		potential int
		failed    []bool // voter?
		want      []int
	}{
		{"3 servers, 1 failed voter", 3, []bool{true}, []int{0}},
		{"3 servers, 2 failed voters", 3, []bool{true, true}, []int{0}},
		{"5 servers, 3 failed voters", 5, []bool{true, true, true}, []int{0, 1}},
		{"2 servers, 1 failed voter", 2, []bool{true}, nil},
		{"non-voters always go", 3, []bool{false, false}, []int{0, 1}},
		{"a non-voter spends the budget", 3, []bool{false, true}, []int{0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Removals(tc.potential, tc.failed); !slices.Equal(got, tc.want) {
				t.Fatalf("Removals(%d, %v) = %v, want %v", tc.potential, tc.failed, got, tc.want)
			}
		})
	}
}
