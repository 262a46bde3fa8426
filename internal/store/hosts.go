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

// BadRecord is a variable that cannot be used: it is skipped, for its host only,
// and reported (status, logs).
type BadRecord struct {
	Path string `json:"path"`
	Host string `json:"host"` // the host its path names
	Err  string `json:"error"`
}

// HostsChecked is Hosts that also returns the records it skipped: those that fail
// to decode, and those whose host name does not match their path (a record under
// hosts/a naming host b would otherwise stand for b).
func (s *Store) HostsChecked(ctx context.Context, index uint64, wait time.Duration) ([]HostRecord, []BadRecord, uint64, error) {
	l, idx, err := s.HostList(ctx, index, wait)
	if err != nil {
		return nil, nil, 0, err
	}
	recs, bad, err := s.HostsIn(ctx, l)
	if err != nil {
		return nil, nil, 0, err
	}
	return recs, bad, idx, nil
}

// HostList is the list of the host record variables (their paths and
// ModifyIndex), as a watch of them reads it: HostsIn reads the records it
// names, only those that changed since the store last read them.
type HostList struct {
	metas []*api.VariableMetadata
}

// HostList lists the host record variables; with index > 0 it first blocks
// until one changes or wait passes (a watch), and returns the list index.
func (s *Store) HostList(ctx context.Context, index uint64, wait time.Duration) (HostList, uint64, error) {
	metas, idx, err := s.list(ctx, s.prefix+"/hosts/", index, wait)
	return HostList{metas: metas}, idx, err
}

// HostsIn returns the host records l names, as HostsChecked does.
func (s *Store) HostsIn(ctx context.Context, l HostList) ([]HostRecord, []BadRecord, error) {
	if loaded := s.takeLoaded("hosts/"); loaded != nil {
		held := s.hosts.seed(l.metas, func(m *api.VariableMetadata) *api.Variable { return s.copied(loaded, m) }, s.decodeHostAt)
		s.countUse(held, len(l.metas))
	}
	out := make([]HostRecord, 0, len(l.metas))
	var bad []BadRecord
	err := refresh(ctx, s, &s.hosts, l.metas, s.decodeHostAt, func(c cachedHost) {
		if c.bad != nil {
			bad = append(bad, *c.bad)
			return
		}
		out = append(out, c.rec)
	})
	if err != nil {
		return nil, nil, err
	}
	// Listed by path, which is the order of the hosts unless a name has a dot
	// (stored as "~"): sorted only then, without moving the records otherwise.
	byHost := func(a, b HostRecord) int { return strings.Compare(a.Host, b.Host) }
	if !slices.IsSortedFunc(out, byHost) {
		slices.SortFunc(out, byHost)
	}
	sort.Slice(bad, func(i, j int) bool { return bad[i].Path < bad[j].Path })
	return out, bad, nil
}

// decodeHostAt decodes the host record v, or says why it cannot be used: it
// does not decode, or it names another host than its path.
func (s *Store) decodeHostAt(v *api.Variable) cachedHost {
	rec, err := decodeHost(v)
	if err == nil && s.hostPath(pathName(rec.Host)) != v.Path {
		err = fmt.Errorf("the record names host %q but is stored under %s", rec.Host, v.Path)
	}
	if err != nil {
		return cachedHost{bad: &BadRecord{Path: v.Path, Host: HostFromPath(v.Path), Err: err.Error()}}
	}
	return cachedHost{rec: rec}
}

// CheckHostName refuses host names that cannot be mapped to a variable path one
// to one: dots are stored as "~", so a "~" would read back as a dot, and a "/"
// would put the record under another path.
func CheckHostName(name string) error {
	switch {
	case name == "":
		return errors.New("empty host name")
	case strings.ContainsAny(name, "~/"):
		return fmt.Errorf(`host name %q contains "~" or "/", which rollboot refuses: dots are stored as "~" in variable paths`, name)
	}
	return nil
}

// WatchHost reads one host record, first blocking until it changes past index
// (when index > 0) or wait passes, and returns the index to pass next time. A
// record that does not decode is returned with its ModifyIndex and the error.
func (s *Store) WatchHost(ctx context.Context, host string, index uint64, wait time.Duration) (HostRecord, uint64, error) {
	v, idx, err := s.read(ctx, s.hostPath(pathName(host)), index, wait)
	if err != nil {
		return HostRecord{}, idx, err
	}
	rec, err := decodeHost(v)
	rec.ModifyIndex = v.ModifyIndex
	return rec, idx, err
}

// PlansChecked returns every plan by host name, and the plans with items that
// cannot be read. Such a plan is kept with what could be read (the rest is zero:
// no backoff, not eligible before, no drain index, which errs on the side of
// holding), so that its host still counts against its group, and the
// coordinator's next write of it repairs it. A plan written by a newer rollboot
// (a version this one does not know) is not read at all: it is returned as
// PhaseUnreadable, which holds its host and which PutPlan never overwrites.
func (s *Store) PlansChecked(ctx context.Context) (map[string]Plan, []BadRecord, error) {
	metas, _, err := s.list(ctx, s.prefix+"/plan/", 0, 0)
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(metas, func(i, j int) bool { return metas[i].Path < metas[j].Path })
	vars, err := s.readPlans(ctx, metas)
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]Plan, len(metas))
	var bad []BadRecord
	copied := make(map[string]bool, len(metas))
	for _, v := range vars {
		if v == nil {
			continue // deleted since the list
		}
		p, err := decodePlan(v)
		switch {
		case errors.Is(err, ErrUnknownVersion):
			p = unreadablePlan(v, err)
			bad = append(bad, BadRecord{Path: v.Path, Host: p.Host, Err: err.Error() + ": host held, plan not overwritten"})
		case err != nil:
			bad = append(bad, BadRecord{Path: v.Path, Host: HostFromPath(v.Path), Err: err.Error() + ": read as zero"})
		}
		if p.Host == "" {
			p.Host = HostFromPath(v.Path)
		}
		p.ModifyIndex = v.ModifyIndex
		out[p.Host] = p
		if err == nil {
			s.noteCopy(v.Path, v.ModifyIndex, &p, nil)
			copied[s.relative(v.Path)] = true
		}
	}
	// Plans gone, and those that cannot be read (read one by one after a
	// fail-over), are not copied.
	s.forgetCopies("plan/", func(rel string) bool { return copied[rel] })
	return out, bad, nil
}

// readPlans returns the plan variables metas lists, in their order (nil: one
// deleted since the list): from the copies loaded (LoadCopies) where they
// hold the variable at the listed index, else read, side by side.
func (s *Store) readPlans(ctx context.Context, metas []*api.VariableMetadata) ([]*api.Variable, error) {
	loaded := s.takeLoaded("plan/")
	vars := make([]*api.Variable, len(metas))
	var todo []int
	var paths []string
	for i, m := range metas {
		if v := s.copied(loaded, m); v != nil {
			vars[i] = v
			continue
		}
		todo = append(todo, i)
		paths = append(paths, m.Path)
	}
	if loaded != nil {
		s.countUse(len(metas)-len(todo), len(metas))
	}
	read, err := s.readEach(ctx, paths)
	if err != nil {
		return nil, err
	}
	for k, i := range todo {
		vars[i] = read[k]
	}
	return vars, nil
}

// noteHost tells the copies' book of a host record read (e) or forgotten.
func (s *Store) noteHost(path string, e *cachedVar[cachedHost]) {
	if e == nil || e.val.bad != nil {
		s.noteCopy(path, 0, nil, nil)
		return
	}
	s.noteCopy(path, e.modify, nil, &e.val.rec)
}

// unreadablePlan stands for a plan that a newer rollboot wrote: the host is held
// (PhaseUnreadable), and Waiting says why.
func unreadablePlan(v *api.Variable, err error) Plan {
	return Plan{Host: HostFromPath(v.Path), Phase: PhaseUnreadable, ModifyIndex: v.ModifyIndex,
		Waiting: "held: its plan was written by a newer rollboot (" + err.Error() + ")"}
}
