// Package denied makes a Nomad token that the cluster refuses (403) plain in a
// daemon's log: the first time each refusal is seen it is logged as an error
// naming the shipped ACL policy the process's token needs, and its repeats (a
// retry every few seconds to minutes) are not logged again until an hour has
// passed, so the one line that says what to fix is not buried.
package denied

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/health"
)

// Remind is how long a refusal already logged stays quiet.
const Remind = time.Hour

// maxKept bounds the refusals remembered; past it the oldest is forgotten.
const maxKept = 64

// Is reports whether err is Nomad refusing the token: a 403 from the Nomad
// API, whose text is Nomad's "Permission denied", "ACL token not found" or
// "ACL token expired" (nomad/structs/errors.go), also when wrapped as text.
// Consul's and Vault's refusals are other tokens' and are not matched, nor is
// a refusal that says itself what it needs (a *health.DeniedError: a
// leadership hand-over without a management token, which the shipped
// policies do not grant on purpose).
func Is(err error) bool {
	var said *health.DeniedError
	if err == nil || errors.As(err, &said) {
		return false
	}
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) && ure.HasStatusCode() {
		return ure.StatusCode() == 403
	}
	s := err.Error()
	for _, t := range []string{"403 (Permission denied)", "403 (ACL token not found)", "403 (ACL token expired)"} {
		if strings.Contains(s, t) {
			return true
		}
	}
	return false
}

// Handler wraps a slog.Handler: a record with an "err" attribute that Is a
// refusal is logged at error level with a "fix" naming Policy, once per
// distinct error text within Remind; every other record passes as it is.
type Handler struct {
	inner  slog.Handler
	policy string
	state  *state
}

type state struct {
	mu   sync.Mutex
	now  func() time.Time
	seen map[string]time.Time
	// expected are the messages of records whose refusal is expected and
	// said as it is (the Nomad version check without agent:read).
	expected []string
}

// New wraps inner; policy names the ACL policy file the token needs (such as
// "deploy/acl/rollboot-coordinator.policy.hcl"); now is the clock (nil:
// time.Now). A record whose message is one of expected passes as it is, its
// refusal included: a check that goes on without a right the shipped
// policies do not grant.
func New(inner slog.Handler, policy string, now func() time.Time, expected ...string) *Handler {
	if now == nil {
		now = time.Now
	}
	return &Handler{inner: inner, policy: policy, state: &state{now: now, seen: map[string]time.Time{}, expected: expected}}
}

// Enabled: a refusal is raised to error level, so a record is wanted when the
// inner handler takes errors; Handle checks its own level again.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l) || h.inner.Enabled(ctx, slog.LevelError)
}

// Handle logs r, or, when it reports a refusal, logs it once as described.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	err := refusal(r)
	if err == nil || slices.Contains(h.state.expected, r.Message) {
		if !h.inner.Enabled(ctx, r.Level) {
			return nil
		}
		return h.inner.Handle(ctx, r)
	}
	if !h.state.first(err.Error()) {
		return nil
	}
	out := slog.NewRecord(r.Time, slog.LevelError, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	out.AddAttrs(slog.String("fix", "Nomad refuses this process's token: it is unknown or expired (check it with `nomad acl token self`), "+
		"or its ACL policy lacks a right; it needs the policy "+h.policy+". Repeats of this error are logged again only after "+Remind.String()))
	return h.inner.Handle(ctx, out)
}

// first reports whether the refusal text was not logged within Remind, and
// notes it as logged now.
func (s *state) first(text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if at, ok := s.seen[text]; ok && now.Sub(at) < Remind {
		return false
	}
	if len(s.seen) >= maxKept {
		oldest, first := "", time.Time{}
		for k, at := range s.seen {
			if first.IsZero() || at.Before(first) {
				oldest, first = k, at
			}
		}
		delete(s.seen, oldest)
	}
	s.seen[text] = now
	return true
}

// refusal returns the record's "err" attribute when it is a refusal.
func refusal(r slog.Record) error {
	var found error
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "err" {
			return true
		}
		if e, ok := a.Value.Any().(error); ok && Is(e) {
			found = e
		}
		return false
	})
	return found
}

// WithAttrs and WithGroup keep one memory of what was logged.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	return &Handler{inner: h.inner.WithAttrs(as), policy: h.policy, state: h.state}
}

// WithGroup: see WithAttrs.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name), policy: h.policy, state: h.state}
}
