package bench

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

// A small fixed sample of the benchmark, for CI: 30 hosts in 3 groups. It checks
// that every figure is computed and sane, never how fast anything was: the
// machine running the tests may be slow and loaded.
func TestBenchSample(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a rollout of 30 hosts")
	}
	rep, err := Run(context.Background(), Options{
		Hosts: []int{30}, Groups: 3, Concurrency: 3,
		Idle: 3 * time.Second, Settle: 2 * time.Second, QuietSettle: time.Millisecond, Passes: 10,
		RolloutTimeout: 3 * time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep.Print(&out)
	t.Log("\n" + out.String())

	if len(rep.Rollouts) != 1 {
		t.Fatalf("%d rollouts, want 1", len(rep.Rollouts))
	}
	r := rep.Rollouts[0]
	if !r.Completed {
		t.Fatalf("the rollout did not complete: %s", r.Problem)
	}
	if len(r.Cycles) != 30 || len(r.SentinelToPend) != 30 {
		t.Errorf("%d cycles and %d sentinel-to-pending figures, want one per host (30)", len(r.Cycles), len(r.SentinelToPend))
	}
	// Each group's first 3 drains take free slots; the other 7 each a handed-off one.
	if len(r.HandOff) != 3*(10-3) || len(r.HandOffPasses) != 3*(10-3) {
		t.Errorf("%d hand-offs (%d from the passes' times), want 21", len(r.HandOff), len(r.HandOffPasses))
	}
	// Every cycle is split at the emulator's events, and its parts add up to
	// it (to the nanoseconds each mean is rounded to).
	if p := r.Parts; p.N != 30 || (p.Drain.Mean+p.Boot.Mean+p.Rollboot.Mean-p.Cycle.Mean).Abs() > time.Microsecond || p.Boot.Mean < bootTime {
		t.Errorf("cycle parts %+v: want the 30 cycles split, the parts adding up, the boot at least %s", p, bootTime)
	}
	if r.LowerBound <= 0 || r.Makespan < r.LowerBound/2 {
		t.Errorf("makespan %s against lower bound %s", r.Makespan, r.LowerBound)
	}
	// Ten hosts a group through three slots: the bound counts four waves
	// of the mean cycle, the cycles fill three and a third, so the floor
	// may be under 1 here.
	if f := r.Floor; f.Replays != floorReplays || f.P10 <= 0 || f.Mean < f.P10 || f.P90 < f.Mean {
		t.Errorf("floor %+v, want %d replays and p10 <= mean <= p90", f, floorReplays)
	}
	if per := float64(r.VarWrites) / 30; per <= 0 || per > 10 {
		t.Errorf("%.1f variable writes per rebooted host (%v), want at most 10", per, r.WritesBy)
	}
	if r.Emulator.Requests == 0 || r.Emulator.Busy <= 0 || r.Requests == 0 || r.Requests > r.Emulator.Requests {
		t.Errorf("emulator figures %+v, rollboot's requests %d", r.Emulator, r.Requests)
	}
	// Every request of the rollout is rollboot's: the bench sends none while
	// it is measured.
	if r.Requests != r.Emulator.Requests || requestsPerHost(r) <= 0 {
		t.Errorf("%d requests of rollboot's, %d answered by the emulator: want the same, and some", r.Requests, r.Emulator.Requests)
	}
	if r.CPUNote != "" || r.CoordCPU <= 0 || r.ProcessCPU < r.CoordCPU {
		t.Errorf("coordinator CPU %s of the process's %s (%s): want some, within the process's", r.CoordCPU, r.ProcessCPU, r.CPUNote)
	}
	if len(rep.Failovers) != 1 || rep.Failovers[0].Pending != 30 || len(rep.Failovers[0].FirstPass) != failoverLeaders ||
		slices.Contains(rep.Failovers[0].Requests, 0) {
		t.Errorf("fail-over figures %+v: want every host pending and %d first passes, each with requests", rep.Failovers, failoverLeaders)
	}
	if len(rep.Idle) != 1 || rep.Idle[0].Requests == 0 {
		t.Errorf("idle figures %+v: the leader renews its lock, so some requests", rep.Idle)
	}
	if c := rep.Coord; c == nil || len(c.ColdStart) != 3 || len(c.Passes) != 10 || len(c.Changed) != 10 || len(c.ReadAll) != 10 || c.Needing != 3 {
		t.Errorf("coordinator figures %+v", c)
	}
	if rep.Agent == nil || rep.Agent.Note == "" {
		t.Errorf("agent process %+v: without a binary it is not measured, and says so", rep.Agent)
	}
	for _, row := range rep.Rows() {
		if row.Value == "" || row.Verdict == "" {
			t.Errorf("row %+v is incomplete", row)
		}
	}
	if !strings.Contains(out.String(), "Kured, period 1h") {
		t.Errorf("no Kured baseline in the output")
	}
}

func TestKuredMakespan(t *testing.T) {
	sec := func(n int) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Second
		}
		return out
	}
	tests := []struct {
		name     string
		cycles   []time.Duration
		period   time.Duration
		min, max time.Duration
	}{
		{name: "none", cycles: nil, period: time.Minute},
		// Checks far more often than a cycle: the lock is taken at once.
		{name: "fast checks", cycles: sec(10), period: time.Millisecond, min: 10 * time.Second, max: 10*time.Second + 10*time.Millisecond},
		// Ten one-second cycles within an hour: about one sweep of the period,
		// never less than the cycles, never more than a period per host.
		{name: "hourly", cycles: sec(10), period: time.Hour, min: 10 * time.Second, max: 10 * (time.Hour + time.Second)},
		// One host: its first check plus its cycle.
		{name: "one", cycles: sec(1), period: time.Minute, min: time.Second, max: time.Minute + time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := kuredMakespan(tt.cycles, tt.period)
			if got < tt.min || got > tt.max {
				t.Errorf("makespan %s, want within [%s, %s]", got, tt.min, tt.max)
			}
		})
	}
}

// The election's writes, the record of who leads among them, are counted
// apart from the writes per rebooted host.
func TestCountWrite(t *testing.T) {
	r := &Rollout{WritesBy: map[string]int{}}
	for _, path := range []string{"rollboot/plan/h1", "rollboot/hosts/h1", "rollboot/history/h1-1",
		"rollboot/leader", "rollboot/election", "rollboot/standby/2", "rollboot/coordinator"} {
		countWrite(r, nomadsim.Event{Type: nomadsim.EventVarWrite, Details: map[string]string{"path": path}})
	}
	if r.VarWrites != 3 || r.LockWrites != 4 || r.WritesBy["plan"] != 1 || r.WritesBy["coordinator"] != 0 {
		t.Errorf("%d writes (%v), %d of the election; want 3 and 4", r.VarWrites, r.WritesBy, r.LockWrites)
	}
}

// The makespan goal is judged at 1,000 hosts (1.05) and 5,000 (1.10), with
// no request latency; a smaller rollout's ratio is shown, for information,
// and so is a rollout's at a latency.
func TestMakespanVerdict(t *testing.T) {
	for _, tt := range []struct {
		hosts    int
		latency  time.Duration
		makespan time.Duration
		want     string
	}{
		{100, 0, 120 * time.Second, "info"},
		{1000, 0, 104 * time.Second, "pass"},
		{1000, 0, 105 * time.Second, "pass"},
		{1000, 0, 106 * time.Second, "FAIL"},
		{1000, 50 * time.Millisecond, 106 * time.Second, "info"},
		{5000, 0, 106 * time.Second, "pass"},
		{5000, 0, 110 * time.Second, "pass"},
		{5000, 0, 111 * time.Second, "FAIL"},
	} {
		rep := &Report{Rollouts: []*Rollout{{Hosts: tt.hosts, Latency: tt.latency, Makespan: tt.makespan, LowerBound: 100 * time.Second}}}
		rows := rep.Rows()
		if rows[0].Figure != "makespan / lower bound" || rows[0].Verdict != tt.want {
			t.Errorf("%d hosts, makespan %s of 100s: row %+v, want %s", tt.hosts, tt.makespan, rows[0], tt.want)
		}
	}
}

// The header says the heartbeat TTL of each host count measured, not of
// counts the run did not measure.
func TestHeartbeatTTLs(t *testing.T) {
	for _, c := range []struct {
		hosts []int
		want  string
	}{
		{[]int{30}, "200ms at 30 hosts"},
		{[]int{100, 1000, 5000}, "200ms at 100 hosts, 400ms at 1,000, 2s at 5,000"},
		{[]int{12000}, "4.8s at 12,000 hosts"},
	} {
		if got := heartbeatTTLs(c.hosts); got != c.want {
			t.Errorf("heartbeatTTLs(%v) = %q, want %q", c.hosts, got, c.want)
		}
	}
}
