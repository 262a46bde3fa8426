package preview

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Source says which policy a plan was made with: where it comes from and its
// version ("" when it has none).
type Source struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

func (s Source) String() string {
	if s.Version == "" {
		return s.Name
	}
	return s.Name + " (version " + s.Version + ")"
}

// Report is what `rollboot plan` prints: the plan under the policy in force and,
// with a candidate policy, the plan under it and how it differs.
type Report struct {
	Policy    Source      `json:"policy"`
	Plan      Plan        `json:"plan"`
	Candidate *Source     `json:"candidate,omitempty"`
	After     *Plan       `json:"candidate_plan,omitempty"`
	Diff      *Comparison `json:"diff,omitempty"`
}

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for people: with a candidate policy, the plan
// under it and then what changes; otherwise the plan in force.
func WriteText(w io.Writer, r Report) error {
	var b strings.Builder
	if r.After == nil {
		fmt.Fprintf(&b, "Policy: %s\n", r.Policy)
		writePlan(&b, r.Plan)
	} else {
		fmt.Fprintf(&b, "Candidate policy: %s\n", r.Candidate)
		writePlan(&b, *r.After)
		fmt.Fprintf(&b, "\nChanges against the policy in force, %s:\n", r.Policy)
		writeDiff(&b, *r.Diff, r.Plan.Now)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteDiffText writes how a candidate policy changes the plan (also for
// `policy apply`).
func WriteDiffText(w io.Writer, c Comparison, now time.Time) error {
	var b strings.Builder
	writeDiff(&b, c, now)
	_, err := io.WriteString(w, b.String())
	return err
}

func writePlan(b *strings.Builder, p Plan) {
	fmt.Fprintf(b, "Now:    %s\n", p.Now.UTC().Format("2006-01-02 15:04:05 MST"))
	if p.Paused {
		why := ""
		if p.PauseReason != "" {
			why = " (" + p.PauseReason + ")"
		}
		if p.PausedUntil.IsZero() {
			fmt.Fprintf(b, "Paused%s: no host starts until `rollboot resume`; the estimates assume it resumes now.\n", why)
		} else {
			fmt.Fprintf(b, "Paused%s until %s: no host starts before; the estimates start then.\n", why, p.PausedUntil.UTC().Format(time.RFC3339))
		}
	}
	for _, h := range p.Halts {
		fmt.Fprintf(b, "HALTED: %s. The rollout will not finish until it is lifted: its hosts have no estimate.\n", h)
	}
	if len(p.Groups) == 0 {
		b.WriteString("\nNothing to reboot.\n")
	}
	for _, g := range p.Groups {
		writeGroup(b, g, p.Now)
	}
	for _, name := range sortedKeys(p.Unreadable) {
		fmt.Fprintf(b, "\nLeft out: %s: %s\n", name, p.Unreadable[name])
	}
	b.WriteString("\n" + summary(p) + "\n")
}

func writeGroup(b *strings.Builder, g Group, now time.Time) {
	nodes := ""
	if g.Size > 0 { // hosts without a Nomad client (server-only hosts) have no node
		nodes = fmt.Sprintf("%d nodes, ", g.Size)
	}
	fmt.Fprintf(b, "\nGroup %q: %s%d in progress, %s\n", g.Name, nodes, g.Active, capacityText(g))
	if g.Hold != "" {
		fmt.Fprintf(b, "  Held now: %s\n", g.Hold)
	}
	fmt.Fprintf(b, "  Windows: %s\n", g.Windows)
	fmt.Fprintf(b, "  Cycle: %s\n", durationsText(g.Durations, g.Settle))
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tHost\tPhase\tStart\tFinish\tStatus\tNeed")
	for _, h := range g.Hosts {
		pos := "-"
		if h.Position > 0 {
			pos = fmt.Sprint(h.Position)
		}
		start := clock(h.Start, now)
		if h.Starts {
			start = "now"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", pos, h.Host, h.Phase, start, clock(h.Finish, now), statusText(h), orDash(h.Need))
	}
	_ = tw.Flush()
}

func capacityText(g Group) string {
	s := fmt.Sprintf("%d at a time (concurrency %d", g.Capacity, g.Concurrency)
	if g.Slots != g.Concurrency {
		s += fmt.Sprintf(", %d by max_unavailable", g.Slots)
	}
	if g.Unavailable > 0 {
		s += fmt.Sprintf(", %d nodes unavailable", g.Unavailable)
	}
	return s + ")"
}

func durationsText(d Durations, settle time.Duration) string {
	s := fmt.Sprintf("drain %s, reboot %s, rejoin %s", d.Drain, d.Reboot, d.Rejoin)
	switch d.Source {
	case SourceGroup:
		s += fmt.Sprintf(" (median of the group's last %d cycles)", d.Samples)
	case SourceAll:
		s += fmt.Sprintf(" (no history for this group: median of %d cycles of every group)", d.Samples)
	default:
		s += " (no history yet: defaults)"
	}
	if settle > 0 {
		s += fmt.Sprintf("; settle %s between hosts", settle)
	}
	return s
}

func statusText(h Host) string {
	s := waitText(h)
	if h.Cordon != "" {
		s += "; " + h.Cordon
	}
	return s
}

// waitText says whether the host starts now, and what it waits for.
func waitText(h Host) string {
	canary := ""
	if h.Canary {
		canary = " (canary)"
	}
	switch {
	case h.Starts:
		return "starts now" + canary
	case h.Position == 0 && !h.Blocked:
		s := "in progress" + canary
		if h.Reason != "" {
			s += ": " + h.Reason
		}
		if h.NoEstimate != "" {
			s += "; " + h.NoEstimate
		}
		return s
	case h.Blocked:
		return "blocked: " + h.Reason
	case h.NoEstimate != "":
		return "waits: " + h.Reason + "; no estimate: " + h.NoEstimate
	}
	return "waits: " + h.Reason
}

func summary(p Plan) string {
	n, starts := 0, 0
	for _, g := range p.Groups {
		for _, h := range g.Hosts {
			n++
			if h.Starts {
				starts++
			}
		}
	}
	if n == 0 {
		return "Rollout: nothing to do."
	}
	s := fmt.Sprintf("Rollout: %d %s, %d %s now", n, plural(n, "host", "hosts"), starts, plural(starts, "starts", "start"))
	if !p.Finish.IsZero() {
		s += fmt.Sprintf("; estimated finish %s (in %s)", clock(p.Finish, p.Now), p.Finish.Sub(p.Now).Round(time.Second))
	}
	if p.Unestimated > 0 {
		s += fmt.Sprintf("; %d %s no estimate", p.Unestimated, plural(p.Unestimated, "host has", "hosts have"))
	}
	if len(p.Halts) > 0 {
		s += "; halted: it will not finish until `rollboot resume`"
	}
	return s + "."
}

func writeDiff(b *strings.Builder, c Comparison, now time.Time) {
	if len(c.Changes) == 0 && !c.FinishMoved() {
		b.WriteString("  No change to the plan.\n")
		return
	}
	tw := tabwriter.NewWriter(b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  Host\tGroup\tOrder\tStart\tFinish")
	for _, ch := range c.Changes {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", ch.Host,
			change(orNone(ch.GroupBefore), orNone(ch.GroupAfter)),
			change(position(ch.PositionBefore), position(ch.PositionAfter)),
			change(clock(ch.StartBefore, now), clock(ch.StartAfter, now)),
			change(clock(ch.FinishBefore, now), clock(ch.FinishAfter, now)))
	}
	_ = tw.Flush()
	for _, ch := range c.Changes {
		if ch.ReasonBefore != ch.ReasonAfter && ch.ReasonAfter != "" {
			fmt.Fprintf(b, "  %s now waits: %s\n", ch.Host, ch.ReasonAfter)
		}
	}
	fmt.Fprintf(b, "  Rollout finish: %s", change(clock(c.FinishBefore, now), clock(c.FinishAfter, now)))
	if !c.FinishBefore.IsZero() && !c.FinishAfter.IsZero() {
		if d := c.FinishAfter.Sub(c.FinishBefore).Round(time.Second); d != 0 {
			fmt.Fprintf(b, " (%+v)", d)
		}
	}
	if c.UnestimatedBefore != c.UnestimatedAfter {
		fmt.Fprintf(b, "; hosts without an estimate: %d -> %d", c.UnestimatedBefore, c.UnestimatedAfter)
	}
	b.WriteString("\n")
}

func change(before, after string) string {
	if before == after {
		return before
	}
	return before + " -> " + after
}

func orNone(g string) string {
	if g == "" {
		return "(none)"
	}
	return g
}

func position(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// clock formats an estimate for people: the time of day (UTC) on the day of
// now, else with its date; "-" when there is none.
func clock(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	t, now = t.UTC(), now.UTC()
	if t.YearDay() == now.YearDay() && t.Year() == now.Year() {
		return t.Format("15:04:05")
	}
	return t.Format("Mon Jan 2 15:04")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
