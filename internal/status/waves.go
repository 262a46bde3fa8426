package status

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rollboot/rollboot/internal/wave"
)

// WaveStore is where Read reads the waves the coordinator remembers
// (<prefix>/waves); *store.Store implements it.
type WaveStore interface {
	Waves(ctx context.Context) (map[string]string, uint64, error)
}

// Wave is one wave of a group not finished, or held by a canary's failure.
type Wave struct {
	Group       string `json:"group"`
	Fingerprint string `json:"fingerprint"`
	// Canaries are its canaries, each "host" while out, "host back at T" once back.
	Canaries []string `json:"canaries,omitempty"`
	// Completed counts its other hosts back healthy.
	Completed int `json:"completed"`
	// Failed: a canary failed, how; the rest of the wave is held.
	Failed string `json:"failed,omitempty"`
}

// readWaves adds to v the waves not finished, but a held wave no host needs
// any more (its hosts moved on to another fingerprint); a state that cannot be
// read is said in WaveProblem (the coordinator then holds every wave).
func readWaves(ctx context.Context, v *View, st WaveStore) {
	items, _, err := st.Waves(ctx)
	var s wave.State
	if err == nil {
		s, err = wave.FromItems(items)
	}
	if err != nil {
		v.WaveProblem = fmt.Sprintf("cannot read the waves (the coordinator holds every host of a wave with canaries or after): %v", err)
		return
	}
	for _, w := range s.Waves {
		if !w.Finished.IsZero() && w.Failed == "" || w.Failed != "" && !needed(*v, w) {
			continue
		}
		out := Wave{Group: w.Group, Fingerprint: w.Fingerprint, Completed: w.Completed, Failed: w.Failed}
		for _, m := range w.Members {
			if !m.Canary {
				continue
			}
			c := m.Host
			if !m.Done.IsZero() {
				c += " back at " + m.Done.UTC().Format(time.RFC3339)
			}
			out.Canaries = append(out.Canaries, c)
		}
		v.Waves = append(v.Waves, out)
	}
}

// needed reports whether a host of v needs a reboot in wave w.
func needed(v View, w wave.Wave) bool {
	for _, h := range v.Hosts {
		if h.RebootRequired && h.Fingerprint == w.Fingerprint && (h.Group == "" || h.Group == w.Group) {
			return true
		}
	}
	return false
}

// writeWaves writes the waves under way, a held one first with why.
func writeWaves(w io.Writer, v View) error {
	if v.WaveProblem != "" {
		fmt.Fprintf(w, "\nWaves: %s\n", v.WaveProblem)
	}
	for _, x := range v.Waves {
		if x.Failed != "" {
			fmt.Fprintf(w, "\nWAVE HELD: group %q, wave %s: canary %s (the group is halted: rollboot resume -group %s lifts it and picks new canaries)\n",
				x.Group, wave.Short(x.Fingerprint), x.Failed, x.Group)
		}
	}
	if len(v.Waves) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nWaves under way (hosts needing a reboot for the same thing):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  Group\tWave\tCanaries\tOthers back\tState")
	for _, x := range v.Waves {
		state := "under way"
		if x.Failed != "" {
			state = "held: canary failed"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d\t%s\n", x.Group, wave.Short(x.Fingerprint), orDash(strings.Join(x.Canaries, ", ")), x.Completed, state)
	}
	return tw.Flush()
}
