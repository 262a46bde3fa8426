package status

import (
	"maps"
	"slices"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// pauseEnds says when a pause ends: "" for one that lasts until resumed, " until
// T", or, once T has passed, that it ended and is ignored.
func pauseEnds(until, now time.Time) string {
	switch {
	case until.IsZero():
		return ""
	case !now.Before(until):
		return " until " + until.UTC().Format(time.RFC3339) + " (ended: ignored)"
	}
	return " until " + until.UTC().Format(time.RFC3339)
}

// writeScopedPauses writes a line for each group and host pause, and reports
// whether it wrote any.
func writeScopedPauses(t *text, v View, now time.Time) bool {
	wrote := false
	for _, scope := range []struct {
		what string
		m    map[string]store.Pause
	}{{"Group", v.GroupPauses}, {"Host", v.HostPauses}} {
		for _, name := range slices.Sorted(maps.Keys(scope.m)) {
			p := scope.m[name]
			by := ""
			if p.By != "" {
				by = " (paused by " + p.By + ")"
			}
			t.para(scope.what+" "+name+" paused"+pauseEnds(p.Until, now)+": ", orDash(p.Reason)+by)
			wrote = true
		}
	}
	return wrote
}
