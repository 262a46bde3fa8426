package store

import "context"

// silencesPath is the variable holding the Alertmanager silences the
// coordinator keeps for hosts out for their reboot (package silence encodes
// each host's item). One writer: the leading coordinator.
func (s *Store) silencesPath() string { return s.prefix + "/silences" }

// silencesVersionKey is the item every silences variable has, so that it is
// never empty (Nomad stores no variable without items).
const silencesVersionKey = "_version"

// Silences returns the silences kept, one item per host, and the variable's
// ModifyIndex; an absent variable is none, at index 0.
func (s *Store) Silences(ctx context.Context) (map[string]string, uint64, error) {
	v, _, err := s.read(ctx, s.silencesPath(), 0, 0)
	if err == ErrNotFound {
		return map[string]string{}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	out := make(map[string]string, len(v.Items))
	for host, item := range v.Items {
		if host != silencesVersionKey {
			out[host] = item
		}
	}
	return out, v.ModifyIndex, nil
}

// PutSilences stores the silences kept, one item per host, with check-and-set
// on modifyIndex (0: create the variable); ErrConflict when someone wrote it
// since.
func (s *Store) PutSilences(ctx context.Context, items map[string]string, modifyIndex uint64) (uint64, error) {
	out := map[string]string{silencesVersionKey: "1"}
	for host, item := range items {
		out[host] = item
	}
	return s.write(ctx, s.silencesPath(), out, modifyIndex)
}
