package coordinator

import (
	"testing"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// The census counts the hosts whose agent stands for election, not every host
// record: with only some agents candidates, counting them all would make the
// quiet candidates try too seldom.
func TestCountCandidates(t *testing.T) {
	_, _, st := simStore(t, nomadsim.Config{Clients: 1})
	ctx := t.Context()
	for host, roles := range map[string][]string{
		"a": {store.RoleNomadClient, store.RoleCandidate},
		"b": {store.RoleNomadClient},
		"c": {store.RoleCandidate},
		"d": nil,
	} {
		if _, err := st.PutHost(ctx, store.HostRecord{Host: host, BootID: "b-" + host, Roles: roles}); err != nil {
			t.Fatal(err)
		}
	}
	co := New(Options{Deps: Deps{Store: st}})
	n, err := co.CountCandidates(ctx)
	if err != nil || n != 2 {
		t.Fatalf("CountCandidates = %d, %v; want 2 (a and c)", n, err)
	}
}
