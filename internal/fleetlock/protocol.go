// Package fleetlock serves the FleetLock protocol (coreos/zincati
// docs/development/fleetlock/protocol.md) over rollboot's state, so that Fedora
// CoreOS machines running Zincati (or any FleetLock client) take reboot slots from
// the same groups, with the same concurrency, windows and gates as rollboot's own
// agents. The handlers keep no state of their own: everything is in Nomad
// Variables, written with check-and-set, so any rollboot instance can serve.
//
// A FleetLock id maps to a rollboot host through the operator's sources first: a
// Nomad node whose meta fleetlock_id is the id, or, for an id of the operator's
// allow-list, a slot holder without a node named "fleetlock-<id>". Only then a
// host record in which an agent published the id (agent.publish_fleetlock_id),
// and only a record naming the Nomad node of its own host (identity.go). Any
// other id is refused and leaves no state. The handlers ask for a reboot with a
// manual request in the control variable and report the client's progress in the
// host record they write (never in an agent's record); the coordinator does the
// rest, exactly as for an agent: admission, drain, rejoin.
package fleetlock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
)

// Error kinds: the bounded set of `kind` values the server answers with (Zincati
// uses kind as a metrics label). Every non-200 answer has one of them.
const (
	KindMissingHeader    = "missing_header"     // 400: no `fleet-lock-protocol: true` header
	KindBadRequest       = "bad_request"        // 400: the body is not {"client_params":{"id","group"}} or a value is invalid
	KindUnknownGroup     = "unknown_group"      // 400: the group is not a rollboot group
	KindNotFound         = "not_found"          // 404: not a FleetLock endpoint
	KindMethodNotAllowed = "method_not_allowed" // 405: not a POST
	KindUnknownID        = "unknown_id"         // 403: the id maps to no Nomad node, allow-list entry or verified agent record
	KindForbidden        = "forbidden"          // 403: the client certificate does not name the id
	KindRateLimited      = "rate_limited"       // 429: too many requests; retry later
	KindIdentityConflict = "identity_conflict"  // 409: the id names more than one host
	KindBodyTooLarge     = "body_too_large"     // 413: the body exceeds max_body_bytes
	KindWaitingForSlot   = "waiting_for_slot"   // 423: queued for a slot, a window, a gate or a pause
	KindWaitingForDrain  = "waiting_for_drain"  // 423: the slot is reserved, the node is being drained
	KindWaitingForRejoin = "waiting_for_rejoin" // 423: the host's reboot cycle is still finishing
	KindStuck            = "stuck"              // 423: the cycle is stuck; `rollboot release <host>` frees it
	KindInternal         = "internal_error"     // 500: Nomad or the state store failed; retry
)

// Kinds lists every error kind, for documentation and tests.
var Kinds = []string{
	KindMissingHeader, KindBadRequest, KindUnknownGroup, KindNotFound, KindMethodNotAllowed,
	KindIdentityConflict, KindBodyTooLarge, KindWaitingForSlot, KindWaitingForDrain,
	KindWaitingForRejoin, KindStuck, KindInternal, KindUnknownID, KindForbidden, KindRateLimited,
}

// kindStatus is the HTTP status of each kind.
var kindStatus = map[string]int{
	KindMissingHeader:    http.StatusBadRequest,
	KindBadRequest:       http.StatusBadRequest,
	KindUnknownGroup:     http.StatusBadRequest,
	KindNotFound:         http.StatusNotFound,
	KindMethodNotAllowed: http.StatusMethodNotAllowed,
	KindUnknownID:        http.StatusForbidden,
	KindForbidden:        http.StatusForbidden,
	KindRateLimited:      http.StatusTooManyRequests,
	KindIdentityConflict: http.StatusConflict,
	KindBodyTooLarge:     http.StatusRequestEntityTooLarge,
	KindWaitingForSlot:   http.StatusLocked,
	KindWaitingForDrain:  http.StatusLocked,
	KindWaitingForRejoin: http.StatusLocked,
	KindStuck:            http.StatusLocked,
	KindInternal:         http.StatusInternalServerError,
}

// ErrorBody is the JSON body of every error answer.
type ErrorBody struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
}

// Params are a request's client_params.
type Params struct {
	ID    string
	Group string
}

var (
	// GroupRE is the protocol's pattern for groups.
	GroupRE = regexp.MustCompile(`^[a-zA-Z0-9.-]+$`)
	// IDRE restricts ids to what can name a rollboot host in a variable path
	// (Zincati's ids are 32 lowercase hex digits).
	IDRE = regexp.MustCompile(`^[a-zA-Z0-9._-]+$`)
)

// MaxIDLength bounds an id, so that the variable paths built from it stay within
// Nomad's 128 characters.
const MaxIDLength = 64

type wireRequest struct {
	ClientParams *struct {
		ID    *string `json:"id"`
		Group *string `json:"group"`
	} `json:"client_params"`
}

// Decode parses and validates a request body: {"client_params": {"id": "...",
// "group": "..."}}, compact or pretty-printed; unknown fields are ignored.
func Decode(body []byte) (Params, error) {
	var req wireRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		if errors.Is(err, io.EOF) {
			return Params{}, errors.New("empty body: want {\"client_params\": {\"id\": ..., \"group\": ...}}")
		}
		return Params{}, fmt.Errorf("invalid JSON body: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Params{}, errors.New("invalid JSON body: data after the object")
	}
	cp := req.ClientParams
	if cp == nil {
		return Params{}, errors.New("missing client_params")
	}
	if cp.ID == nil || *cp.ID == "" {
		return Params{}, errors.New("missing client_params.id")
	}
	if cp.Group == nil || *cp.Group == "" {
		return Params{}, errors.New("missing client_params.group")
	}
	p := Params{ID: *cp.ID, Group: *cp.Group}
	if len(p.ID) > MaxIDLength || !IDRE.MatchString(p.ID) {
		return Params{}, fmt.Errorf("invalid client_params.id: use 1 to %d letters, digits, dots, dashes and underscores", MaxIDLength)
	}
	if !GroupRE.MatchString(p.Group) {
		return Params{}, errors.New("invalid client_params.group: must match ^[a-zA-Z0-9.-]+$")
	}
	return p, nil
}
