package handover

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/health"
)

func servers(ss ...health.ServerHealth) health.ClusterHealth {
	return health.ClusterHealth{Product: health.Consul, Cluster: "dc1", Leader: "s2", Servers: ss}
}

func TestPickTarget(t *testing.T) {
	voter := func(id string) health.ServerHealth { return health.ServerHealth{ID: id, Healthy: true, Voter: true} }
	tests := []struct {
		name string
		h    health.ClusterHealth
		from string
		want string // "" = ErrNoTarget
	}{
		{name: "lowest other voter", h: servers(voter("s3"), voter("s2"), voter("s1")), from: "s1", want: "s2"},
		{name: "never the leaving server", h: servers(voter("s1"), voter("s2")), from: "s1", want: "s2"},
		{name: "not a non-voter", h: servers(voter("s3"), health.ServerHealth{ID: "s1", Healthy: true}, voter("s2")), from: "s2", want: "s3"},
		{name: "not an unhealthy server", h: servers(health.ServerHealth{ID: "s1", Voter: true}, voter("s3"), voter("s2")), from: "s2", want: "s3"},
		{name: "not a sealed node", h: servers(health.ServerHealth{ID: "s1", Voter: true, Healthy: true, Sealed: true}, voter("s3"), voter("s2")), from: "s2", want: "s3"},
		{name: "nobody else", h: servers(voter("s2"), health.ServerHealth{ID: "s1", Voter: true}), from: "s2"},
		{name: "no servers", h: servers(), from: "s2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pickTarget(tc.h, tc.from)
			if tc.want == "" {
				if !errors.Is(err, ErrNoTarget) || !strings.Contains(err.Error(), `consul "dc1"`) {
					t.Fatalf("got %q, %v; want ErrNoTarget naming the cluster", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// The wait for a new leader ends as soon as another server leads, reads again
// while the old one (or none) leads, and names the last read error on timeout.
func TestAwaitNewLeader(t *testing.T) {
	var reads atomic.Int32
	leaders := []string{"s1", "", "s1", "s2"}
	err := awaitNewLeader(context.Background(), "a new leader", func() health.ClusterHealth {
		n := reads.Add(1)
		return health.ClusterHealth{Leader: leaders[min(int(n), len(leaders))-1]}
	}, "s1")
	if err != nil || reads.Load() != 4 {
		t.Fatalf("err %v after %d reads, want nil after 4", err, reads.Load())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = awaitNewLeader(ctx, "a new leader", func() health.ClusterHealth {
		return health.ClusterHealth{Err: errors.New("no cluster leader")}
	}, "s1")
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for a new leader") ||
		!strings.Contains(err.Error(), "last error: no cluster leader") {
		t.Fatalf("timeout error %v", err)
	}
}

// A 403 from any of the three clients is a *health.DeniedError; other errors
// keep the operation and their cause.
func TestDenied(t *testing.T) {
	plain := errors.New("connection reset")
	err := denied(health.Vault, "step-down of v1", "sudo", plain)
	var de *health.DeniedError
	if errors.As(err, &de) || !errors.Is(err, plain) || err.Error() != "vault step-down of v1: connection reset" {
		t.Fatalf("non-403: %v", err)
	}
}
