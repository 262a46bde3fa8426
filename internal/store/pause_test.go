package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/store"
)

// Pauses of the rollout (with an end), of a group and of a host, and an
// urgent request, are stored and read back; expired ones are left out by
// InForce.
func TestControlPauses(t *testing.T) {
	st, _, _ := newStore(t)
	ctx := context.Background()
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	end := at.Add(time.Hour)
	if _, err := st.UpdateControl(ctx, func(c *store.Control) error {
		c.Paused, c.PausedAt, c.PausedUntil, c.PauseReason, c.PausedBy = true, at, end, "incident", "alice"
		c.GroupPauses = map[string]store.Pause{"web": {At: at, Until: at.Add(time.Minute), Reason: "deploy", By: "bob"}}
		c.HostPauses = map[string]store.Pause{"db-1": {At: at, Reason: "debugging", By: "carol"}}
		c.Requests = map[string]store.Request{"db-2": {At: at, Urgent: true}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c, err := st.Control(ctx)
	if err != nil || len(c.Problems) > 0 {
		t.Fatal(err, c.Problems)
	}
	if !c.Paused || !c.PausedUntil.Equal(end) || c.GroupPauses["web"].By != "bob" || c.HostPauses["db-1"].Reason != "debugging" || !c.Requests["db-2"].Urgent {
		t.Fatalf("read back %+v", c)
	}
	in := c.InForce(at.Add(30 * time.Minute))
	if !in.Paused || len(in.GroupPauses) != 0 || len(in.HostPauses) != 1 {
		t.Errorf("at +30m: paused %v, groups %v, hosts %v: want the rollout and db-1 paused, web's pause over", in.Paused, in.GroupPauses, in.HostPauses)
	}
	if in := c.InForce(end); in.Paused || in.PauseReason != "" {
		t.Errorf("at the rollout pause's end: still paused (%q)", in.PauseReason)
	}
}

// A pause item that cannot be read holds everything, with no end (fail
// closed), and says what control reset does.
func TestUnreadablePauseHolds(t *testing.T) {
	for _, item := range []string{"paused_until", "group_pauses", "host_pauses"} {
		t.Run(item, func(t *testing.T) {
			st, _, client := newStore(t)
			ctx := context.Background()
			v := &api.Variable{Path: "rollboot/control", Items: map[string]string{"version": "1", "paused": "false", item: "{not readable"}}
			if _, _, err := client.Variables().Create(v, nil); err != nil {
				t.Fatal(err)
			}
			c, err := st.Control(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !c.Paused || !c.PausedUntil.IsZero() || !strings.Contains(c.PauseReason, item+" cannot be read") || len(c.Problems) != 1 {
				t.Fatalf("control = paused %v until %v, reason %q, problems %v", c.Paused, c.PausedUntil, c.PauseReason, c.Problems)
			}
			if in := c.InForce(time.Now().Add(1000 * time.Hour)); !in.Paused {
				t.Error("an unreadable pause ended by itself")
			}
		})
	}
}
