package health

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	vaultapi "github.com/hashicorp/vault/api"
)

// ErrDenied matches (errors.Is) every *DeniedError.
var ErrDenied = errors.New("permission denied")

// ErrNoTarget is returned by a hand-over when no other healthy voter can take over.
var ErrNoTarget = errors.New("no other healthy voter to take over")

// DeniedError is returned when a product refused a hand-over with 403: Nomad's
// transfer-leadership needs a management token, Consul's needs operator:write and
// Vault's step-down needs update+sudo on sys/step-down. The caller decides by its
// configured policy (wait for an operator, or reboot without handing over).
type DeniedError struct {
	Product Product
	Op      string // what was denied, e.g. "transfer leadership"
	Need    string // the permission the call needs, e.g. "a management token"
	Err     error  // the client's error (it carries no token)
}

func (e *DeniedError) Error() string {
	return fmt.Sprintf("%s %s: permission denied (needs %s): %v", e.Product, e.Op, e.Need, e.Err)
}

func (e *DeniedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrDenied) true.
func (e *DeniedError) Is(target error) bool { return target == ErrDenied }

// isForbidden reports whether err is an HTTP 403 from any of the three clients.
func isForbidden(err error) bool {
	var nerr nomadapi.UnexpectedResponseError
	var cerr consulapi.StatusError
	var verr *vaultapi.ResponseError
	return (errors.As(err, &nerr) && nerr.StatusCode() == http.StatusForbidden) ||
		(errors.As(err, &cerr) && cerr.Code == http.StatusForbidden) ||
		(errors.As(err, &verr) && verr.StatusCode == http.StatusForbidden)
}

// denied wraps a 403 as a *DeniedError, and other errors with the operation.
func denied(p Product, op, need string, err error) error {
	if isForbidden(err) {
		return &DeniedError{Product: p, Op: op, Need: need, Err: err}
	}
	return fmt.Errorf("%s %s: %w", p, op, err)
}

// isRefused reports whether err means that nothing listens at the address (the
// connection was refused). A dropped connection, a timeout, a TLS or HTTP error is
// not refused.
func isRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}

// poll calls cond until it reports done, with a backoff from 25ms to 500ms, until
// ctx ends. On timeout the error names the last condition error, if any.
func poll(ctx context.Context, what string, cond func() (bool, error)) error {
	wait := 25 * time.Millisecond
	for {
		done, err := cond()
		if done {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if err != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), err)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}

// pickTarget chooses the healthy voter, other than from, with the lowest ID.
func pickTarget(h ClusterHealth, from string) (string, error) {
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
		return "", fmt.Errorf("%s: %w", h.label(), ErrNoTarget)
	}
	return target, nil
}

// newLeaderElsewhere is the hand-over's wait condition.
func newLeaderElsewhere(h ClusterHealth, from string) (bool, error) {
	if h.Err != nil {
		return false, h.Err
	}
	return h.Leader != "" && h.Leader != from, nil
}
