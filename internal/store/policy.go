package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// MaxVariableSize is Nomad's limit on the size of a variable's items (the sum of
// the lengths of their keys and values: nomad/structs/variables.go
// maxVariableSize).
const MaxVariableSize = 65536

// PolicyHistoryKept is how many previous versions a policy record keeps.
const PolicyHistoryKept = 10

// PolicyRecord is the stored rollout policy, <prefix>/policy. Only `rollboot
// policy apply` writes it, always with check-and-set; the coordinator decides
// with it and nothing else.
type PolicyRecord struct {
	PolicyVersion
	// History holds the previous versions, newest first, at most
	// PolicyHistoryKept (fewer when the variable would not fit in
	// MaxVariableSize).
	History     []PolicyVersion
	ModifyIndex uint64
}

// PolicyVersion is one applied version of the policy.
type PolicyVersion struct {
	Version int `json:"version"`
	// Source is the HCL source as applied; Filename the name it was applied
	// from, used in the positions of its errors (HCL JSON when it ends in ".json").
	Source   string `json:"source"`
	Filename string `json:"filename"`
	// AppliedBy is who applied it: the ACL token's name or user@host, never a secret.
	AppliedBy string    `json:"applied_by"`
	AppliedAt time.Time `json:"applied_at"`
}

// policyCodec is the schema of the policy record. Its version item is the
// record's schema; the policy's own version is "policy_version".
var policyCodec = codec[PolicyRecord]{version: 1, fields: []field[PolicyRecord]{
	number("policy_version", func(p *PolicyRecord) *int { return &p.Version }, true),
	text("source", func(p *PolicyRecord) *string { return &p.Source }),
	text("filename", func(p *PolicyRecord) *string { return &p.Filename }),
	text("applied_by", func(p *PolicyRecord) *string { return &p.AppliedBy }),
	instant("applied_at", func(p *PolicyRecord) *time.Time { return &p.AppliedAt }, false),
	object("history", func(p *PolicyRecord) *[]PolicyVersion { return &p.History }, noElements[PolicyVersion]),
}}

func (s *Store) policyPath() string { return s.prefix + "/policy" }

// PolicyPath is the path of the stored policy.
func (s *Store) PolicyPath() string { return s.policyPath() }

// decodePolicy reads a policy record; a record that cannot be read whole is
// ErrUnreadable (or ErrUnknownVersion), with what could be read.
func decodePolicy(path string, items map[string]string, modify uint64) (PolicyRecord, error) {
	p, err := decodeStrict(policyCodec, path, items)
	p.ModifyIndex = modify
	if err == nil && p.Version < 1 {
		err = fmt.Errorf("variable %s: item %q: missing or not a positive number", path, "policy_version")
	}
	if err != nil && !errors.Is(err, ErrUnknownVersion) {
		err = fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	return p, err
}

// Policy reads the stored policy: ErrNotFound when none was ever applied,
// ErrUnreadable (or ErrUnknownVersion) when the variable does not decode (it
// was written by hand, or by a newer rollboot), with its ModifyIndex set.
func (s *Store) Policy(ctx context.Context) (PolicyRecord, error) {
	v, _, err := s.read(ctx, s.policyPath(), 0, 0)
	if err != nil {
		return PolicyRecord{}, err
	}
	return decodePolicy(v.Path, v.Items, v.ModifyIndex)
}

// WatchPolicy blocks until the policy variable changes past index (with index >
// 0) or wait passes, and returns its index (while none is stored: absent.go).
func (s *Store) WatchPolicy(ctx context.Context, index uint64, wait time.Duration) (uint64, error) {
	return s.watchOne(ctx, s.policyPath(), index, wait)
}

// PutPolicy stores rec with check-and-set on checkIndex (0: only if no policy
// is stored). It drops the oldest versions of rec.History that do not fit in
// Nomad's variable size limit, and refuses a policy whose source alone does
// not fit. It returns the new ModifyIndex; ErrConflict if the policy changed
// since checkIndex.
func (s *Store) PutPolicy(ctx context.Context, rec PolicyRecord, checkIndex uint64) (uint64, error) {
	items, err := PolicyItems(rec)
	if err != nil {
		return 0, err
	}
	return s.write(ctx, s.policyPath(), items, checkIndex)
}

// PolicyItems encodes rec as the items of its variable, keeping at most
// PolicyHistoryKept previous versions and dropping the oldest ones that do not
// fit in MaxVariableSize; a policy that does not fit even without history is an
// error that says by how much.
func PolicyItems(rec PolicyRecord) (map[string]string, error) {
	if len(rec.History) > PolicyHistoryKept {
		rec.History = rec.History[:PolicyHistoryKept]
	}
	for {
		items := policyCodec.encode(rec)
		n := itemsSize(items)
		if n <= MaxVariableSize {
			return items, nil
		}
		if len(rec.History) == 0 {
			return nil, fmt.Errorf("the policy takes %d bytes stored, more than Nomad's limit of %d bytes for a variable: make it shorter", n, MaxVariableSize)
		}
		rec.History = rec.History[:len(rec.History)-1]
	}
}

// itemsSize is the size Nomad counts against MaxVariableSize.
func itemsSize(items map[string]string) int {
	n := 0
	for k, v := range items {
		n += len(k) + len(v)
	}
	return n
}
