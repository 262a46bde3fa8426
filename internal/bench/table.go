package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one figure of the table.
type Row struct {
	Figure, Hosts, Value, Goal string
	Verdict                    string // "pass", "FAIL" or "info"
}

// floorMinWaves is the fewest cycles per slot with which the floor is shown.
const floorMinWaves = 10

// makespanGoalHosts is the host count the makespan goal is set at (with 10
// groups of concurrency 5).
const makespanGoalHosts = 1000

func verdict(ok bool) string {
	if ok {
		return "pass"
	}
	return "FAIL"
}

// Rows are the table's figures, in the order of the goals.
func (rep *Report) Rows() []Row {
	var rows []Row
	for _, group := range rowGroups {
		rows = append(rows, group(rep)...)
	}
	return rows
}

// rowGroups build the table's rows, one goal group each, in the order of the
// goals.
var rowGroups = []func(*Report) []Row{
	eachRollout(makespanRows),
	makespanMeanRows,
	eachRollout(handOffRows),
	eachRollout(sentinelRows),
	failoverRows,
	eachRollout(requestRows),
	eachRollout(writesRows),
	eachRollout(coordCPURows),
	idleRows,
	coordRows,
	agentRows,
	eachRollout(completedRows),
	eachRollout(emulatorRows),
}

// eachRollout builds a goal group of rows from each rollout's, in turn.
func eachRollout(rollout func(*Rollout) []Row) func(*Report) []Row {
	return func(rep *Report) []Row {
		var rows []Row
		for _, r := range rep.Rollouts {
			rows = append(rows, rollout(r)...)
		}
		return rows
	}
}

// rolloutRow is a row of one rollout's figures, named by its label.
func rolloutRow(fig string, r *Rollout, value, goal, v string) Row {
	return Row{fig, r.Label(), value, goal, v}
}

// hostsRow is a row of a figure taken at a host count (0: none).
func hostsRow(fig string, hosts int, value, goal, v string) Row {
	h := "-"
	if hosts > 0 {
		h = fmt.Sprint(hosts)
	}
	return Row{fig, h, value, goal, v}
}

// makespanRows are a rollout's makespan over its lower bound, and the rows
// that say what the ratio is made of.
func makespanRows(r *Rollout) []Row {
	ratio := makespanRatio(r)
	// Judged here when it is the only rollout at its host count and latency;
	// with several, on their mean (makespanMeanRows).
	limit, _, judged := makespanGoal(r.Hosts, r.Latency)
	goal, v := makespanGoalText(r.Hosts, r.Latency), judge(judged, r.LowerBound > 0 && ratio <= limit)
	if r.Runs > 1 {
		v = "info"
	}
	rows := []Row{rolloutRow("makespan / lower bound", r, fmt.Sprintf("%.2f (%s / %s)", ratio, dur(r.Makespan), dur(r.LowerBound)), goal, v)}
	// The replays assume a cycle's length does not depend on when it
	// runs. The first wave's, all started at once under the start's
	// load, are longer: with a few waves per slot, mixing them into later
	// waves puts the floor above the measured ratio (docs/performance.md,
	// "How each figure is measured, and what limits it").
	enoughWaves := r.Groups > 0 && r.Concurrency > 0 && r.Hosts/r.Groups/r.Concurrency >= floorMinWaves
	if f := r.Floor; f.Replays > 0 && enoughWaves {
		rows = append(rows, rolloutRow("  with nothing between the cycles", r, fmt.Sprintf("%.3f (p10 %.3f, p90 %.3f: the measured cycles replayed in %d orders through the slots)",
			f.Mean, f.P10, f.P90, f.Replays), "-", "info"))
	}
	if p := r.Parts; p.N > 0 {
		rows = append(rows, rolloutRow("  the cycles' parts, mean ± sd", r, partsValue(p), "-", "info"))
		if f := p.Floor; f.Replays > 0 && enoughWaves {
			rows = append(rows, rolloutRow("  the same, with rollboot's parts at their mean", r, fmt.Sprintf("%.3f (p10 %.3f, p90 %.3f: only the machines' variance left)",
				f.Mean, f.P10, f.P90), "-", "info"))
		}
	}
	if e := r.Excess; e.Group != "" && r.LowerBound > 0 {
		pct := func(d time.Duration) string { return fmt.Sprintf("%.1f%%", 100*float64(d)/float64(r.LowerBound)) }
		rows = append(rows, rolloutRow("  beyond the cycles, per slot (of the bound)", r, fmt.Sprintf("start %s, hand-offs %s, tail %s (group %s, the last to end)",
			pct(e.Start), pct(e.HandOffs), pct(e.Tail), e.Group), "-", "info"))
	}
	return rows
}

// handOffRows are a rollout's slot hand-off latencies.
func handOffRows(r *Rollout) []Row {
	goal, limit, judged := handOffGoals.at(r.Hosts, r.Latency)
	goal = "p99 " + goal
	if len(r.HandOff) == 0 {
		return []Row{rolloutRow("slot hand-off p50 / p99", r, "none: every host had a free slot", goal, "info")}
	}
	p99 := percentile(r.HandOff, 0.99)
	return []Row{rolloutRow("slot hand-off p50 / p99", r, fmt.Sprintf("%s / %s (%d hand-offs; the passes' times: %s / %s)", ms(percentile(r.HandOff, 0.5)), ms(p99),
		len(r.HandOff), ms(percentile(r.HandOffPasses, 0.5)), ms(percentile(r.HandOffPasses, 0.99))),
		goal, judge(judged, p99 <= limit))}
}

// sentinelRows are a rollout's latencies from a sentinel to a pending plan.
func sentinelRows(r *Rollout) []Row {
	p99 := percentile(r.SentinelToPend, 0.99)
	goal, limit, judged := sentinelGoals.at(r.Hosts, r.Latency)
	return []Row{rolloutRow("sentinel -> pending p99, all at once", r, ms(p99), goal, judge(judged, len(r.SentinelToPend) > 0 && p99 <= limit))}
}

// writesRows are a rollout's Nomad variable writes per rebooted host.
func writesRows(r *Rollout) []Row {
	per := float64(r.VarWrites) / float64(max(1, r.Hosts))
	return []Row{rolloutRow("variable writes per rebooted host", r, fmt.Sprintf("%.1f (%s)", per, byKind(r.WritesBy, r.Hosts)), "<= 10",
		verdict(per <= 10))}
}

// watchesPerHostHour is the goal of an idle agent's watches: its plan's and
// its record's, each asked again once per wait of Nomad's (300 s and, on
// average, half the jitter of up to a sixteenth), about 23.3 an hour, and
// no request more.
const watchesPerHostHour = 24

// idleRows are the idle clusters' Nomad requests: the agents' watches of
// their own plan and record, per host and hour, judged against one ask of
// each per Nomad's wait; the rest (the leader's passes and lock, the
// candidates) a minute, judged against the smallest cluster's. A window
// shorter than Nomad's longest wait sees only the watches' asks that fell in
// it, and is not judged.
func idleRows(rep *Report) []Row {
	var rows []Row
	for i, id := range rep.Idle {
		short := id.Window < LongestWait
		judged := func(ok bool) string {
			if short {
				return "info"
			}
			return verdict(ok)
		}
		note := ""
		if short {
			note = fmt.Sprintf("; the window, %s, is shorter than Nomad's longest wait (%s): not every watch asked in it", dur(id.Window), dur(LongestWait))
		}
		perHour := float64(id.Watches) / float64(max(1, id.Hosts)) / id.Window.Hours()
		rows = append(rows, hostsRow("Nomad requests per idle hour, an agent's watches", id.Hosts,
			fmt.Sprintf("%.1f per host (its plan's and its record's, %d asks in %s%s)", perHour, id.Watches, dur(id.Window), note),
			fmt.Sprintf("<= %d per host", watchesPerHostHour), judged(perHour <= watchesPerHostHour)))
		rest := restPerMinute(id)
		v := "info"
		val := fmt.Sprintf("%.1f", rest)
		if i > 0 {
			base := rep.Idle[0]
			val += fmt.Sprintf(" (%.2fx the %d-host figure)", rest/max(restPerMinute(base), 0.1), base.Hosts)
			// O(1): at most half again the smaller cluster's (and any rate
			// under one a minute per 100 hosts is noise).
			v = judged(rest <= max(1.5*restPerMinute(base), float64(base.Hosts)/100))
		}
		rows = append(rows, hostsRow("Nomad requests / min, idle, but the agents' watches (every agent a candidate)", id.Hosts,
			val+fmt.Sprintf("; with the watches %.1f", id.PerMinute()), "independent of hosts", v))
	}
	return rows
}

// restPerMinute are an idle cluster's requests a minute but its agents'
// watches.
func restPerMinute(id *Idle) float64 {
	return float64(id.Requests-min(id.Watches, id.Requests)) / id.Window.Minutes()
}

// coordRows are the coordinator's figures on the largest cluster: cold start,
// passes and peak RSS.
func coordRows(rep *Report) []Row {
	c := rep.Coord
	if c == nil {
		return nil
	}
	cs := maxOf(c.ColdStart)
	rows := []Row{hostsRow("coordinator cold start (new leader's first pass)", c.Hosts, fmt.Sprintf("%s (worst of %d)", ms(cs), len(c.ColdStart)), "<= 2s",
		verdict(cs <= 2*time.Second))}
	passes := func(ds []time.Duration) (string, time.Duration) {
		p99 := percentile(ds, 0.99)
		return fmt.Sprintf("%s (p50 %s, %d passes)", ms(p99), ms(percentile(ds, 0.5)), len(ds)), p99
	}
	val, p99 := passes(c.Passes)
	rows = append(rows, hostsRow("coordinator reconcile pass p99, nothing changed", c.Hosts, val, "<= 50ms", verdict(p99 <= 50*time.Millisecond)))
	val, p99 = passes(c.Changed)
	rows = append(rows, hostsRow("coordinator reconcile pass p99, one record changed", c.Hosts, val, "<= 50ms", verdict(p99 <= 50*time.Millisecond)))
	val, _ = passes(c.ReadAll)
	rows = append(rows, hostsRow("coordinator pass p99 without its watches", c.Hosts, val+", every list read by the pass", "-", "info"))
	if c.RSS > 0 {
		rows = append(rows, hostsRow("coordinator peak RSS (VmHWM)", c.Hosts, mb(c.RSS), "<= 200 MB", verdict(c.RSS <= 200<<20)))
	} else {
		rows = append(rows, hostsRow("coordinator peak RSS (VmHWM)", c.Hosts, "not measured: "+c.RSSNote, "<= 200 MB", "info"))
	}
	return rows
}

// agentRows are the idle agent process's memory and CPU.
func agentRows(rep *Report) []Row {
	a := rep.Agent
	if a == nil {
		return nil
	}
	if a.Note != "" {
		return []Row{hostsRow("agent RSS / idle CPU", 0, "not measured: "+a.Note, "<= 20 MB / < 0.1%", "info")}
	}
	cpu := 100 * a.CPU.Seconds() / a.Window.Seconds()
	return []Row{hostsRow("agent RSS / idle CPU", 0, fmt.Sprintf("%s (at the end: binary and libraries %s, heap and stacks %s) / %.3f%% of a core (%s CPU in %s); %s",
		mb(a.RSS), mb(a.File), mb(a.Anon), cpu, a.CPU, dur(a.Window), a.Binary+", "+strings.Join(agentEnv, " ")),
		"<= 20 MB / < 0.1%", verdict(a.RSS <= 20<<20 && cpu < 0.1))}
}

// completedRows say whether a rollout completed.
func completedRows(r *Rollout) []Row {
	val := "yes"
	if !r.Completed {
		val = "NO: " + r.Problem
	}
	return []Row{rolloutRow("rollout completed", r, val, "every time", verdict(r.Completed))}
}

// emulatorRows are the emulator's own time in a rollout: it must not be the
// bottleneck.
func emulatorRows(r *Rollout) []Row {
	e := r.Emulator
	waited := ""
	if e.Latency > 0 {
		waited = fmt.Sprintf("; the requests waited %s in all for the request latency", dur(e.Latency))
	}
	return []Row{rolloutRow("emulator's own time (rollout)", r,
		fmt.Sprintf("requests %.0f%% of one core (%s in %s; p50 %s, p99 %s; %d requests), cluster rounds %.0f%% (waits for the lock and CPU included)%s",
			100*e.Busy.Seconds()/max(r.Wall.Seconds(), 1e-9), dur(e.Busy), dur(r.Wall), ms(e.P50), ms(e.P99), e.Requests,
			100*e.Background.Seconds()/max(r.Wall.Seconds(), 1e-9), waited),
		"not the bottleneck", "info")}
}

// heartbeatTTLs says the heartbeat TTL the emulator hands out at each host
// count measured, in order: "200ms at 100 hosts, 400ms at 1,000".
func heartbeatTTLs(hosts []int) string {
	var parts []string
	for i, n := range hosts {
		at := thousands(n)
		if i == 0 {
			at += " hosts"
		}
		parts = append(parts, fmt.Sprintf("%s at %s", heartbeatTTL(n), at))
	}
	return strings.Join(parts, ", ")
}

// thousands writes n with a comma between each group of three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Failed reports whether a goal was missed.
func (rep *Report) Failed() bool {
	for _, r := range rep.Rows() {
		if r.Verdict == "FAIL" {
			return true
		}
	}
	return false
}

// Print writes the table, the Kured baseline, the requests by route and how
// the figures were taken.
func (rep *Report) Print(out io.Writer) {
	o := rep.Options
	fmt.Fprintf(out, "\nrollboot bench: %d groups, concurrency %d per group; machines and heartbeats scaled 1:%d "+
		"(boot %s, heartbeat TTL %s, grace %s, first heartbeat after a boot within %s, allocation migration %s); "+
		"Nomad request latency %s\n\n",
		o.Groups, o.Concurrency, timeScale, bootTime, heartbeatTTLs(o.Hosts), heartbeatGrace, initialStagger, migrateTime,
		latencyList(o.Latencies))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tHOSTS\tMEASURED\tGOAL\tRESULT")
	for _, r := range rep.Rows() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Figure, r.Hosts, r.Value, r.Goal, r.Verdict)
	}
	tw.Flush()
	rep.printKured(out)
	for _, r := range rep.Rollouts {
		printRoutes(out, r)
	}
	for _, id := range rep.Idle {
		printIdleVariables(out, id)
	}
	rep.printHow(out)
}

// printKured writes the Kured-style baseline of each rollout.
func (rep *Report) printKured(out io.Writer) {
	if len(rep.Rollouts) == 0 {
		return
	}
	fmt.Fprintln(out, "\nKured-style baseline for the same work (one lock for the cluster; each node checks every period;")
	fmt.Fprintln(out, "the measured cycle times, scaled like the machines, the periods not):")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "HOSTS\tMEAN CYCLE\trollboot\tKured, period 1m\tKured, period 1h")
	for _, r := range rep.Rollouts {
		k1, k60 := kuredMakespan(r.Cycles, time.Minute), kuredMakespan(r.Cycles, time.Hour)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s (%.0fx)\t%s (%.0fx)\n", r.Label(), ms(r.MeanCycle), dur(r.Makespan),
			dur(k1), ratio(k1, r.Makespan), dur(k60), ratio(k60, r.Makespan))
	}
	tw.Flush()
}

// printHow says how the figures were taken.
func (rep *Report) printHow(out io.Writer) {
	o := rep.Options
	fmt.Fprintln(out, "\nHow: the real agents (one per host) and coordinator run in this process against the emulator;")
	fmt.Fprintln(out, "pass, cold-start and first-pass times are ReconcileOnce calls timed in process (passes with the coordinator's")
	fmt.Fprintln(out, "watches running, as while it leads, unless said otherwise); peak RSS and agent CPU are read")
	fmt.Fprintln(out, "from /proc of `rollboot coordinator` and `rollboot agent` processes; the coordinator's CPU in a rollout")
	fmt.Fprintln(out, "is its goroutines' share of a CPU profile (pprof labels); Nomad requests are the emulator's count over")
	fmt.Fprintln(out, "the rollout (the bench sends none meanwhile); the emulator's own time is its handlers' time minus")
	fmt.Fprintln(out, "blocking-query sleeps and the request latency. The request latency applies to the rollouts and the")
	fmt.Fprintln(out, "first passes; the idle load and the coordinator alone are measured with none.")
	if a := rep.Agent; a != nil && a.Exe != "" && a.Exe != o.Exe && a.Exe == o.AgentExe {
		fmt.Fprintf(out, "The agent process measured runs %s (-agent-exe).\n", a.Exe)
	}
	for _, n := range o.Hosts {
		if n > o.RolloutMax && o.Only != "agent" && o.Only != "idle" {
			fmt.Fprintf(out, "%d hosts: no full rollout (above -rollout-max %d): the coordinator alone, on records written by the bench.\n", n, o.RolloutMax)
		}
	}
}

func byKind(m map[string]int, hosts int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, float64(m[k])/float64(max(1, hosts))))
	}
	return strings.Join(parts, ", ")
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func dur(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute).String()
	case d >= time.Minute:
		return d.Round(time.Second).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}

// partsValue shows the cycles' parts (CycleParts): the machines' and Nomad's,
// then rollboot's, and the whole cycle.
func partsValue(p CycleParts) string {
	sp := func(x Spread) string { return ms(x.Mean) + " ± " + ms(x.SD) }
	return fmt.Sprintf("drain %s, reboot to ready %s; rollboot's %s (drain end to reboot %s, ready to end %s); cycle %s",
		sp(p.Drain), sp(p.Boot), sp(p.Rollboot), sp(p.ToReboot), sp(p.Back), sp(p.Cycle))
}

func ms(d time.Duration) string {
	if d >= time.Second {
		return d.Round(10 * time.Millisecond).String()
	}
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }

// topRoutes is how many of the routes with the most requests a rollout's
// table shows one by one.
const topRoutes = 12

// printRoutes shows a rollout's Nomad requests by route, every rollboot
// process together (the bench sends none while a rollout is measured): the
// routes with the most requests, each per rebooted host, with the emulator's
// busy time they took.
func printRoutes(out io.Writer, r *Rollout) {
	routes := r.Emulator.Routes
	if len(routes) == 0 {
		return
	}
	shares, other := routeShares(routes, r.Rebooted(), topRoutes)
	renewed := ""
	if r.Renewals > 0 {
		renewed = fmt.Sprintf(" without the %d renewals of idle watches the routes count", r.Renewals)
	}
	title := fmt.Sprintf("Nomad requests by route, rollout of %s (%.1f per rebooted host%s; the %d routes with the most requests)",
		r.Label(), requestsPerHost(r), renewed, len(shares))
	printShares(out, title, "ROUTE\tREQUESTS\tPER REBOOTED HOST\tCOORDINATOR\tAGENTS\tBUSY\tSHARE OF BUSY", shares, other,
		func(rs routeShare) string {
			return fmt.Sprintf("%.2f\t%.2f\t%.2f\t%s\t%.0f%%", rs.PerHost, rs.PerHost-rs.Agents, rs.Agents, dur(rs.Busy),
				100*rs.Busy.Seconds()/max(r.Emulator.Busy.Seconds(), 1e-9))
		})
	printVariables(out, r)
}

// printIdleVariables shows an idle cluster's variable requests by method and
// folder, an hour and per host an hour.
func printIdleVariables(out io.Writer, id *Idle) {
	if len(id.Variables) == 0 || id.Window <= 0 {
		return
	}
	shares, other := routeShares(id.Variables, id.Hosts, topRoutes)
	title := fmt.Sprintf("Variable requests by folder, idle cluster of %d hosts over %s (LIST: a list of the prefix)", id.Hosts, dur(id.Window))
	printShares(out, title, "VARIABLES\tREQUESTS\tAN HOUR\tPER HOST AN HOUR", shares, other, func(rs routeShare) string {
		hour := float64(rs.Requests) / id.Window.Hours()
		return fmt.Sprintf("%.0f\t%.2f", hour, hour/float64(max(1, id.Hosts)))
	})
}

// printShares writes a table of requests by route or folder under title:
// columns, then a row per share (and other, when it holds routes) of its
// route, its requests and what cells says of it.
func printShares(out io.Writer, title, columns string, shares []routeShare, other routeShare, cells func(routeShare) string) {
	fmt.Fprintf(out, "\n%s:\n", title)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, columns)
	if other.Route != "" {
		shares = append(shares, other)
	}
	for _, rs := range shares {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", rs.Route, rs.Requests, cells(rs))
	}
	tw.Flush()
}

// printVariables shows a rollout's variable requests by method and folder,
// each per rebooted host, by process.
func printVariables(out io.Writer, r *Rollout) {
	vars := r.Emulator.Variables
	if len(vars) == 0 {
		return
	}
	shares, other := routeShares(vars, r.Rebooted(), topRoutes)
	title := fmt.Sprintf("Variable requests by folder, rollout of %s (LIST: a list of the prefix)", r.Label())
	printShares(out, title, "VARIABLES\tREQUESTS\tPER REBOOTED HOST\tCOORDINATOR\tAGENTS", shares, other, func(rs routeShare) string {
		return fmt.Sprintf("%.2f\t%.2f\t%.2f", rs.PerHost, rs.PerHost-rs.Agents, rs.Agents)
	})
}
