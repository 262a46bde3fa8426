package store

import "context"

// notifyPath is the path of a part of the notification ledger: which events the
// coordinator sent (package notify encodes its items and names its parts). One
// writer: the leading coordinator. Part "" is <prefix>/notify, the single
// variable of the ledger's version 1; the others are <prefix>/notify/<part>.
func (s *Store) notifyPath(part string) string {
	if part == "" {
		return s.prefix + "/notify"
	}
	return s.prefix + "/notify/" + part
}

// NotifyLedger returns the items of a part of the notification ledger and its
// ModifyIndex; ErrNotFound when it does not exist.
func (s *Store) NotifyLedger(ctx context.Context, part string) (map[string]string, uint64, error) {
	v, _, err := s.read(ctx, s.notifyPath(part), 0, 0)
	if err != nil {
		return nil, 0, err
	}
	return v.Items, v.ModifyIndex, nil
}

// PutNotifyLedger stores a part of the notification ledger with check-and-set
// on modifyIndex (0: create it); ErrConflict when someone wrote it since.
func (s *Store) PutNotifyLedger(ctx context.Context, part string, items map[string]string, modifyIndex uint64) (uint64, error) {
	return s.write(ctx, s.notifyPath(part), items, modifyIndex)
}

// DeleteNotifyLedger deletes a part of the notification ledger with
// check-and-set on modifyIndex; ErrConflict when someone wrote it since.
func (s *Store) DeleteNotifyLedger(ctx context.Context, part string, modifyIndex uint64) error {
	return s.remove(ctx, s.notifyPath(part), modifyIndex)
}
