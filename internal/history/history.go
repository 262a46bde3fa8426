// Package history is the view of finished reboot cycles shown by `rollboot
// history`: each cycle's outcome, who asked for it and why, and how long each of
// its phases took, from the history records the coordinator writes
// (<prefix>/history/...).
package history

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// Cycle is one finished reboot cycle.
type Cycle struct {
	Host        string               `json:"host"`
	Group       string               `json:"group"`
	Grant       string               `json:"grant_id"`
	Outcome     string               `json:"outcome"`
	Reason      string               `json:"reason"`
	Fingerprint string               `json:"fingerprint,omitempty"`  // what the reboot installed, as the host said: its wave
	RequestedBy string               `json:"requested_by,omitempty"` // "" : the host's agent
	ApprovedBy  string               `json:"approved_by,omitempty"`  // who approved it (a group's approval); "": none needed
	Error       string               `json:"error,omitempty"`
	Forced      bool                 `json:"forced,omitempty"`
	BootBefore  string               `json:"boot_id_before,omitempty"`
	BootAfter   string               `json:"boot_id_after,omitempty"`
	Finished    time.Time            `json:"finished"`
	Timeline    map[string]time.Time `json:"timeline"`
	// Durations of the phases the cycle went through, in seconds: wait (pending
	// to draining), drain (draining to drained), reboot (rebooting to
	// rejoining), rejoin (rejoining to the end) and cycle (draining to the end).
	Durations map[string]float64 `json:"durations_seconds"`
}

// Stages, in the order of a cycle, as the metrics name them.
var Stages = []string{"wait", "drain", "reboot", "rejoin", "cycle"}

// Options select cycles.
type Options struct {
	Host string // only this host's cycles; "" every host
	Last int    // only the newest Last cycles; 0 all
}

// Build returns the cycles of recs that opt selects, oldest first (by end).
func Build(recs []store.HistoryRecord, opt Options) []Cycle {
	var out []Cycle
	for _, r := range recs {
		if opt.Host != "" && r.Host != opt.Host {
			continue
		}
		out = append(out, cycle(r))
	}
	sortByEnd(out)
	if opt.Last > 0 && len(out) > opt.Last {
		out = out[len(out)-opt.Last:]
	}
	return out
}

func sortByEnd(cs []Cycle) {
	// Insertion sort keeps records that ended at once in path (start) order.
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].Finished.Before(cs[j-1].Finished); j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}

func cycle(r store.HistoryRecord) Cycle {
	c := Cycle{Host: r.Host, Group: r.Group, Grant: r.GrantID, Outcome: r.Outcome, Reason: r.Reason, Fingerprint: r.Fingerprint,
		RequestedBy: r.RequestedBy, ApprovedBy: r.ApprovedBy, Error: r.Error, Forced: r.Forced, BootBefore: r.BootIDBefore,
		BootAfter: r.BootIDAfter, Finished: r.Finished, Timeline: r.Timeline, Durations: map[string]float64{}}
	if c.Timeline == nil {
		c.Timeline = map[string]time.Time{}
	}
	end := r.Finished
	if t, ok := r.Timeline[store.PhaseIdle]; ok {
		end = t
	}
	span := func(name, from, to string) {
		a, okA := r.Timeline[from]
		b, okB := r.Timeline[to]
		if to == "" {
			b, okB = end, !end.IsZero()
		}
		if okA && okB && !b.Before(a) {
			c.Durations[name] = b.Sub(a).Seconds()
		}
	}
	span("wait", store.PhasePending, store.PhaseDraining)
	span("drain", store.PhaseDraining, store.PhaseDrained)
	span("reboot", store.PhaseRebooting, store.PhaseRejoining)
	span("rejoin", store.PhaseRejoining, "")
	span("cycle", store.PhaseDraining, "")
	return c
}

// WriteJSON writes the cycles as a JSON array.
func WriteJSON(w io.Writer, cs []Cycle) error {
	if cs == nil {
		cs = []Cycle{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(cs)
}

// WriteText writes the cycles as a table, times in UTC, then the errors of
// failed cycles.
func WriteText(w io.Writer, cs []Cycle) error {
	if len(cs) == 0 {
		_, err := fmt.Fprintln(w, "No finished reboot cycles.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Finished\tHost\tGroup\tOutcome\tWait\tDrain\tReboot\tRejoin\tTotal\tBy\tReason")
	for _, c := range cs {
		outcome := c.Outcome
		if c.Forced {
			outcome += " (forced)"
		}
		by := c.RequestedBy
		if by == "" {
			by = "agent"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Finished.UTC().Format(time.RFC3339), c.Host, c.Group,
			outcome, dur(c, "wait"), dur(c, "drain"), dur(c, "reboot"), dur(c, "rejoin"), dur(c, "cycle"), by, c.Reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var failed []string
	for _, c := range cs {
		if c.Error != "" {
			failed = append(failed, fmt.Sprintf("  %s %s: %s", c.Finished.UTC().Format(time.RFC3339), c.Host, c.Error))
		}
	}
	if len(failed) > 0 {
		if _, err := fmt.Fprintf(w, "\nErrors:\n%s\n", strings.Join(failed, "\n")); err != nil {
			return err
		}
	}
	var approved []string
	for _, c := range cs {
		if c.ApprovedBy != "" {
			approved = append(approved, fmt.Sprintf("  %s %s: %s", c.Finished.UTC().Format(time.RFC3339), c.Host, c.ApprovedBy))
		}
	}
	if len(approved) > 0 {
		_, err := fmt.Fprintf(w, "\nApproved by:\n%s\n", strings.Join(approved, "\n"))
		return err
	}
	return nil
}

// dur formats a stage's duration to the tenth of a second below a minute, to
// the second above; "-" when the cycle did not go through it.
func dur(c Cycle, stage string) string {
	s, ok := c.Durations[stage]
	if !ok {
		return "-"
	}
	d := time.Duration(s * float64(time.Second))
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
