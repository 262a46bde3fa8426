package coordinator

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/store"
)

// A host whose agent cannot tell which servers run on it is neither admitted nor
// let out of rejoining, whatever else its record says.
func TestDiscoveryErrorHoldsHost(t *testing.T) {
	tests := []struct {
		name string
		rec  store.HostRecord
		want string // a part of the reason; "" = not held by discovery
	}{
		{name: "no servers known, discovery failing",
			rec:  store.HostRecord{Host: "h1", DiscoverError: "look up consul.invalid: no such host"},
			want: "server roles unknown (the agent keeps retrying): look up consul.invalid"},
		{name: "stale servers, discovery failing",
			rec: store.HostRecord{Host: "h1", Roles: []string{store.RoleNomadServer},
				Servers:       []store.Server{{Product: "nomad", Cluster: "global", ID: "s1"}},
				DiscoverError: "discover vault: sys/health: EOF"},
			want: "server roles unknown"},
		{name: "client host, discovery fine", rec: store.HostRecord{Host: "h1", Roles: []string{store.RoleNomadClient}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.rec
			pre := admission.ServerGate(true, nil, &rec, map[string]string{}, nil).String()
			why, _ := postGate(nil, &rec, time.Now(), 0)
			post := why.String()
			if tc.want == "" {
				if pre != "" || post != "" {
					t.Fatalf("held: %q / %q", pre, post)
				}
				return
			}
			if !strings.Contains(pre, tc.want) || !strings.Contains(post, tc.want) {
				t.Fatalf("gates %q / %q, want ~%q", pre, post, tc.want)
			}
		})
	}
}
