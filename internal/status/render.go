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

// WriteText writes the view as an aligned table, like the nomad CLI, with the
// time since each phase began at now, followed by what was skipped.
func WriteText(w io.Writer, v View, now time.Time) error {
	if v.Policy != nil {
		writePolicy(w, *v.Policy)
	}
	if v.Paused {
		by := ""
		if v.PausedBy != "" {
			by = " (paused by " + v.PausedBy + ")"
		}
		fmt.Fprintf(w, "Rollout paused: %s%s\n\n", orDash(v.PauseReason), by)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Host\tGroup\tNode ID\tRoles\tPhase\tSince\tWhy")
	for _, h := range v.Hosts {
		since := "-"
		if !h.Since.IsZero() {
			since = now.Sub(h.Since).Round(time.Second).String() + " ago"
		}
		node := h.NodeID
		if len(node) > 8 {
			node = node[:8]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Host, orDash(h.Group), orDash(node),
			orDash(rolesText(h)), h.Phase, since, why(h))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeProblems(w, v)
	return nil
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
	if h.Phase != store.PhaseIdle || h.RebootRequired || h.ManualRequest {
		if h.Reason != "" {
			parts = append(parts, "reboot: "+h.Reason)
		} else if h.ManualRequest {
			parts = append(parts, "reboot: manual request")
		}
	}
	if h.HoldReason != "" && h.Phase != store.PhaseIdle && !strings.Contains(h.Waiting, h.HoldReason) {
		parts = append(parts, "agent holds the reboot: "+h.HoldReason)
	}
	if h.Failure != nil && !strings.Contains(h.LastError, failureText(h.Failure)) {
		parts = append(parts, "last failed attempt: "+failureText(h.Failure))
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

// writeProblems lists what was skipped, below the table.
func writeProblems(w io.Writer, v View) {
	if len(v.Ignored) > 0 {
		fmt.Fprintln(w, "\nIgnored host records:")
		for _, b := range v.Ignored {
			fmt.Fprintf(w, "  %s: %s\n", b.Host, b.Err)
		}
	}
	if n := len(v.Unbacked); n > 0 {
		// A count, not the names: anyone holding the agent token can write
		// any number of them, and the coordinator logs each new one once.
		fmt.Fprintf(w, "\n%d host record(s) left out: no Nomad node, and no server, FleetLock id or hosts_without_node entry backs them (rollboot forget HOST removes one).\n", n)
	}
	if len(v.ControlProblems) > 0 {
		fmt.Fprintln(w, "\nUnreadable control entries (skipped; rollboot control reset repairs them):")
		for _, p := range v.ControlProblems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	if len(v.PlanProblems) > 0 {
		fmt.Fprintln(w, "\nPartly unreadable plans (used with what could be read; the coordinator's next write repairs them):")
		for _, b := range v.PlanProblems {
			fmt.Fprintf(w, "  %s: %s\n", b.Host, b.Err)
		}
	}
	if v.AgentCheck != "" {
		fmt.Fprintf(w, "\nAgents: %s\n", v.AgentCheck)
	}
	if len(v.MixedVersions) > 0 {
		fmt.Fprintln(w, "\nAgents run different versions (an upgrade under way?):")
		for _, c := range v.MixedVersions {
			fmt.Fprintf(w, "  %s: %d %s\n", c.Version, c.Hosts, plural(c.Hosts, "host", "hosts"))
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
