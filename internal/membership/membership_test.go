package membership

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/store"
)

// clusters answers each read with what fail says, counting the reads.
type clusters struct {
	reads int
	fail  bool
}

func (c *clusters) Read(_ context.Context, product, cluster string) health.ClusterHealth {
	c.reads++
	h := health.ClusterHealth{Product: health.Product(product), Cluster: cluster}
	if c.fail {
		h.Err = errors.New("unreachable")
	}
	return h
}

func TestReaderReusesAndFallsBack(t *testing.T) {
	now := time.Unix(1000, 0)
	acc := &clusters{}
	r := Reader{Clusters: acc, MaxAge: MaxAge, Now: func() time.Time { return now }}
	recs := []store.HostRecord{{Host: "a", Servers: []store.Server{{Product: "nomad", Cluster: "global"}}}}

	good, unread := r.Read(context.Background(), recs)
	if len(good) != 1 || len(unread) != 0 || acc.reads != 1 || len(r.Fresh()) != 1 {
		t.Fatalf("first read: good %v unread %v reads %d fresh %v", good, unread, acc.reads, r.Fresh())
	}
	now = now.Add(MaxAge / 2)
	if r.Read(context.Background(), recs); acc.reads != 1 || len(r.Fresh()) != 0 {
		t.Fatalf("a read younger than MaxAge is reused: reads %d, fresh %v", acc.reads, r.Fresh())
	}
	now, acc.fail = now.Add(MaxAge), true
	good, unread = r.Read(context.Background(), recs)
	if acc.reads != 2 || len(good) != 1 || len(unread) != 0 || len(r.Fresh()) != 0 {
		t.Fatalf("a failed read keeps the last good one: reads %d good %v unread %v fresh %v", acc.reads, good, unread, r.Fresh())
	}
	recs = append(recs, store.HostRecord{Host: "b", Servers: []store.Server{{Product: "consul", Cluster: "dc1"}}})
	if _, unread = r.Read(context.Background(), recs); len(unread) != 1 {
		t.Fatalf("a cluster never read is unread with why: %v", unread)
	}
}

func TestReaderWithoutAccess(t *testing.T) {
	r := Reader{MaxAge: MaxAge, Now: time.Now}
	_, unread := r.Read(context.Background(), []store.HostRecord{{Host: "a", Servers: []store.Server{{Product: "vault", Cluster: "v"}}}})
	if len(unread) != 1 {
		t.Fatalf("without access every cluster is unread: %v", unread)
	}
}
