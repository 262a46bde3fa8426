// Package handover moves a server's leadership off a host before it reboots:
// the Nomad and Consul Raft leadership to another healthy voter, the active Vault
// node to a standby, and the host's Consul node into maintenance mode. Each
// action reads the cluster with package health's readers, acts only when the
// server leads (health.NeedsHandOver), and waits, bounded by its context, until
// another server leads.
//
// A 403 is returned as a *health.DeniedError (errors.Is(err, health.ErrDenied)),
// so that the caller can apply its policy for a denied hand-over.
package handover

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/watch"
)

// ErrNoTarget is returned by a hand-over when no other healthy voter can take over.
var ErrNoTarget = errors.New("no other healthy voter to take over")

// isForbidden reports whether err is an HTTP 403 from any of the three clients.
func isForbidden(err error) bool {
	var nerr nomadapi.UnexpectedResponseError
	var cerr consulapi.StatusError
	var verr *vaultapi.ResponseError
	return (errors.As(err, &nerr) && nerr.StatusCode() == http.StatusForbidden) ||
		(errors.As(err, &cerr) && cerr.Code == http.StatusForbidden) ||
		(errors.As(err, &verr) && verr.StatusCode == http.StatusForbidden)
}

// denied wraps a 403 as a *health.DeniedError, and other errors with the
// operation.
func denied(p health.Product, op, need string, err error) error {
	if isForbidden(err) {
		return &health.DeniedError{Product: p, Op: op, Need: need, Err: err}
	}
	return fmt.Errorf("%s %s: %w", p, op, err)
}

// pickTarget chooses the healthy voter, other than from, with the lowest ID.
func pickTarget(h health.ClusterHealth, from string) (string, error) {
	target := ""
	for _, s := range h.Servers {
		if s.ID == from || !s.Voter || !s.Healthy || s.Sealed {
			continue
		}
		if target == "" || s.ID < target {
			target = s.ID
		}
	}
	if target == "" {
		return "", fmt.Errorf("%s: %w", h.Label(), ErrNoTarget)
	}
	return target, nil
}

// newLeaderElsewhere is the hand-over's wait condition.
func newLeaderElsewhere(h health.ClusterHealth, from string) (bool, error) {
	if h.Err != nil {
		return false, h.Err
	}
	return h.Leader != "" && h.Leader != from, nil
}

// awaitNewLeader reads the cluster until a leader other than from leads, with a
// backoff from 25ms to 500ms, until ctx ends. On timeout the error names the
// last read's error, if any.
func awaitNewLeader(ctx context.Context, what string, read func() health.ClusterHealth, from string) error {
	wait := 25 * time.Millisecond
	for {
		done, err := newLeaderElsewhere(read(), from)
		if done {
			return nil
		}
		if !watch.Sleep(ctx, wait) {
			if err != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), err)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}
