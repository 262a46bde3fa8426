package store

import "context"

// wavesPath is the variable holding the waves the coordinator remembers
// (package wave encodes each wave's item): their canaries and when each
// finished in each group. One writer: the leading coordinator.
func (s *Store) wavesPath() string { return s.prefix + "/waves" }

// wavesVersionKey is the item every waves variable has, so that it is never
// empty (Nomad stores no variable without items).
const wavesVersionKey = "_version"

// Waves returns the waves remembered, one item per wave, and the variable's
// ModifyIndex; an absent variable is none, at index 0.
func (s *Store) Waves(ctx context.Context) (map[string]string, uint64, error) {
	v, _, err := s.read(ctx, s.wavesPath(), 0, 0)
	if err == ErrNotFound {
		return map[string]string{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	out := make(map[string]string, len(v.Items))
	for k, item := range v.Items {
		if k != wavesVersionKey {
			out[k] = item
		}
	}
	return out, v.ModifyIndex, nil
}

// PutWaves stores the waves, one item per wave, with check-and-set on
// modifyIndex (0: create the variable); ErrConflict when someone wrote it
// since.
func (s *Store) PutWaves(ctx context.Context, items map[string]string, modifyIndex uint64) (uint64, error) {
	out := map[string]string{wavesVersionKey: "1"}
	for k, item := range items {
		out[k] = item
	}
	return s.write(ctx, s.wavesPath(), out, modifyIndex)
}
