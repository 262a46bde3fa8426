package status

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// A host awaiting approval shows the state awaiting_approval with what to
// run, and the hosts in line behind it say they wait for it too.
func TestAwaitingApprovalShown(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	why := "awaiting approval: run `rollboot approve db-1` (or `rollboot approve -group db`)"
	plans := map[string]store.Plan{
		"db-1": {Host: "db-1", Group: "db", Phase: store.PhasePending, PhaseSince: t0, RequestedAt: t0,
			Waiting: why, WaitingKind: "awaiting_approval", AwaitingSince: t0},
		"db-2": {Host: "db-2", Group: "db", Phase: store.PhasePending, PhaseSince: t0, RequestedAt: t0.Add(time.Minute)},
		"web-1": {Host: "web-1", Group: "web", Phase: store.PhasePending, PhaseSince: t0, RequestedAt: t0,
			Waiting: "paused", WaitingKind: "paused"},
	}
	v := Build(nil, plans, store.Control{})
	var b bytes.Buffer
	if err := WriteText(&b, v, t0.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"db-1   db     awaiting_approval",
		"rollboot approve db-1",
		`waiting for a slot in group "db" (number 2 in line, after db-1; awaiting approval: db-1)`,
		"web-1  web    pending",
	} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("status does not say %q:\n%s", want, out)
		}
	}
}
