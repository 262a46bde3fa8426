package bench

import (
	"math"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// CycleParts splits the cycles at what the emulator saw happen to each host,
// into the parts the machines and Nomad took and the parts rollboot took:
//   - Drain: from the drain's start to its end (Nomad migrating the node's
//     allocations);
//   - ToReboot: from the drain's end to the host going down (rollboot: the
//     coordinator sees the drain complete and stores it, the agent reads its
//     plan and runs the reboot);
//   - Boot: from the host going down to its node ready again (the machine's
//     boot and the Nomad client's first heartbeat);
//   - Back: from the node ready to the cycle's end (rollboot: the agent's new
//     record, the rejoin checks, eligibility and the history record).
//
// The tail of a rollout comes from the cycles' variance (floor.go); Rollboot
// is the part of it that is rollboot's own, and Floor the makespan ratio the
// cycles would allow if rollboot's parts of each group's cycles all took
// their group's mean: the same bound, with only the machines' variance left.
type CycleParts struct {
	N                           int // cycles with every part seen
	Drain, ToReboot, Boot, Back Spread
	Rollboot, Cycle             Spread // ToReboot + Back; the whole cycle
	Floor                       Floor
}

// Spread is the mean and standard deviation of durations.
type Spread struct{ Mean, SD time.Duration }

func spreadOf(ds []time.Duration) Spread {
	if len(ds) == 0 {
		return Spread{}
	}
	var sum float64
	for _, d := range ds {
		sum += float64(d)
	}
	mean := sum / float64(len(ds))
	var sq float64
	for _, d := range ds {
		sq += (float64(d) - mean) * (float64(d) - mean)
	}
	return Spread{Mean: time.Duration(mean), SD: time.Duration(math.Sqrt(sq / float64(len(ds))))}
}

// cycleSteps is when the emulator saw one cycle's steps happen.
type cycleSteps struct {
	drained, down, ready time.Time
}

// stepsOf finds, in one host's events (in time order), the first drain end at
// or after from, the first reboot after it, and the node's first readiness
// after the boot that follows; ok is false when one is missing.
func stepsOf(events []nomadsim.Event, from time.Time) (st cycleSteps, ok bool) {
	var booted time.Time
	for _, e := range events {
		if e.Time.Before(from) {
			continue
		}
		switch {
		case e.Type == nomadsim.EventDrainComplete && st.drained.IsZero():
			st.drained = e.Time
		case e.Type == nomadsim.EventHostRebootStart && !st.drained.IsZero() && st.down.IsZero():
			st.down = e.Time
		case e.Type == nomadsim.EventHostBoot && !st.down.IsZero() && booted.IsZero():
			booted = e.Time
		case e.Type == nomadsim.EventNodeReady && !booted.IsZero():
			st.ready = e.Time
			return st, true
		}
	}
	return st, false
}

// cycleParts splits the rollout's cycles (rolloutCycle) with the emulator's
// events, and replays the cycles with rollboot's parts at their group's mean
// through concurrency slots against bound (no replay when a cycle's parts
// were not all seen).
func cycleParts(hist []store.HistoryRecord, events []nomadsim.Event, groupOf map[string]string, start time.Time,
	concurrency int, bound time.Duration) CycleParts {
	byHost := map[string][]nomadsim.Event{}
	for _, e := range events {
		switch e.Type {
		case nomadsim.EventDrainComplete, nomadsim.EventHostRebootStart, nomadsim.EventHostBoot, nomadsim.EventNodeReady:
			byHost[e.Host] = append(byHost[e.Host], e)
		}
	}
	type part struct {
		group           string
		cycle, rollboot time.Duration
	}
	var (
		parts                                  []part
		drain, toReboot, boot, back, rb, whole []time.Duration
		missed                                 int
	)
	for _, h := range hist {
		s, ok := rolloutCycle(h, start) // the cycles measureCycles counts
		if !ok {
			continue
		}
		st, ok := stepsOf(byHost[h.Host], s)
		if !ok || h.Finished.Before(st.ready) {
			missed++ // its floor would replay fewer cycles than the bound counts
			continue
		}
		drain = append(drain, st.drained.Sub(s))
		toReboot = append(toReboot, st.down.Sub(st.drained))
		boot = append(boot, st.ready.Sub(st.down))
		back = append(back, h.Finished.Sub(st.ready))
		own := st.down.Sub(st.drained) + h.Finished.Sub(st.ready)
		rb = append(rb, own)
		whole = append(whole, h.Finished.Sub(s))
		parts = append(parts, part{groupOf[h.Host], h.Finished.Sub(s), own})
	}
	cp := CycleParts{N: len(parts), Drain: spreadOf(drain), ToReboot: spreadOf(toReboot), Boot: spreadOf(boot),
		Back: spreadOf(back), Rollboot: spreadOf(rb), Cycle: spreadOf(whole)}
	if len(parts) == 0 || missed > 0 {
		return cp
	}
	ownSum, count := map[string]time.Duration{}, map[string]int{}
	for _, p := range parts {
		ownSum[p.group] += p.rollboot
		count[p.group]++
	}
	steady := map[string][]time.Duration{}
	for _, p := range parts {
		steady[p.group] = append(steady[p.group], p.cycle-p.rollboot+ownSum[p.group]/time.Duration(count[p.group]))
	}
	cp.Floor = makespanFloor(steady, concurrency, bound, floorReplays)
	return cp
}
