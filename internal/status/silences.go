package status

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/rollboot/rollboot/internal/silence"
)

// SilenceStore is where Read reads the Alertmanager silences the coordinator
// keeps; *store.Store implements it.
type SilenceStore interface {
	Silences(ctx context.Context) (map[string]string, uint64, error)
}

// Silence is an Alertmanager silence the coordinator keeps for a host out for
// its reboot (package silence), and the last write of it that failed.
type Silence struct {
	Host   string    `json:"host"`
	ID     string    `json:"id,omitempty"`
	EndsAt time.Time `json:"ends_at,omitzero"`
	Error  string    `json:"error,omitempty"`
}

// readSilences adds the silences kept to v; one that cannot be read is said
// in SilenceProblem.
func readSilences(ctx context.Context, v *View, st SilenceStore) {
	items, _, err := st.Silences(ctx)
	if err != nil {
		v.SilenceProblem = fmt.Sprintf("cannot read the silences kept: %v", err)
		return
	}
	kept, err := silence.Decode(items)
	if err != nil {
		v.SilenceProblem = err.Error()
	}
	for host, k := range kept {
		v.Silences = append(v.Silences, Silence{Host: host, ID: k.ID, EndsAt: k.EndsAt, Error: k.Err})
	}
	sort.Slice(v.Silences, func(i, j int) bool { return v.Silences[i].Host < v.Silences[j].Host })
}

// writeSilences writes the silences kept, with how long each has left at now
// and the last write that failed.
func writeSilences(w io.Writer, v View, now time.Time) error {
	if v.SilenceProblem != "" {
		fmt.Fprintf(w, "\nSilences: %s\n", v.SilenceProblem)
	}
	if len(v.Silences) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nSilences (Alertmanager, while hosts are out):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  Host\tSilence ID\tEnds\tLast failed write")
	for _, s := range v.Silences {
		ends := "-"
		if !s.EndsAt.IsZero() && s.ID != "" {
			ends = "in " + s.EndsAt.Sub(now).Round(time.Second).String()
			if !s.EndsAt.After(now) {
				ends = "ended"
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", s.Host, orDash(s.ID), ends, orDash(s.Error))
	}
	return tw.Flush()
}
