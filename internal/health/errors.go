package health

import (
	"errors"
	"fmt"
)

// ErrDenied matches (errors.Is) every *DeniedError.
var ErrDenied = errors.New("permission denied")

// DeniedError is returned when a product refused a hand-over (or a node
// maintenance change) with 403: Nomad's transfer-leadership needs a management
// token, Consul's needs operator:write and Vault's step-down needs update+sudo on
// sys/step-down. The caller decides by its configured policy (wait for an
// operator, or reboot without handing over).
//
// Package handover returns it; it is declared here, beside the gates and
// NeedsHandOver, so that the coordinator decides on it with the vocabulary of
// server health it already uses.
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
