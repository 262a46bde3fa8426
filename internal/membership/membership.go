// Package membership reads the memberships of the Nomad, Consul and Vault
// server clusters that host records are corroborated with, at most once per
// MaxAge, keeping each cluster's last good read; and reports, once each, the
// hosts the corroboration left out or disputed.
package membership

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

// MaxAge is how old the memberships a pass corroborates the records with may
// be (and at most the resync interval). A server joining or leaving a cluster
// is rare; the quorum gates of a host being taken out read their clusters
// again in the pass that decides.
const MaxAge = 10 * time.Second

// Access reads one server cluster's health (its autopilot view).
type Access interface {
	Read(ctx context.Context, product, cluster string) health.ClusterHealth
}

// Lister is implemented by an Access that knows, on its own, which server
// clusters it reaches (the coordinator's Nomad region, and the Consul and
// Vault clusters it was given addresses of). Their memberships are read
// whatever the records claim, so that a server whose record leaves its
// servers out is still known as one.
type Lister interface {
	KnownClusters(ctx context.Context) []store.Server
}

// Reader is the last read of the memberships. It is used by one goroutine
// (the coordinator's pass).
type Reader struct {
	// Clusters reads the clusters; nil: none can be read.
	Clusters Access
	// MaxAge bounds the age of a read reused (MaxAge and the resync
	// interval, the lesser).
	MaxAge time.Duration
	// Now is the clock.
	Now func() time.Time

	at   time.Time
	keys string // the clusters wanted at the last read
	// good: each cluster's last membership read that succeeded (a server
	// joining or leaving is rare: a failed read falls back on it); unread:
	// the clusters never read, with why; fresh: the clusters read by the
	// last Read itself.
	good   map[string]health.ClusterHealth
	unread map[string]string
	fresh  map[string]bool
}

// wanted returns the clusters whose membership a pass reads: the known ones
// and every one a record claims, by key.
func (r *Reader) wanted(ctx context.Context, recs []store.HostRecord) map[string]store.Server {
	out := map[string]store.Server{}
	if l, ok := r.Clusters.(Lister); ok {
		for _, srv := range l.KnownClusters(ctx) {
			out[phase.ClusterKey(srv)] = store.Server{Product: srv.Product, Cluster: srv.Cluster}
		}
	}
	for i := range recs {
		for _, srv := range recs[i].Servers {
			out[phase.ClusterKey(srv)] = store.Server{Product: srv.Product, Cluster: srv.Cluster}
		}
	}
	return out
}

// Read returns the memberships of the clusters (the last good read of each)
// and those never read with why, reading them again unless the last read, of
// the same clusters, is younger than MaxAge.
func (r *Reader) Read(ctx context.Context, recs []store.HostRecord) (map[string]health.ClusterHealth, map[string]string) {
	want := r.wanted(ctx, recs)
	names := slices.Sorted(maps.Keys(want))
	keys := strings.Join(names, "\n")
	r.fresh = nil
	if r.good != nil && keys == r.keys && r.Now().Sub(r.at) < r.MaxAge {
		return r.good, r.unread
	}
	good, unread, fresh := map[string]health.ClusterHealth{}, map[string]string{}, map[string]bool{}
	for _, k := range names {
		h, err := r.readOne(ctx, want[k])
		k = phase.ClusterKey(store.Server{Product: string(h.Product), Cluster: h.Cluster})
		switch last, ok := r.good[k]; {
		case err == nil:
			good[k], fresh[k] = h, true
		case ok:
			good[k] = last // still the best word on who the servers are
		default:
			unread[k] = err.Error()
		}
	}
	r.at, r.keys, r.good, r.unread, r.fresh = r.Now(), keys, good, unread, fresh
	return good, unread
}

// Fresh returns the health of the clusters the last Read read itself (not
// reused from an earlier one): as current as a read of their own.
func (r *Reader) Fresh() map[string]health.ClusterHealth {
	out := make(map[string]health.ClusterHealth, len(r.fresh))
	for k := range r.fresh {
		out[k] = r.good[k]
	}
	return out
}

// readOne reads one cluster's membership. A known cluster named by the read
// itself (Vault's cluster name) takes that name.
func (r *Reader) readOne(ctx context.Context, srv store.Server) (health.ClusterHealth, error) {
	if r.Clusters == nil {
		return health.ClusterHealth{Product: health.Product(srv.Product), Cluster: srv.Cluster},
			errors.New("no access to the server clusters is configured")
	}
	h := r.Clusters.Read(ctx, srv.Product, srv.Cluster)
	if srv.Cluster != "" || h.Cluster == "" {
		h.Cluster = srv.Cluster
	}
	return h, h.Err
}

// Reporter logs what corroboration made of the records, each thing once: a
// record that an attacker and the host's agent write in turn brings the same
// dispute back again and again, and is logged once per text.
type Reporter struct {
	Log *slog.Logger

	logged   map[string]bool   // the unbacked hosts already logged
	disputes map[string]string // the last dispute logged for each host
}

// Disputes logs each host's dispute when its text changes.
func (r *Reporter) Disputes(disputes map[string]string) {
	if r.disputes == nil {
		r.disputes = map[string]string{}
	}
	for _, h := range slices.Sorted(maps.Keys(disputes)) {
		if r.disputes[h] != disputes[h] {
			r.Log.Warn("host record disputed by its clusters", "host", h, "why", disputes[h])
			r.disputes[h] = disputes[h]
		}
	}
	if len(r.disputes) > 4*len(disputes)+1024 {
		r.disputes = maps.Clone(disputes)
	}
}

// Unbacked logs each host left out once.
func (r *Reporter) Unbacked(hosts []string) {
	if r.logged == nil {
		r.logged = map[string]bool{}
	}
	var fresh []string
	for _, h := range hosts {
		if !r.logged[h] {
			fresh = append(fresh, h)
			r.logged[h] = true
		}
	}
	if len(r.logged) > 4*len(hosts)+1024 {
		// Forget the names no longer seen, so that a flood of names that
		// come and go does not grow this set for ever.
		r.logged = make(map[string]bool, len(hosts))
		for _, h := range hosts {
			r.logged[h] = true
		}
	}
	sort.Strings(fresh)
	for _, h := range fresh {
		r.Log.Warn("host record left out: the host has no Nomad node, and no server cluster, hosts_without_node entry or FleetLock allow-list backs it",
			"host", h)
	}
}
