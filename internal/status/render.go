package status

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// WriteJSON writes the view as indented JSON (`rollboot status -json`).
func WriteJSON(w io.Writer, v View) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteText writes the view as an aligned table of TableWidth columns, like
// the nomad CLI, with the time since each phase began at now, followed by
// what was skipped; long lines are wrapped, and a host's reason is cut after
// three lines. A host's node, roles and every detail are in WriteHost.
func WriteText(w io.Writer, v View, now time.Time) error {
	return writeView(w, v, now, false)
}

// WriteWide writes the view as WriteText does, but as wide as it is: one line
// per host, with its full node ID and roles, nothing wrapped or cut
// (`status -verbose`, for wide terminals and grep).
func WriteWide(w io.Writer, v View, now time.Time) error {
	return writeView(w, v, now, true)
}

func writeView(w io.Writer, v View, now time.Time, wide bool) error {
	t := text{w: w, wide: wide}
	writeHalts(w, v) // first: nothing in the rollout moves there
	if v.Policy != nil {
		t.policy(*v.Policy)
	}
	if v.Paused {
		by := ""
		if v.PausedBy != "" {
			by = " (paused by " + v.PausedBy + ")"
		}
		t.para("Rollout paused"+pauseEnds(v.PausedUntil, now)+": ", orDash(v.PauseReason)+by)
		fmt.Fprintln(w)
	}
	if writeScopedPauses(&t, v, now) {
		fmt.Fprintln(w)
	}
	if wide {
		if err := writeWideTable(w, v.Hosts, now); err != nil {
			return err
		}
	} else if writeTable(w, v.Hosts, now) {
		fmt.Fprintln(w, "\n(Cut to fit: rollboot status HOST shows a host in full; -verbose or -json every host.)")
	}
	if err := writeSilences(w, v, now); err != nil {
		return err
	}
	if err := writeWaves(w, v); err != nil {
		return err
	}
	t.problems(v)
	return nil
}

// writeWideTable is the table of WriteWide.
func writeWideTable(w io.Writer, hosts []Host, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Host\tGroup\tNode ID\tRoles\tPhase\tSince\tWhy")
	for _, h := range hosts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Host, orDash(h.Group), orDash(h.NodeID),
			orDash(rolesText(h)), h.State(), since(h.Since, now), why(h))
	}
	return tw.Flush()
}

// text writes the lines around the table: wrapped within TableWidth, or, wide,
// each on one line.
type text struct {
	w    io.Writer
	wide bool
}

// para writes prefix and s, the lines after the first indented as wide as
// prefix.
func (t text) para(prefix, s string) {
	if t.wide {
		fmt.Fprintln(t.w, prefix+s)
		return
	}
	lines, _ := wrap(s, max(TableWidth-len(prefix), minWhy), 1<<30)
	for i, l := range lines {
		if i > 0 {
			prefix = strings.Repeat(" ", len(prefix))
		}
		fmt.Fprintln(t.w, prefix+l)
	}
}

// item writes one entry of a list below the table.
func (t text) item(s string) {
	if t.wide {
		fmt.Fprintln(t.w, "  "+s)
		return
	}
	lines, _ := wrap(s, TableWidth-4, 1<<30)
	for i, l := range lines {
		indent := "  "
		if i > 0 {
			indent = "    "
		}
		fmt.Fprintln(t.w, indent+l)
	}
}

// rolesText shows the roles, the FleetLock role with the client's id
// ("fleetlock=<id>"), so that a FleetLock holder can be told by its id.
func rolesText(h Host) string {
	roles := make([]string, 0, len(h.Roles))
	for _, r := range h.Roles {
		if r == store.RoleFleetLock && h.FleetLockID != "" {
			r += "=" + h.FleetLockID
		}
		roles = append(roles, r)
	}
	return strings.Join(roles, ",")
}

// why is the table's last column: what the host waits for or failed with, why
// it reboots, and what its agent and the coordinator's checks report.
func why(h Host) string {
	var parts []string
	switch {
	case h.LastError != "" && h.Phase != store.PhaseIdle:
		parts = append(parts, h.LastError)
	case h.Waiting != "":
		parts = append(parts, h.Waiting)
	}
	switch {
	case h.Cordoned:
		parts = append(parts, "cordoned: node ineligible until its drain (next in line)")
	case h.NoCordon != "":
		parts = append(parts, "no cordon: "+h.NoCordon)
	}
	if h.Phase != store.PhaseIdle || h.RebootRequired || h.ManualRequest {
		if h.Reason != "" {
			parts = append(parts, "reboot: "+h.Reason)
		} else if h.ManualRequest {
			parts = append(parts, "reboot: manual request")
		}
	}
	if h.UrgentRequest && h.Phase != store.PhaseIdle {
		parts = append(parts, "urgent: skips windows and freezes, not pauses or safety gates")
	}
	if h.HoldReason != "" && h.Phase != store.PhaseIdle && !strings.Contains(h.Waiting, h.HoldReason) {
		parts = append(parts, "agent holds the reboot: "+h.HoldReason)
	}
	if h.Failure != nil && !strings.Contains(h.LastError, failureText(h.Failure)) {
		parts = append(parts, "last failed attempt: "+failureText(h.Failure))
	}
	if !h.DrainedItself.IsZero() && inReboot(h.Phase) {
		parts = append(parts, "the client drained its node itself on shutdown (drain_on_shutdown)")
	}
	if h.DetectError != "" {
		parts = append(parts, "detection error: "+h.DetectError)
	}
	if h.DiscoverError != "" && !strings.Contains(h.Waiting, h.DiscoverError) {
		parts = append(parts, "server roles unknown: "+h.DiscoverError)
	}
	if h.AgentMissing != "" {
		parts = append(parts, h.AgentMissing)
	}
	if h.RecordIgnored != "" {
		parts = append(parts, h.RecordIgnored)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// inReboot: the host is between its reboot's start and its return, when its
// client's own drain on shutdown replaces rollboot's as the node's last.
func inReboot(phase string) bool {
	return phase == store.PhaseDrained || phase == store.PhaseRebooting || phase == store.PhaseRejoining
}

// failureText is the one-line form of a failure, as the store writes it.
func failureText(f *Failure) string {
	return store.RebootFailure{Step: f.Step, ExitStatus: f.ExitStatus, Message: f.Message}.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// problems lists what was skipped, below the table.
func (t text) problems(v View) {
	w := t.w
	if len(v.Ignored) > 0 {
		fmt.Fprintln(w)
		t.para("", "Ignored host records:")
		for _, b := range v.Ignored {
			t.item(b.Host + ": " + b.Err)
		}
	}
	if n := len(v.Unbacked); n > 0 {
		// A count, not the names: anyone holding the agent token can write
		// any number of them, and the coordinator logs each new one once.
		fmt.Fprintln(w)
		t.para("", fmt.Sprintf("%d host record(s) left out: no Nomad node, and no server, FleetLock id or hosts_without_node entry backs them (rollboot forget HOST removes one).", n))
	}
	if len(v.ControlProblems) > 0 {
		fmt.Fprintln(w)
		t.para("", "Unreadable control entries (skipped; rollboot control reset repairs them):")
		for _, p := range v.ControlProblems {
			t.item(p)
		}
	}
	if len(v.PlanProblems) > 0 {
		fmt.Fprintln(w)
		t.para("", "Partly unreadable plans (used with what could be read; the coordinator's next write repairs them):")
		for _, b := range v.PlanProblems {
			t.item(b.Host + ": " + b.Err)
		}
	}
	if v.AgentCheck != "" {
		fmt.Fprintln(w)
		t.para("Agents: ", v.AgentCheck)
	}
	if len(v.MixedVersions) > 0 {
		fmt.Fprintln(w)
		t.para("", "Agents run different versions (an upgrade under way?):")
		for _, c := range v.MixedVersions {
			t.item(fmt.Sprintf("%s: %d %s", c.Version, c.Hosts, plural(c.Hosts, "host", "hosts")))
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
