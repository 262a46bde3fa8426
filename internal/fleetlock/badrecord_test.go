package fleetlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// TestBadRecordDoesNotStopFleetLock: a host record that does not decode, and
// unreadable control entries, leave every other FleetLock client served.
func TestBadRecordDoesNotStopFleetLock(t *testing.T) {
	a := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	e := newEnv(t, 0, allow(a))
	c, err := api.NewClient(&api.Config{Address: e.sim.Address()})
	if err != nil {
		t.Fatal(err)
	}
	vars := c.Variables()
	if _, _, err := vars.Create(&api.Variable{Path: "rollboot/hosts/broken",
		Items: map[string]string{"host": "broken", "reboot_required": "maybe"}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := vars.Create(&api.Variable{Path: "rollboot/control",
		Items: map[string]string{"paused": "false", "requests": `{"broken":{"at":"soon"}}`}}, nil); err != nil {
		t.Fatal(err)
	}
	e.until(steady, a, "default", 10*time.Second)
	e.until(pre, a, "default", 20*time.Second)
	if r := e.call(pre, a, "default"); r.code != 200 {
		t.Fatalf("pre-reboot with a bad record elsewhere: %d %s %s", r.code, r.Kind, r.Value)
	}
	e.until(steady, a, "default", 20*time.Second)
	if _, err := e.st.Control(context.Background()); err != nil {
		t.Fatal(err)
	}
}
