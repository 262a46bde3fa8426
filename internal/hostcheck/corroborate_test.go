package hostcheck

import (
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/store"
)

// TestCorroborate: what decides a grant comes from the clusters and the
// operator, whatever the record says.
func TestCorroborate(t *testing.T) {
	nomad := health.ClusterHealth{Product: health.Nomad, Cluster: "global", Servers: []health.ServerHealth{
		{ID: "s1", Name: "srv-1.global", Address: "10.0.0.1:4647"},
		{ID: "s2", Name: "srv-2.global", Address: "10.0.0.2:4647"},
		{ID: "s3", Name: "other.global", Address: "10.0.0.3:4647"}, // matched by its address
	}}
	consul := health.ClusterHealth{Product: health.Consul, Cluster: "dc1", Servers: []health.ServerHealth{{ID: "c1", Name: "srv-1"}}}
	vault := health.ClusterHealth{Product: health.Vault, Cluster: "v", Servers: []health.ServerHealth{{ID: "vault-only", Name: "vault-only"}}}
	nodes := map[string]*api.NodeListStub{
		"n1": {ID: "n1", Name: "srv-1", Address: "10.0.0.1"},
		"n2": {ID: "n2", Name: "srv-2", Address: "10.0.0.2"},
		"n3": {ID: "n3", Name: "client-3", Address: "10.0.0.3"},
		"n4": {ID: "n4", Name: "client-4", Address: "10.0.0.4"},
	}
	b := Backing{
		Members:      map[string]health.ClusterHealth{"nomad/global": nomad, "consul/dc1": consul, "vault/v": vault},
		Unread:       map[string]string{"consul/dc9": "connection refused"},
		Nodeless:     map[string]string{"nas-1": "storage"},
		FleetLockIDs: map[string]bool{"abc": true},
		UnderWay:     map[string]bool{"rebooted": true},
	}
	srv := func(p, c, id string) store.Server { return store.Server{Product: p, Cluster: c, ID: id} }
	tests := []struct {
		name     string
		rec      store.HostRecord
		gone     bool // left out
		servers  []store.Server
		roles    []string
		group    string
		disputed string
	}{
		{name: "a server whose record leaves its servers out is one",
			rec:     store.HostRecord{Host: "srv-1", NodeID: "n1", Roles: []string{store.RoleNomadClient}},
			servers: []store.Server{srv("consul", "dc1", "c1"), srv("nomad", "global", "s1")},
			roles:   []string{store.RoleConsulServer, store.RoleNomadClient, store.RoleNomadServer}, disputed: "leaves out"},
		{name: "an honest server record is unchanged",
			rec: store.HostRecord{Host: "srv-2", NodeID: "n2", Roles: []string{store.RoleNomadServer},
				Servers: []store.Server{srv("nomad", "global", "s2")}},
			servers: []store.Server{srv("nomad", "global", "s2")}, roles: []string{store.RoleNomadServer}},
		{name: "a forged raft ID of another host's server is dropped",
			rec: store.HostRecord{Host: "client-4", NodeID: "n4", Roles: []string{store.RoleNomadServer},
				Servers: []store.Server{srv("nomad", "global", "s1")}},
			roles: []string{}, disputed: "claims nomad server s1 of global, which its cluster lists for another host"},
		{name: "a server matched by its node's address",
			rec: store.HostRecord{Host: "client-3", NodeID: "n3"}, servers: []store.Server{srv("nomad", "global", "s3")},
			roles: []string{store.RoleNomadServer}, disputed: "leaves out"},
		{name: "a claim of a cluster that cannot be read stays and holds the host",
			rec:     store.HostRecord{Host: "client-4", NodeID: "n4", Servers: []store.Server{srv("consul", "dc9", "x")}},
			servers: []store.Server{srv("consul", "dc9", "x")}, roles: []string{store.RoleConsulServer}},
		{name: "a claim of an ID its cluster does not list stays: it can only hold the host",
			rec:     store.HostRecord{Host: "client-4", NodeID: "n4", Servers: []store.Server{srv("nomad", "global", "s9")}},
			servers: []store.Server{srv("nomad", "global", "s9")}, roles: []string{store.RoleNomadServer}},
		{name: "a server-only host whose server was removed while it was down stays in while its cycle is under way",
			rec:     store.HostRecord{Host: "rebooted", Servers: []store.Server{srv("nomad", "global", "s7")}},
			servers: []store.Server{srv("nomad", "global", "s7")}, roles: []string{store.RoleNomadServer}},
		{name: "a ghost claiming an ID its cluster does not list is left out",
			rec: store.HostRecord{Host: "ghost", Servers: []store.Server{srv("nomad", "global", "s9")}}, gone: true},
		{name: "a ghost without a node is left out", rec: store.HostRecord{Host: "ghost", Group: "web", RebootRequired: true}, gone: true},
		{name: "a ghost claiming a server its cluster does not list is left out",
			rec: store.HostRecord{Host: "ghost", Servers: []store.Server{srv("nomad", "global", "s1")}}, gone: true},
		{name: "a server-only host its cluster lists is kept, in the default group",
			rec: store.HostRecord{Host: "vault-only", Group: "web"}, servers: []store.Server{srv("vault", "v", "vault-only")},
			roles: []string{store.RoleVaultServer}, disputed: "leaves out"},
		{name: "a host the operator listed takes the operator's group",
			rec: store.HostRecord{Host: "nas-1", Group: "web"}, group: "storage"},
		{name: "an allow-listed FleetLock client names its group",
			rec:   store.HostRecord{Host: "coreos-1", FleetLockID: "abc", Group: "edge", Roles: []string{store.RoleFleetLock}},
			roles: []string{store.RoleFleetLock}, group: "edge"},
		{name: "a FleetLock id nobody allowed backs nothing",
			rec: store.HostRecord{Host: "coreos-2", FleetLockID: "zzz", Group: "edge", Roles: []string{store.RoleFleetLock}}, gone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Corroborate([]store.HostRecord{tt.rec}, nodes, b)
			if tt.gone {
				if len(got.Records) != 0 || !slices.Equal(got.Unbacked, []string{tt.rec.Host}) {
					t.Fatalf("kept %+v, unbacked %v", got.Records, got.Unbacked)
				}
				return
			}
			if len(got.Records) != 1 || len(got.Unbacked) != 0 {
				t.Fatalf("kept %+v, unbacked %v", got.Records, got.Unbacked)
			}
			r := got.Records[0]
			if !slices.Equal(r.Servers, tt.servers) {
				t.Errorf("servers %v, want %v", r.Servers, tt.servers)
			}
			if tt.roles != nil && !slices.Equal(r.Roles, tt.roles) {
				t.Errorf("roles %v, want %v", r.Roles, tt.roles)
			}
			if r.NodeID == "" && r.Group != tt.group {
				t.Errorf("group %q, want %q", r.Group, tt.group)
			}
			if d := got.Disputes[tt.rec.Host]; (tt.disputed == "") != (d == "") || !strings.Contains(d, tt.disputed) {
				t.Errorf("dispute %q, want one with %q", d, tt.disputed)
			}
		})
	}
}

// TestCorroborateKeepsTheSliceWhenNothingChanges: the caches after it see the
// very same records.
func TestCorroborateKeepsTheSliceWhenNothingChanges(t *testing.T) {
	recs := []store.HostRecord{{Host: "a", NodeID: "n1", Roles: []string{store.RoleNomadClient}}, {Host: "b", NodeID: "n2"}}
	nodes := map[string]*api.NodeListStub{"n1": {ID: "n1", Name: "a"}, "n2": {ID: "n2", Name: "b"}}
	got := Corroborate(recs, nodes, Backing{})
	if !sameSlice(got.Records, recs) {
		t.Errorf("a new slice for records that did not change")
	}
}

// sameSlice reports whether a and b are the same slice (not equal ones).
func sameSlice[T any](a, b []T) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0]) && (a == nil) == (b == nil)
}
