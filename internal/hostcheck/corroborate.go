package hostcheck

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

// A host record is a claim by the host that wrote it (docs/architecture.md,
// "Trust"): any host holding the agent token can write any record. So before a
// pass uses a record, what decides a drain, a grant, a quorum group or a slot
// is taken from sources no host controls, and the record is corrected to say
// it:
//
//   - its node: the Nomad node whose name is the host's (ValidateRecords);
//   - whether a host without a node may take part at all: a server of a cluster
//     (its membership), a host the operator listed in a group's
//     hosts_without_node, or a FleetLock id on the operator's allow-list;
//   - its servers and their raft IDs: each cluster's own membership (the
//     autopilot view of its raft configuration), matched to the host by the
//     server's name or address; a claim of a cluster that cannot be read is
//     kept, since it can only hold the host;
//   - its group: its node's, or the operator's list, never the record's (but
//     for an allow-listed FleetLock client, which names its group itself).
//
// Corroborate is pure; the memberships are read by members.go.

// Backing is what the operator and the clusters say of the hosts, whatever
// any record says.
type Backing struct {
	// Members: the servers each read cluster lists, by cluster key
	// (product/cluster); Unread: the clusters whose membership could not be
	// read, by key, with why.
	Members map[string]health.ClusterHealth
	Unread  map[string]string
	// Nodeless: host -> group, from the groups' hosts_without_node.
	Nodeless map[string]string
	// FleetLockIDs: the FleetLock ids on the operator's allow-list.
	FleetLockIDs map[string]bool
	// UnderWay: the hosts whose cycle is under way (their plans are the
	// coordinator's own): a host taken in stays in until its cycle ends,
	// even while its cluster has removed its server (autopilot's dead server
	// cleanup while the host is down).
	UnderWay map[string]bool
}

// Corroborated is what Corroborate made of the records.
type Corroborated struct {
	// Records: the records the pass may use, corrected.
	Records []store.HostRecord
	// Unbacked: hosts without a node that nothing backs, whose records are
	// left out of everything (sorted).
	Unbacked []string
	// Disputes: where a record and a cluster disagree (the cluster won), by
	// host.
	Disputes map[string]string
}

// Corroborate corrects the records (already checked by ValidateRecords) with
// what b says, and leaves out the records of hosts without a node that
// nothing backs. When it changes nothing it returns recs itself.
func Corroborate(recs []store.HostRecord, nodes map[string]*api.NodeListStub, b Backing) Corroborated {
	servers := serversByHost(b.Members, recs, nodes)
	listed := listedIDs(b.Members)
	out := Corroborated{Records: recs}
	changed := false
	for i := range recs {
		r := &recs[i]
		fixed, keep, dispute := corroborate(r, servers[r.Host], listed, b)
		if dispute != "" {
			if out.Disputes == nil {
				out.Disputes = map[string]string{}
			}
			out.Disputes[r.Host] = dispute
		}
		if !keep {
			out.Unbacked = append(out.Unbacked, r.Host)
		}
		if (!keep || !fixed.sameAs(r)) && !changed {
			changed = true
			out.Records = append(make([]store.HostRecord, 0, len(recs)), recs[:i]...)
		}
		if changed && keep {
			out.Records = append(out.Records, fixed.HostRecord)
		}
	}
	sort.Strings(out.Unbacked)
	return out
}

// correctedRecord is a record as corroborated.
type correctedRecord struct{ store.HostRecord }

func (c correctedRecord) sameAs(r *store.HostRecord) bool {
	return c.Group == r.Group && slices.Equal(c.Roles, r.Roles) && slices.Equal(c.Servers, r.Servers)
}

// listedIDs are the raft IDs each read cluster lists, by cluster key.
func listedIDs(members map[string]health.ClusterHealth) map[string]map[string]bool {
	out := make(map[string]map[string]bool, len(members))
	for k, h := range members {
		ids := make(map[string]bool, len(h.Servers))
		for _, s := range h.Servers {
			ids[s.ID] = true
		}
		out[k] = ids
	}
	return out
}

// corroborate corrects one record: keep is false for a host without a node
// that nothing backs; dispute says where the record and the clusters differ.
//
// A claimed server is kept when its cluster lists it on this host, when its
// cluster cannot be read, and when its cluster does not list its ID at all
// (a server removed while its host was down, or not joined yet): such a claim
// can only hold this host (its gates need the server back). A claimed ID that
// its cluster lists for another server is dropped: it would make this host
// stand in for another's server (its hand-over, its slot in the quorum
// group).
func corroborate(r *store.HostRecord, members []store.Server, listed map[string]map[string]bool, b Backing) (fixed correctedRecord, keep bool, dispute string) {
	fixed = correctedRecord{*r}
	var servers []store.Server
	var claimedOnly []string
	for _, srv := range r.Servers {
		ids, read := listed[phase.ClusterKey(srv)]
		switch {
		case slices.Contains(members, srv), !read, !ids[srv.ID]:
			servers = append(servers, srv)
		default:
			claimedOnly = append(claimedOnly, fmt.Sprintf("%s server %s of %s", srv.Product, srv.ID, srv.Cluster))
		}
	}
	var missing []string
	for _, srv := range members {
		if !slices.Contains(r.Servers, srv) {
			servers = append(servers, srv)
			missing = append(missing, fmt.Sprintf("%s server %s of %s", srv.Product, srv.ID, srv.Cluster))
		}
	}
	if len(servers) == 0 && len(r.Servers) == 0 {
		servers = r.Servers // nil or empty, as the record has it
	}
	fixed.Servers = servers
	fixed.Roles = rolesWith(r.Roles, servers)
	dispute = disputeText(claimedOnly, missing)
	if r.NodeID != "" {
		return fixed, true, dispute
	}
	switch g, listed := b.Nodeless[r.Host]; {
	case listed:
		fixed.Group = g
	case r.FleetLockID != "" && b.FleetLockIDs[r.FleetLockID] && slices.Contains(r.Roles, store.RoleFleetLock):
		// An allow-listed FleetLock client names its group in its requests.
	case len(members) > 0 || b.UnderWay[r.Host]:
		fixed.Group = "" // the default group; its servers make its quorum groups
	default:
		return fixed, false, ""
	}
	return fixed, true, dispute
}

func disputeText(claimedOnly, missing []string) string {
	var parts []string
	if len(claimedOnly) > 0 {
		parts = append(parts, "the record claims "+strings.Join(claimedOnly, ", ")+", which its cluster lists for another host")
	}
	if len(missing) > 0 {
		parts = append(parts, "the record leaves out "+strings.Join(missing, ", ")+", which its cluster lists")
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + ": the clusters' word is used"
}

// serverRoles are the roles a server of each product gives its host.
var serverRoles = map[string]string{
	string(health.Nomad):  store.RoleNomadServer,
	string(health.Consul): store.RoleConsulServer,
	string(health.Vault):  store.RoleVaultServer,
}

// rolesWith returns roles with the server roles replaced by those of servers.
func rolesWith(roles []string, servers []store.Server) []string {
	out := make([]string, 0, len(roles)+len(servers))
	for _, r := range roles {
		if !slices.Contains([]string{store.RoleNomadServer, store.RoleConsulServer, store.RoleVaultServer}, r) {
			out = append(out, r)
		}
	}
	for _, srv := range servers {
		if role := serverRoles[srv.Product]; role != "" && !slices.Contains(out, role) {
			out = append(out, role)
		}
	}
	if len(out) == 0 && roles == nil {
		return nil
	}
	sort.Strings(out)
	sorted := slices.Clone(roles)
	sort.Strings(sorted)
	if slices.Equal(sorted, out) {
		return roles // the same set: keep the record's order
	}
	return out
}

func sortServers(s []store.Server) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].Product != s[j].Product {
			return s[i].Product < s[j].Product
		}
		if s[i].Cluster != s[j].Cluster {
			return s[i].Cluster < s[j].Cluster
		}
		return s[i].ID < s[j].ID
	})
}

// serversByHost matches each listed server to a host: by name (a Nomad
// server is named "<node name>.<region>", a Consul server by its node name, a
// Vault raft node by its node_id), else by the address of a host's Nomad
// node. A server that matches no host is left out.
func serversByHost(members map[string]health.ClusterHealth, recs []store.HostRecord, nodes map[string]*api.NodeListStub) map[string][]store.Server {
	hosts := make(map[string]bool, len(recs))
	for i := range recs {
		hosts[recs[i].Host] = true
	}
	byAddr := map[string]string{}
	for _, n := range nodes {
		if ip := net.ParseIP(n.Address); ip != nil && !ip.IsLoopback() && !ip.IsUnspecified() {
			byAddr[ip.String()] = n.Name
		}
	}
	out := map[string][]store.Server{}
	for _, k := range slices.Sorted(maps.Keys(members)) {
		h := members[k]
		for _, s := range h.Servers {
			host := serverHost(h, s, hosts, byAddr)
			if host == "" {
				continue
			}
			out[host] = append(out[host], store.Server{Product: string(h.Product), Cluster: h.Cluster, ID: s.ID})
		}
	}
	for _, s := range out {
		sortServers(s)
	}
	return out
}

// serverHost is the host that runs server s of cluster h, "" when none of
// hosts does.
func serverHost(h health.ClusterHealth, s health.ServerHealth, hosts map[string]bool, byAddr map[string]string) string {
	names := []string{s.Name}
	if h.Product == health.Nomad && h.Cluster != "" {
		names = append(names, strings.TrimSuffix(s.Name, "."+h.Cluster))
	}
	if h.Product == health.Vault {
		names = append(names, s.ID)
	}
	for _, n := range names {
		if n != "" && hosts[n] {
			return n
		}
	}
	if ip, _, err := net.SplitHostPort(s.Address); err == nil {
		if host := byAddr[ip]; host != "" && hosts[host] {
			return host
		}
	}
	return ""
}
