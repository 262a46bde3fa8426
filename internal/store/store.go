// Package store gives typed access to rollboot's state in Nomad Variables.
//
// Layout under a prefix (default "rollboot"), one writer per variable:
//
//	<prefix>/hosts/<host>    written by that host's agent: identity, boot ID, reboot need
//	<prefix>/plan/<host>     written by the coordinator only: phase and its bookkeeping
//	<prefix>/control         written by the CLI and the coordinator, always with CAS
//	<prefix>/requests/<host> one host's request, cancel and release (control.go); and
//	                         requests/-/watched, a marker kept by the coordinator (absent.go)
//	<prefix>/history/<id>    written by the coordinator: finished reboots, bounded
//	<prefix>/notify/<part>   written by the coordinator: the notifications sent, in
//	                         shards by host and a part for the pause (notify.go)
//	<prefix>/silences        written by the coordinator: the Alertmanager silences it keeps (silences.go)
//	<prefix>/leader          the coordinator election lock
//	<prefix>/standby/<i>     the election's standby slots, variable locks (election.go)
//	<prefix>/election        written by the coordinator: the candidate census (election.go)
//
// Every write is check-and-set on ModifyIndex, so a writer that lost a race learns it
// instead of overwriting newer state.
package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Variables is the part of the Nomad Variables API the store uses; *api.Variables
// implements it.
type Variables interface {
	Read(path string, q *api.QueryOptions) (*api.Variable, *api.QueryMeta, error)
	PrefixList(prefix string, q *api.QueryOptions) ([]*api.VariableMetadata, *api.QueryMeta, error)
	CheckedCreate(v *api.Variable, q *api.WriteOptions) (*api.Variable, *api.WriteMeta, error)
	CheckedUpdate(v *api.Variable, q *api.WriteOptions) (*api.Variable, *api.WriteMeta, error)
	CheckedDelete(path string, checkIndex uint64, q *api.WriteOptions) (*api.WriteMeta, error)
}

// ErrConflict means a check-and-set write lost to a newer write: read again and decide again.
var ErrConflict = errors.New("state changed since it was read (CAS conflict)")

// ErrNotFound means the variable does not exist.
var ErrNotFound = errors.New("not found")

// ErrUnreadable means the variable exists but does not decode.
var ErrUnreadable = errors.New("unreadable record")

// Store reads and writes rollboot's variables.
type Store struct {
	vars      Variables
	prefix    string
	namespace string

	hosts    pathCache[cachedHost]    // host records (bad ones too)
	controls pathCache[cachedControl] // per-host control variables
	history  historyKnown             // the history records, to prune (historyprune.go)
	copies   copyBook                 // the coordinator's copies of plans and records (copies.go)
	absent   absence                  // what the watches found absent (absent.go)
}

type cachedHost struct {
	rec HostRecord
	bad *BadRecord // the record cannot be used
}

// New returns a store over vars under prefix in namespace ("" = the client's default).
func New(vars Variables, prefix, namespace string) *Store {
	s := &Store{vars: vars, prefix: strings.Trim(prefix, "/"), namespace: namespace}
	s.hosts.note = s.noteHost
	return s
}

// Prefix is the variables path prefix.
func (s *Store) Prefix() string { return s.prefix }

// LeaderPath is the path of the coordinator election lock.
func (s *Store) LeaderPath() string { return s.prefix + "/leader" }

func (s *Store) hostPath(h string) string     { return s.prefix + "/hosts/" + h }
func (s *Store) planPath(h string) string     { return s.prefix + "/plan/" + h }
func (s *Store) controlPath() string          { return s.prefix + "/control" }
func (s *Store) historyPrefix() string        { return s.prefix + "/history/" }
func (s *Store) historyPath(id string) string { return s.historyPrefix() + id }

func (s *Store) q(ctx context.Context, index uint64, wait time.Duration) *api.QueryOptions {
	q := &api.QueryOptions{Namespace: s.namespace, WaitIndex: index, WaitTime: wait}
	return q.WithContext(ctx)
}

func (s *Store) w(ctx context.Context) *api.WriteOptions {
	w := &api.WriteOptions{Namespace: s.namespace}
	return w.WithContext(ctx)
}

// ValidHostName reports whether name can be part of a variable path (Nomad allows
// [a-zA-Z0-9-_~/], no dots): host names with dots are stored with dots as "~".
func pathName(host string) string { return strings.ReplaceAll(host, ".", "~") }

// read returns the variable at path; ErrNotFound if absent.
func (s *Store) read(ctx context.Context, path string, index uint64, wait time.Duration) (*api.Variable, uint64, error) {
	v, meta, err := s.vars.Read(path, s.q(ctx, index, wait))
	if errors.Is(err, api.ErrVariablePathNotFound) {
		idx := uint64(0)
		if meta != nil {
			idx = meta.LastIndex
		}
		return nil, idx, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", path, err)
	}
	return v, meta.LastIndex, nil
}

// write stores items at path with CAS on modifyIndex (0: create only).
func (s *Store) write(ctx context.Context, path string, items map[string]string, modifyIndex uint64) (uint64, error) {
	v := &api.Variable{Namespace: s.namespace, Path: path, Items: items, ModifyIndex: modifyIndex}
	var (
		out *api.Variable
		err error
	)
	if modifyIndex == 0 {
		out, _, err = s.vars.CheckedCreate(v, s.w(ctx))
	} else {
		out, _, err = s.vars.CheckedUpdate(v, s.w(ctx))
	}
	var cas api.ErrCASConflict
	if errors.As(err, &cas) {
		return 0, fmt.Errorf("write %s: %w", path, ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return out.ModifyIndex, nil
}

func (s *Store) remove(ctx context.Context, path string, modifyIndex uint64) error {
	_, err := s.vars.CheckedDelete(path, modifyIndex, s.w(ctx))
	var cas api.ErrCASConflict
	if errors.As(err, &cas) {
		return fmt.Errorf("delete %s: %w", path, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", path, err)
	}
	return nil
}

// list returns the metadata under prefix and the list's index; with index > 0 it
// blocks until something under the prefix changes or wait passes.
func (s *Store) list(ctx context.Context, prefix string, index uint64, wait time.Duration) ([]*api.VariableMetadata, uint64, error) {
	l, meta, err := s.vars.PrefixList(prefix, s.q(ctx, index, wait))
	if err != nil {
		return nil, 0, fmt.Errorf("list %s: %w", prefix, err)
	}
	return l, meta.LastIndex, nil
}

// HasState reports whether any variable lies under the prefix: rollboot's
// state at all (a host record, a plan, the policy, the control state, the
// leader lock, the history). Nomad lists only the variables the token may
// read, so a token without read rights sees none either.
func (s *Store) HasState(ctx context.Context) (bool, error) {
	q := s.q(ctx, 0, 0)
	q.PerPage = 1
	l, _, err := s.vars.PrefixList(s.prefix+"/", q)
	if err != nil {
		return false, fmt.Errorf("list %s/: %w", s.prefix, err)
	}
	return len(l) > 0, nil
}

// WatchLeader blocks until the election lock variable changes past index (with
// index > 0) or wait passes, and returns its index (LeaderLockIndex says what
// changes it); while it does not exist, the index of the variables (absent.go).
func (s *Store) WatchLeader(ctx context.Context, index uint64, wait time.Duration) (uint64, error) {
	return s.watchOne(ctx, s.LeaderPath(), index, wait)
}

// ---- host records ----------------------------------------------------------------

// Host reads one host record. A record that does not decode is an error wrapping
// ErrUnreadable, returned with its ModifyIndex (to overwrite it with CAS).
func (s *Store) Host(ctx context.Context, host string) (HostRecord, error) {
	v, _, err := s.read(ctx, s.hostPath(pathName(host)), 0, 0)
	if err != nil {
		return HostRecord{}, err
	}
	rec, err := decodeHost(v)
	if err != nil {
		return rec, fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	return rec, nil
}

// PutHost writes a host record with CAS on rec.ModifyIndex and returns the new index.
func (s *Store) PutHost(ctx context.Context, rec HostRecord) (uint64, error) {
	return s.write(ctx, s.hostPath(pathName(rec.Host)), rec.items(), rec.ModifyIndex)
}

// DeleteHost removes a host record (a host taken out of the cluster).
func (s *Store) DeleteHost(ctx context.Context, rec HostRecord) error {
	return s.remove(ctx, s.hostPath(pathName(rec.Host)), rec.ModifyIndex)
}

// DeletePlan removes the plan of a host that is gone, with CAS on its
// ModifyIndex.
func (s *Store) DeletePlan(ctx context.Context, p Plan) error {
	path := s.planPath(pathName(p.Host))
	err := s.remove(ctx, path, p.ModifyIndex)
	s.noteCopy(path, 0, nil, nil) // gone, or not known any more
	return err
}

// Hosts returns every host record that can be used, sorted by host name, and the
// list index. With index > 0 it first blocks until a host record changes or wait
// passes. Records are cached by ModifyIndex, so only changed records are read
// again. A record that cannot be used is skipped: HostsChecked also reports it.
func (s *Store) Hosts(ctx context.Context, index uint64, wait time.Duration) ([]HostRecord, uint64, error) {
	recs, _, idx, err := s.HostsChecked(ctx, index, wait)
	return recs, idx, err
}

// ---- plans -----------------------------------------------------------------------

// Plan reads the plan of one host; ErrNotFound if the coordinator never planned it.
func (s *Store) Plan(ctx context.Context, host string) (Plan, error) {
	p, _, err := s.WatchPlan(ctx, host, 0, 0)
	return p, err
}

// WatchPlan reads a host's plan, first blocking until it changes past index (when
// index > 0) or wait passes. It returns the index to pass next time.
func (s *Store) WatchPlan(ctx context.Context, host string, index uint64, wait time.Duration) (Plan, uint64, error) {
	v, idx, err := s.read(ctx, s.planPath(pathName(host)), index, wait)
	if err != nil {
		return Plan{}, idx, err
	}
	p, err := decodePlan(v)
	return p, idx, err
}

// Plans returns every plan, by host name. A plan with an item that cannot be read
// is returned with what could be read (PlansChecked also reports it).
func (s *Store) Plans(ctx context.Context) (map[string]Plan, error) {
	plans, _, err := s.PlansChecked(ctx)
	return plans, err
}

// readAll reads and decodes every variable under prefix, in path order; one that
// vanishes between the list and its read, or does not decode, is skipped.
func readAll[T any](ctx context.Context, s *Store, prefix string, decode func(*api.Variable) (T, error)) ([]T, error) {
	metas, _, err := s.list(ctx, prefix, 0, 0)
	if err != nil {
		return nil, err
	}
	sort.Slice(metas, func(i, j int) bool { return metas[i].Path < metas[j].Path })
	out := make([]T, 0, len(metas))
	for _, m := range metas {
		v, _, err := s.read(ctx, m.Path, 0, 0)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rec, err := decode(v)
		if err != nil {
			continue // one bad record does not hide the others
		}
		out = append(out, rec)
	}
	return out, nil
}

// PutPlan writes a plan with CAS on p.ModifyIndex and returns the new index. It
// refuses to overwrite a plan written by a newer rollboot (PhaseUnreadable).
func (s *Store) PutPlan(ctx context.Context, p Plan) (uint64, error) {
	if p.Phase == PhaseUnreadable {
		return 0, fmt.Errorf("plan of %s: %w: not overwritten", p.Host, ErrUnknownVersion)
	}
	path := s.planPath(pathName(p.Host))
	idx, err := s.write(ctx, path, p.items(), p.ModifyIndex)
	if err != nil {
		s.noteCopy(path, 0, nil, nil) // not known any more
		return 0, err
	}
	p.ModifyIndex = idx
	s.noteCopy(path, idx, &p, nil)
	return idx, nil
}

// ---- control ---------------------------------------------------------------------

// Control reads the control state: the control variable merged with the per-host
// request variables (control.go). Entries that cannot be read are skipped and
// listed in Problems; a missing control variable is the zero Control.
func (s *Store) Control(ctx context.Context) (Control, error) {
	return s.readControl(ctx)
}

// WatchControl blocks until the control variable changes past index (with index
// > 0) or wait passes, and returns its index. It creates the variable, unpaused,
// when it finds none: Nomad wakes a query precisely only for a variable that
// exists (absent.go).
func (s *Store) WatchControl(ctx context.Context, index uint64, wait time.Duration) (uint64, error) {
	_, idx, err := s.read(ctx, s.controlPath(), index, wait)
	if errors.Is(err, ErrNotFound) {
		return s.createMissing(ctx, s.controlPath(), controlItems(&Control{}, true, nil), idx)
	}
	return idx, err
}

// WatchRequests blocks until a per-host request variable (<prefix>/requests/)
// changes past index (with index > 0) or wait passes, and returns the list's
// index. Nomad wakes such a list only for writes under the prefix while a
// variable is under it: the watch keeps a marker there (absent.go).
func (s *Store) WatchRequests(ctx context.Context, index uint64, wait time.Duration) (uint64, error) {
	l, idx, err := s.list(ctx, s.requestsPrefix(), index, wait)
	if err == nil && !slices.ContainsFunc(l, func(m *api.VariableMetadata) bool { return s.isRequestsMarker(m.Path) }) {
		return s.createMissing(ctx, s.requestsMarker(), map[string]string{
			"note": "kept by the rollboot coordinator: a watch of this folder wakes only for writes in it while a variable is under it"}, idx)
	}
	return idx, err
}

// UpdateControl applies fn to the current control state and writes what changed
// with CAS, retrying on conflicts: each host's requests, cancels and releases go to
// that host's own variable, the pause flag to the control variable (control.go).
// fn may be called more than once.
func (s *Store) UpdateControl(ctx context.Context, fn func(*Control) error) (Control, error) {
	return s.updateControl(ctx, fn)
}

// ---- history ---------------------------------------------------------------------

// AppendHistory stores a finished cycle (WriteHistory) and prunes the oldest
// records beyond keep (PruneHistory); keep <= 0 prunes nothing.
func (s *Store) AppendHistory(ctx context.Context, rec HistoryRecord, keep int) error {
	if err := s.WriteHistory(ctx, rec); err != nil {
		return err
	}
	if keep <= 0 {
		return nil
	}
	return s.PruneHistory(ctx, keep)
}

// WriteHistory stores a finished cycle. The record's path is fixed by the
// cycle (its request time, host and grant), so storing the same cycle twice
// keeps the first record: callers may retry freely.
func (s *Store) WriteHistory(ctx context.Context, rec HistoryRecord) error {
	start := rec.Timeline[PhasePending]
	if start.IsZero() {
		start = rec.Finished
	}
	id := fmt.Sprintf("%020d-%s-%s", start.UnixNano(), pathName(rec.Host), rec.GrantID)
	path := s.historyPath(id)
	idx, err := s.write(ctx, path, rec.items(), 0)
	switch {
	case errors.Is(err, ErrConflict):
		s.history.forget() // stored before, at an index not known here
	case err != nil:
		return err
	default:
		s.history.added(path, idx)
	}
	return nil
}

// History returns the stored history, oldest first.
func (s *Store) History(ctx context.Context) ([]HistoryRecord, error) {
	return readAll(ctx, s, s.historyPrefix(), decodeHistory)
}

// WatchState blocks until any of rollboot's variables (host records, plans,
// control, history) changes past index (with index > 0) or wait passes, and
// returns the index of the list: one blocking query for whatever shows the
// whole rollout (the status page).
func (s *Store) WatchState(ctx context.Context, index uint64, wait time.Duration) (uint64, error) {
	_, idx, err := s.list(ctx, s.prefix+"/", index, wait)
	return idx, err
}
