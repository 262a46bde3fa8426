package store

import "context"

// notifyPath is the notification ledger: which events the coordinator sent
// (package notify encodes its items). One writer: the leading coordinator.
func (s *Store) notifyPath() string { return s.prefix + "/notify" }

// NotifyLedger returns the items of the notification ledger and its
// ModifyIndex; ErrNotFound when it does not exist yet.
func (s *Store) NotifyLedger(ctx context.Context) (map[string]string, uint64, error) {
	v, _, err := s.read(ctx, s.notifyPath(), 0, 0)
	if err != nil {
		return nil, 0, err
	}
	return v.Items, v.ModifyIndex, nil
}

// PutNotifyLedger stores the notification ledger with check-and-set on
// modifyIndex (0: create it); ErrConflict when someone wrote it since.
func (s *Store) PutNotifyLedger(ctx context.Context, items map[string]string, modifyIndex uint64) (uint64, error) {
	return s.write(ctx, s.notifyPath(), items, modifyIndex)
}
