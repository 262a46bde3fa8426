package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// StandbyPath is the path of the i-th standby slot of the coordinator election
// (a variable lock, like the leader's).
func (s *Store) StandbyPath(i int) string { return s.prefix + "/standby/" + strconv.Itoa(i) }

// CensusPath is the path of the candidate census the leader publishes.
func (s *Store) CensusPath() string { return s.prefix + "/election" }

const censusCandidates = "candidates"

// Census reads the number of coordinator candidates the leader published. A
// census never published (or unreadable) reads as 0.
func (s *Store) Census(ctx context.Context) (int, error) {
	v, _, err := s.read(ctx, s.CensusPath(), 0, 0)
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(v.Items[censusCandidates])
	if err != nil || n < 0 {
		return 0, nil
	}
	return n, nil
}

// PublishCensus writes n to the census when it differs: one read, and a write
// only on a change.
func (s *Store) PublishCensus(ctx context.Context, n int) error {
	v, _, err := s.read(ctx, s.CensusPath(), 0, 0)
	var modify uint64
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	default:
		if v.Items[censusCandidates] == strconv.Itoa(n) {
			return nil
		}
		modify = v.ModifyIndex
	}
	if _, err := s.write(ctx, s.CensusPath(), map[string]string{censusCandidates: strconv.Itoa(n)}, modify); err != nil {
		return fmt.Errorf("candidate census: %w", err)
	}
	return nil
}
