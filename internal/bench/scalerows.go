package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
)

// makespanMean is the mean makespan ratio of the rollouts at one host count
// and request latency.
type makespanMean struct {
	Hosts    int
	Latency  time.Duration
	Ratios   []float64 // each rollout's, in order
	Mean     float64
	Min, Max float64
}

// makespanRatio is a rollout's makespan over its lower bound (0: no bound).
func makespanRatio(r *Rollout) float64 {
	if r.LowerBound <= 0 {
		return 0
	}
	return float64(r.Makespan) / float64(r.LowerBound)
}

// makespanMeans groups the rollouts by host count and request latency, in the
// order they ran, and takes the mean of each group's makespan ratios. A
// rollout without a lower bound (no cycle measured) counts as 0: its group
// fails the goal (Min is 0).
func makespanMeans(rollouts []*Rollout) []makespanMean {
	var out []makespanMean
	for _, r := range rollouts {
		i := slices.IndexFunc(out, func(m makespanMean) bool { return m.Hosts == r.Hosts && m.Latency == r.Latency })
		if i < 0 {
			out = append(out, makespanMean{Hosts: r.Hosts, Latency: r.Latency})
			i = len(out) - 1
		}
		out[i].Ratios = append(out[i].Ratios, makespanRatio(r))
	}
	for i := range out {
		m := &out[i]
		sum := 0.0
		for _, x := range m.Ratios {
			sum += x
		}
		m.Mean = sum / float64(len(m.Ratios))
		m.Min, m.Max = slices.Min(m.Ratios), slices.Max(m.Ratios)
	}
	return out
}

// makespanMeanRows are the makespan goal's rows where several rollouts ran at
// a host count and latency: the goal is judged on their mean (a single
// rollout is judged on its own row).
func makespanMeanRows(rep *Report) []Row {
	var rows []Row
	for _, m := range makespanMeans(rep.Rollouts) {
		if len(m.Ratios) < 2 {
			continue
		}
		limit, _, judged := makespanGoal(m.Hosts, m.Latency)
		rows = append(rows, Row{fmt.Sprintf("makespan / lower bound, mean of %d rollouts", len(m.Ratios)), sizeLabel(m.Hosts, m.Latency),
			fmt.Sprintf("%.3f (%.3f to %.3f)", m.Mean, m.Min, m.Max), makespanGoalText(m.Hosts, m.Latency),
			judge(judged, m.Min > 0 && m.Mean <= limit)})
	}
	return rows
}

// requestsPerHost is the Nomad requests a rollout's rollboot processes sent
// for its cycles, coordinator and agents together, per host it rebooted (0:
// none rebooted): the idle watches' renewals (Rollout.Renewals) left out.
func requestsPerHost(r *Rollout) float64 {
	if r.Rebooted() == 0 {
		return 0
	}
	return float64(r.Requests-r.Renewals) / float64(r.Rebooted())
}

// requestRows are a rollout's Nomad requests per rebooted host: a count, flat
// in the fleet's size when every request is for a host's cycle.
func requestRows(r *Rollout) []Row {
	goal := fmt.Sprintf("<= %d", requestsGoal)
	if r.Rebooted() == 0 {
		return []Row{rolloutRow("Nomad requests per rebooted host", r, "none rebooted", goal, "FAIL")}
	}
	per := requestsPerHost(r)
	agents := float64(localRequests(r.Emulator.Routes)) / float64(r.Rebooted())
	stream := "the node event stream kept"
	if r.StreamDropped > 0 {
		stream = fmt.Sprintf("the node event stream cut off %d times as slow", r.StreamDropped)
	}
	renewed := ""
	if r.Renewals > 0 {
		renewed = fmt.Sprintf(" and %d more that renewed idle watches", r.Renewals)
	}
	return []Row{rolloutRow("Nomad requests per rebooted host", r, fmt.Sprintf("%.1f: coordinator %.1f, agents %.1f (%d requests%s, %d hosts rebooted; %s; by route below)",
		per, per-agents, agents, r.Requests-r.Renewals, renewed, r.Rebooted(), stream),
		goal, verdict(per <= requestsGoal))}
}

// localRequests are the requests of routes the agents sent, through their
// hosts' own listeners, the renewals of idle watches left out
// (Rollout.Renewals).
func localRequests(routes []nomadsim.RouteStats) uint64 {
	var n uint64
	for _, rs := range routes {
		n += rs.Local - rs.LocalRanOut
	}
	return n
}

// routeShare is one route's requests in a rollout, and per rebooted host.
type routeShare struct {
	Route    string
	Requests uint64
	PerHost  float64
	Busy     time.Duration
	// Agents are the requests of Requests the agents sent (through their
	// hosts' own listeners), per rebooted host; the rest are the
	// coordinator's.
	Agents float64
}

// routeShares are a rollout's requests by route, most requests first (the
// route's name breaking ties): the first top each, and the rest together as
// other (its Route the number of routes in it).
func routeShares(routes []nomadsim.RouteStats, rebooted, top int) (shares []routeShare, other routeShare) {
	sorted := slices.Clone(routes)
	slices.SortFunc(sorted, func(a, b nomadsim.RouteStats) int {
		if c := cmp.Compare(b.Requests, a.Requests); c != 0 {
			return c
		}
		return strings.Compare(a.Route, b.Route)
	})
	per := func(n uint64) float64 { return float64(n) / float64(max(1, rebooted)) }
	for i, rs := range sorted {
		if i < top {
			shares = append(shares, routeShare{rs.Route, rs.Requests, per(rs.Requests), rs.Busy, per(rs.Local)})
			continue
		}
		other.Requests += rs.Requests
		other.Busy += rs.Busy
		other.Agents += float64(rs.Local)
	}
	other.PerHost = per(other.Requests)
	other.Agents /= float64(max(1, rebooted))
	if n := len(sorted) - len(shares); n > 0 {
		other.Route = fmt.Sprintf("%d other routes", n)
	}
	return shares, other
}

// coordCPUPerHost is the coordinator's CPU time in a rollout per host it
// rebooted (0: none rebooted, or not measured).
func coordCPUPerHost(r *Rollout) time.Duration {
	if r.Rebooted() == 0 {
		return 0
	}
	return r.CoordCPU / time.Duration(r.Rebooted())
}

// coordCPURows are the coordinator's CPU time per rebooted host in a rollout.
func coordCPURows(r *Rollout) []Row {
	const fig = "coordinator CPU per rebooted host"
	if r.CPUNote != "" {
		return []Row{rolloutRow(fig, r, "not measured: "+r.CPUNote, "-", "info")}
	}
	if r.Rebooted() == 0 {
		return []Row{rolloutRow(fig, r, "none rebooted", "-", "info")}
	}
	return []Row{rolloutRow(fig, r, fmt.Sprintf("%s (%s in the rollout, of the whole process's %s: the agents and the emulator with it; sampled at 100 Hz)",
		ms(coordCPUPerHost(r)), dur(r.CoordCPU), dur(r.ProcessCPU)), "-", "info")}
}

// failoverRows are a new leader's first pass with every host pending, at each
// size and latency.
func failoverRows(rep *Report) []Row {
	var rows []Row
	for _, f := range rep.Failovers {
		worst := maxOf(f.FirstPass)
		goal, limit, judged := failoverGoals.at(f.Hosts, f.Latency)
		reqs := slices.Max(append([]uint64{0}, f.Requests...))
		rows = append(rows, Row{"new leader's first pass, every host pending", sizeLabel(f.Hosts, f.Latency),
			fmt.Sprintf("%s (worst of %d; %d hosts pending; at most %d Nomad requests)", ms(worst), len(f.FirstPass), f.Pending, reqs),
			goal, judge(judged, len(f.FirstPass) > 0 && worst <= limit)})
	}
	return rows
}
