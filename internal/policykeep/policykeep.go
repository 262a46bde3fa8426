// Package policykeep keeps which stored policy a coordinator enforces: its
// version, or why the stored one cannot be used, read again only when its
// watch saw a change, and never replaced by defaults when it cannot be used.
package policykeep

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/rollboot/rollboot/internal/watched"
)

// InvalidError is a stored policy that cannot be used: unreadable, written by
// a newer rollboot, or failing validation (written by hand).
type InvalidError struct {
	Version int // the stored version, 0 when it cannot be read
	Err     error
}

func (e *InvalidError) Error() string {
	if e.Version > 0 {
		return fmt.Sprintf("the stored policy (version %d) is invalid: %v", e.Version, e.Err)
	}
	return fmt.Sprintf("the stored policy cannot be read: %v", e.Err)
}

func (e *InvalidError) Unwrap() error { return e.Err }

// Keeper is what a coordinator enforces of the stored policy; the pass
// goroutine's.
type Keeper struct {
	Log *slog.Logger
	// Version is that of the rules in force; Problem says why the stored
	// policy cannot be used ("" when it can).
	Version int
	Problem string
	// Loaded: the source answered at least once this term.
	Loaded bool
	// read: that the source answered (the rules, or why they cannot be
	// used), kept while the policy watch sees no change.
	read watched.Kept[struct{}]
}

// EndTerm forgets this term's read: the next term reads the policy again.
func (k *Keeper) EndTerm() {
	k.Loaded = false
	k.read.Forget()
}

// Refresh reads the stored policy with read, unless its watch (live, at
// generation gen) saw no change since the last read, and returns its rules
// with take set when they are to be put in force. A policy read returns as an
// *InvalidError is not used: the keeper says loudly why, and the rules in
// force stay. An error means it could not be read at all: the pass does
// nothing. version is the version rules carry.
func Refresh[R any](ctx context.Context, k *Keeper, gen uint64, live bool, read func(context.Context) (R, error), version func(R) int) (rules R, take bool, err error) {
	if _, ok := k.read.Get(gen, live); ok {
		// Not changed since it was read (its watch says): keep what it said.
		k.Loaded = true
		return rules, false, nil
	}
	r, err := read(ctx)
	var bad *InvalidError
	switch {
	case errors.As(err, &bad):
		if k.Problem != bad.Error() {
			k.Log.Error("the stored policy cannot be used: no new reboot starts until a valid one is applied (rollboot policy apply); hosts in a cycle finish it with the last good rules",
				"err", bad, "enforced_version", k.Version)
		}
		k.Problem = bad.Error()
	case err != nil:
		return rules, false, fmt.Errorf("read the stored policy: %w", err)
	default:
		v := version(r)
		if !k.Loaded || k.Problem != "" || v != k.Version {
			k.Log.Info("enforcing the stored policy", "version", v, "default", v == 0)
		}
		k.Problem, k.Version = "", v
		rules, take = r, true
	}
	k.read.Keep(gen, struct{}{})
	k.Loaded = true
	return rules, take, nil
}
