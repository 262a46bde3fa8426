package status

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/history"
	"github.com/rollboot/rollboot/internal/store"
)

// HostDetail is one host in full, as `rollboot status HOST` prints it: its row
// of the view with nothing cut, its manual request, cancel and release, and
// its last finished cycles.
type HostDetail struct {
	Host
	Request  *store.Request `json:"request,omitempty"`
	Canceled *Mark          `json:"canceled,omitempty"`
	Release  *Mark          `json:"release,omitempty"`
	// History is the host's newest finished cycles, oldest first.
	History []history.Cycle `json:"history"`
}

// Mark is when a control change was made and by whom.
type Mark struct {
	At time.Time `json:"at"`
	By string    `json:"by,omitempty"`
}

// Detail is the detail of host h of the view, with the control state and the
// history records; ok is false when the view has no such host.
func Detail(v View, host string, ctl store.Control, recs []store.HistoryRecord, last int) (HostDetail, bool) {
	i := slices.IndexFunc(v.Hosts, func(h Host) bool { return h.Host == host })
	if i < 0 {
		return HostDetail{}, false
	}
	d := HostDetail{Host: v.Hosts[i], History: history.Build(recs, history.Options{Host: host, Last: last})}
	if d.History == nil {
		d.History = []history.Cycle{}
	}
	if r, ok := ctl.Requests[host]; ok {
		d.Request = &r
	}
	if at, ok := ctl.Cancels[host]; ok {
		d.Canceled = &Mark{At: at, By: ctl.CanceledBy[host]}
	}
	if at, ok := ctl.Releases[host]; ok {
		d.Release = &Mark{At: at, By: ctl.ReleasedBy[host]}
	}
	return d, true
}

// WriteHostJSON writes the detail as indented JSON (`status HOST -json`).
func WriteHostJSON(w io.Writer, d HostDetail) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// WriteHost writes the detail as "name  value" lines, long values wrapped
// within TableWidth, then the host's last cycles.
func WriteHost(w io.Writer, d HostDetail, now time.Time) error {
	const nameW = 14
	field := func(name, value string) {
		if value == "" {
			return
		}
		lines, _ := wrap(value, TableWidth-nameW, 1<<30)
		for i, l := range lines {
			if i > 0 {
				name = ""
			}
			fmt.Fprintf(w, "%-*s%s\n", nameW, name, l)
		}
	}
	h := d.Host
	field("Host", h.Host)
	field("Group", orDash(h.Group))
	phase := h.State()
	if !h.Since.IsZero() {
		phase += fmt.Sprintf(", since %s (%s ago)", stamp(h.Since), since(h.Since, now))
	}
	field("Phase", phase)
	field("Node ID", orDash(h.NodeID))
	field("Roles", orDash(rolesText(h)))
	field("Needs reboot", needText(h))
	field("Request", requestText(d.Request))
	field("Canceled", markText(d.Canceled))
	field("Release", markText(d.Release))
	field("Why", why(h))
	field("Agent", agentText(h))
	field("Timeline", timelineText(h.Timeline))
	fmt.Fprintln(w)
	if len(d.History) == 0 {
		fmt.Fprintln(w, "No finished cycle of this host is kept.")
		return nil
	}
	fmt.Fprintf(w, "Last %d finished %s (rollboot history -host %s):\n", len(d.History), plural(len(d.History), "cycle", "cycles"), h.Host)
	return history.WriteText(w, d.History)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func needText(h Host) string {
	if !h.RebootRequired {
		return "no"
	}
	s := "yes"
	if h.Reason != "" {
		s += ": " + h.Reason
	}
	if !h.RequestedAt.IsZero() {
		s += " (since " + stamp(h.RequestedAt) + ")"
	}
	return s
}

func requestText(r *store.Request) string {
	if r == nil {
		return "none"
	}
	s := "at " + stamp(r.At)
	if r.Urgent {
		s = "urgent, " + s
	}
	if r.By != "" {
		s += " by " + r.By
	}
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

func markText(m *Mark) string {
	if m == nil {
		return ""
	}
	s := "at " + stamp(m.At)
	if m.By != "" {
		s += " by " + m.By
	}
	return s
}

func agentText(h Host) string {
	var parts []string
	if h.AgentVersion != "" {
		parts = append(parts, "version "+h.AgentVersion)
	}
	if h.BootID != "" {
		parts = append(parts, "boot ID "+h.BootID)
	}
	return strings.Join(parts, ", ")
}

// timelineText lists when the current cycle entered each phase, in order.
func timelineText(tl map[string]time.Time) string {
	type entry struct {
		phase string
		at    time.Time
	}
	var es []entry
	for p, at := range tl {
		es = append(es, entry{p, at})
	}
	slices.SortFunc(es, func(a, b entry) int { return a.at.Compare(b.at) })
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.phase + " " + stamp(e.at)
	}
	return strings.Join(parts, ", ")
}
