package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
)

// The control state is kept in two places:
//
//	<prefix>/control          the pause flag (and, from older versions, requests,
//	                          cancels and releases of every host in one variable)
//	<prefix>/requests/<host>  one host's manual request, cancel and release
//
// Per-host variables keep requests from accumulating in one variable until it
// reaches Nomad's size limit, and an entry is deleted once it is carried out.
// Entries still found in the control variable (written by an older version) are
// honoured and move to their host's variable the first time they change.
//
// Both are parsed leniently: an entry that cannot be read is skipped and reported
// in Control.Problems (a cancel that cannot be read counts as a cancel at the time
// its variable was last written: it suppresses at least what it was meant to).

func (s *Store) requestsPrefix() string         { return s.prefix + "/requests/" }
func (s *Store) requestPath(host string) string { return s.requestsPrefix() + pathName(host) }

// HostControl is the control state of one host, in its own variable.
type HostControl struct {
	Host       string
	Request    *Request
	CancelAt   time.Time
	CanceledBy string
	ReleaseAt  time.Time
	ReleasedBy string
	// Approval lets the host drain though its node runs singletons
	// (`rollboot approve`), until it expires; nil: none.
	Approval    *Approval
	ModifyIndex uint64

	newer bool // the variable has a version this rollboot does not know
}

func (h HostControl) empty() bool {
	return h.Request == nil && h.CancelAt.IsZero() && h.ReleaseAt.IsZero() && h.Approval == nil
}

func (h HostControl) equal(o HostControl) bool {
	if (h.Request == nil) != (o.Request == nil) {
		return false
	}
	if h.Request != nil && (!h.Request.At.Equal(o.Request.At) || h.Request.By != o.Request.By || h.Request.Reason != o.Request.Reason || h.Request.Urgent != o.Request.Urgent) {
		return false
	}
	if (h.Approval == nil) != (o.Approval == nil) || h.Approval != nil && *h.Approval != *o.Approval {
		return false
	}
	return h.CancelAt.Equal(o.CancelAt) && h.ReleaseAt.Equal(o.ReleaseAt) && h.CanceledBy == o.CanceledBy && h.ReleasedBy == o.ReleasedBy
}

// hostControlCodec is the schema of a per-host control variable.
var hostControlCodec = codec[HostControl]{version: 1, fields: []field[HostControl]{
	text("host", func(h *HostControl) *string { return &h.Host }),
	// Present whenever there is a request: requested_at is written even as a
	// zero time, since the item says there is one.
	part("requested_at", true, func(h *HostControl) **Request { return &h.Request }, []field[Request]{
		instant("requested_at", func(r *Request) *time.Time { return &r.At }, true),
		text("requested_by", func(r *Request) *string { return &r.By }),
		text("request_reason", func(r *Request) *string { return &r.Reason }),
		flag("request_urgent", func(r *Request) *bool { return &r.Urgent }, false),
	}),
	instant("cancel_at", func(h *HostControl) *time.Time { return &h.CancelAt }, false),
	text("canceled_by", func(h *HostControl) *string { return &h.CanceledBy }),
	instant("release_at", func(h *HostControl) *time.Time { return &h.ReleaseAt }, false),
	text("released_by", func(h *HostControl) *string { return &h.ReleasedBy }),
	part("approved_until", false, func(h *HostControl) **Approval { return &h.Approval }, []field[Approval]{
		instant("approved_until", func(a *Approval) *time.Time { return &a.Until }, true),
		text("approved_by", func(a *Approval) *string { return &a.By }),
	}),
}}

func (h HostControl) items() map[string]string { return hostControlCodec.encode(h) }

// decodeHostControl reads a per-host control variable leniently: each entry that
// cannot be read is reported and skipped; a cancel that cannot be read counts as
// a cancel at the time the variable was last written. A variable of a version
// this rollboot does not know is read as that cancel alone (it suppresses at
// least what it may hold) and marked newer, so that it is never overwritten.
func decodeHostControl(v *api.Variable) (HostControl, []string) {
	h, bad, err := hostControlCodec.decode(v.Items)
	h.ModifyIndex = v.ModifyIndex
	if h.Host == "" {
		h.Host = HostFromPath(v.Path)
	}
	if err != nil {
		h.CancelAt, h.newer = modifyTime(v), true
		return h, []string{fmt.Sprintf("variable %s: %v: counted as a cancel at %s, when the variable was last written; not overwritten",
			v.Path, err, h.CancelAt.Format(time.RFC3339))}
	}
	var problems []string
	for _, b := range bad {
		switch b.key {
		case "cancel_at":
			h.CancelAt = modifyTime(v)
			problems = append(problems, fmt.Sprintf("variable %s: item %q: %v: counted as a cancel at %s, when the variable was last written",
				v.Path, b.key, b.err, h.CancelAt.Format(time.RFC3339)))
			continue
		case "requested_at":
			h.Request = nil
		}
		problems = append(problems, fmt.Sprintf("variable %s: item %q: %v: skipped", v.Path, b.key, b.err))
	}
	return h, problems
}

func modifyTime(v *api.Variable) time.Time {
	if v.ModifyTime == 0 {
		return time.Now().UTC()
	}
	return time.Unix(0, v.ModifyTime).UTC()
}

// HostFromPath returns the host name a record path ends with (dots are stored as "~").
func HostFromPath(path string) string {
	return strings.ReplaceAll(path[strings.LastIndex(path, "/")+1:], "~", ".")
}

// controlCodec is the schema of the control variable: the pause flag. Its items
// "requests", "cancels" and "releases" come from older versions, which kept every
// host's entries there; they are only read (leniently, by decodeControlLenient),
// and kept as they are until they move to their host's variable.
var controlCodec = codec[Control]{version: 1, fields: []field[Control]{
	flag("paused", func(c *Control) *bool { return &c.Paused }, true),
	text("pause_reason", func(c *Control) *string { return &c.PauseReason }),
	instant("paused_at", func(c *Control) *time.Time { return &c.PausedAt }, false),
	text("paused_by", func(c *Control) *string { return &c.PausedBy }),
	instant("paused_until", func(c *Control) *time.Time { return &c.PausedUntil }, false),
	object("group_pauses", func(c *Control) *map[string]Pause { return &c.GroupPauses }, noEntries),
	object("host_pauses", func(c *Control) *map[string]Pause { return &c.HostPauses }, noEntries),
}}

// unreadablePause is why the rollout holds when an item of the pauses cannot be
// read: rollboot cannot tell what is paused, nor until when.
func unreadablePause(key, raw string) string {
	return "the pause item " + key + " cannot be read (" + strconv.Quote(raw) + "): holding everything; rollboot control reset repairs it"
}

// decodeControlLenient reads the control variable, skipping (and reporting) what
// cannot be read. A pause flag that cannot be read counts as paused: when rollboot
// cannot tell, it holds. So does a control variable of a version this rollboot
// does not know, which it never overwrites.
func decodeControlLenient(v *api.Variable) Control {
	c, bad, err := controlCodec.decode(v.Items)
	c.ModifyIndex, c.raw = v.ModifyIndex, maps.Clone(v.Items)
	if err != nil {
		c = Control{ModifyIndex: v.ModifyIndex, raw: c.raw, newer: true, Paused: true,
			PauseReason: "the control variable was written by a newer rollboot: holding until that version runs"}
		c.Problems = []string{fmt.Sprintf("variable %s: %v: counted as paused; not overwritten", v.Path, err)}
		return c
	}
	for _, b := range bad {
		if b.key == "paused" {
			c.Paused = true
			c.PauseReason = "the pause flag cannot be read (" + strconv.Quote(v.Items["paused"]) + "): holding; rollboot control reset repairs it"
			c.Problems = append(c.Problems, fmt.Sprintf("variable %s: item %q: %v: counted as paused", v.Path, b.key, b.err))
			continue
		}
		if b.key == "paused_until" || b.key == "group_pauses" || b.key == "host_pauses" {
			// Fail closed: a pause that cannot be read holds everything,
			// with no end.
			c.Paused, c.PausedUntil, c.PauseReason = true, time.Time{}, unreadablePause(b.key, v.Items[b.key])
			c.Problems = append(c.Problems, fmt.Sprintf("variable %s: item %q: %v: counted as paused", v.Path, b.key, b.err))
			continue
		}
		c.Problems = append(c.Problems, fmt.Sprintf("variable %s: item %q: %v: skipped", v.Path, b.key, b.err))
	}
	c.Requests = lenientMap(v, "requests", &c.Problems, func(raw json.RawMessage) (Request, error) {
		var r Request
		err := json.Unmarshal(raw, &r)
		return r, err
	}, nil)
	c.Cancels = lenientMap(v, "cancels", &c.Problems, func(raw json.RawMessage) (time.Time, error) {
		var t time.Time
		err := json.Unmarshal(raw, &t)
		return t, err
	}, func() (time.Time, string) {
		at := modifyTime(v)
		return at, " (counted as a cancel at " + at.Format(time.RFC3339) + ", when the variable was last written)"
	})
	c.Releases = lenientMap(v, "releases", &c.Problems, func(raw json.RawMessage) (time.Time, error) {
		var t time.Time
		err := json.Unmarshal(raw, &t)
		return t, err
	}, nil)
	c.legacy = HostControls(c)
	return c
}

// lenientMap decodes the JSON object in item k entry by entry; an entry that
// cannot be read is skipped, or replaced by orElse when given.
func lenientMap[T any](v *api.Variable, k string, problems *[]string, decode func(json.RawMessage) (T, error), orElse func() (T, string)) map[string]T {
	s := v.Items[k]
	if s == "" {
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		*problems = append(*problems, fmt.Sprintf("variable %s: item %q: %v: skipped", v.Path, k, err))
		return nil
	}
	out := make(map[string]T, len(raw))
	for host, r := range raw {
		val, err := decode(r)
		if err == nil {
			out[host] = val
			continue
		}
		msg := fmt.Sprintf("variable %s: item %q: entry %q: %v", v.Path, k, host, err)
		if orElse != nil {
			val, why := orElse()
			out[host] = val
			msg += why
		} else {
			msg += ": skipped"
		}
		*problems = append(*problems, msg)
	}
	return out
}

// HostControls splits the control state by host.
func HostControls(c Control) map[string]HostControl {
	out := map[string]HostControl{}
	get := func(h string) HostControl {
		hc, ok := out[h]
		if !ok {
			hc.Host = h
		}
		return hc
	}
	for h, r := range c.Requests {
		hc := get(h)
		r := r
		hc.Request = &r
		out[h] = hc
	}
	for h, t := range c.Cancels {
		hc := get(h)
		hc.CancelAt, hc.CanceledBy = t, c.CanceledBy[h]
		out[h] = hc
	}
	for h, t := range c.Releases {
		hc := get(h)
		hc.ReleaseAt, hc.ReleasedBy = t, c.ReleasedBy[h]
		out[h] = hc
	}
	for h, a := range c.Approvals {
		hc := get(h)
		a := a
		hc.Approval = &a
		out[h] = hc
	}
	return out
}

// merge puts a host's control state into c: each entry the host's variable has
// replaces the one c had (from the control variable), the others stay.
func (c *Control) merge(h HostControl) {
	if h.Request != nil {
		if c.Requests == nil {
			c.Requests = map[string]Request{}
		}
		c.Requests[h.Host] = *h.Request
	}
	if !h.CancelAt.IsZero() {
		if c.Cancels == nil {
			c.Cancels = map[string]time.Time{}
		}
		c.Cancels[h.Host] = h.CancelAt
		setBy(&c.CanceledBy, h.Host, h.CanceledBy)
	}
	if !h.ReleaseAt.IsZero() {
		if c.Releases == nil {
			c.Releases = map[string]time.Time{}
		}
		c.Releases[h.Host] = h.ReleaseAt
		setBy(&c.ReleasedBy, h.Host, h.ReleasedBy)
	}
	if h.Approval != nil {
		if c.Approvals == nil {
			c.Approvals = map[string]Approval{}
		}
		c.Approvals[h.Host] = *h.Approval
	}
}

// setBy notes who made host's entry in *m ("" removes a name an older entry left).
func setBy(m *map[string]string, host, by string) {
	if by == "" {
		delete(*m, host)
		return
	}
	if *m == nil {
		*m = map[string]string{}
	}
	(*m)[host] = by
}

type cachedControl struct {
	hc       HostControl
	problems []string
}

// readControl reads the control variable and every per-host control variable,
// merged; an entry of the per-host variable wins over the same entry left in the
// control variable.
func (s *Store) readControl(ctx context.Context) (Control, error) {
	var c Control
	v, _, err := s.read(ctx, s.controlPath(), 0, 0)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return Control{}, err
	default:
		c = decodeControlLenient(v)
	}
	metas, _, err := s.list(ctx, s.requestsPrefix(), 0, 0)
	if err != nil {
		return Control{}, err
	}
	metas = slices.DeleteFunc(metas, func(m *api.VariableMetadata) bool { return s.isRequestsMarker(m.Path) })
	sort.Slice(metas, func(i, j int) bool { return metas[i].Path < metas[j].Path })
	c.hostIdx = map[string]uint64{}
	var ccs []cachedControl
	err = refresh(ctx, s, &s.controls, metas, func(v *api.Variable) cachedControl {
		hc, problems := decodeHostControl(v)
		return cachedControl{hc: hc, problems: problems}
	}, func(cc cachedControl) { ccs = append(ccs, cc) })
	if err != nil {
		return Control{}, err
	}
	for _, cc := range ccs {
		c.Problems = append(c.Problems, cc.problems...)
		c.hostIdx[cc.hc.Host] = cc.hc.ModifyIndex
		if cc.hc.newer {
			if c.newerHosts == nil {
				c.newerHosts = map[string]bool{}
			}
			c.newerHosts[cc.hc.Host] = true
		}
		c.merge(cc.hc)
	}
	return c, nil
}

// updateControl applies fn to the merged control state and writes what changed:
// each host whose entries changed to its own variable (deleted when empty; its
// entries in the control variable are then dropped from it), and the pause flag to
// the control variable. Every write is check-and-set; on a conflict it all starts
// again from a fresh read.
func (s *Store) updateControl(ctx context.Context, fn func(*Control) error) (Control, error) {
	for attempt := 0; ; attempt++ {
		c, err := s.readControl(ctx)
		if err != nil {
			return Control{}, err
		}
		before := HostControls(c)
		paused, reason, at, by := c.Paused, c.PauseReason, c.PausedAt, c.PausedBy
		until, groups, hosts := c.PausedUntil, maps.Clone(c.GroupPauses), maps.Clone(c.HostPauses)
		c.GroupPauses, c.HostPauses = maps.Clone(c.GroupPauses), maps.Clone(c.HostPauses)
		c.Requests, c.Cancels, c.Releases = maps.Clone(c.Requests), maps.Clone(c.Cancels), maps.Clone(c.Releases)
		c.CanceledBy, c.ReleasedBy = maps.Clone(c.CanceledBy), maps.Clone(c.ReleasedBy)
		c.Approvals = maps.Clone(c.Approvals)
		if err := fn(&c); err != nil {
			return Control{}, err
		}
		pauseChanged := paused != c.Paused || reason != c.PauseReason || !at.Equal(c.PausedAt) || by != c.PausedBy ||
			!until.Equal(c.PausedUntil) || !maps.Equal(groups, c.GroupPauses) || !maps.Equal(hosts, c.HostPauses)
		err = s.writeControl(ctx, &c, before, pauseChanged)
		if errors.Is(err, ErrConflict) && attempt < 20 {
			continue
		}
		if err != nil {
			return Control{}, err
		}
		return c, nil
	}
}

func (s *Store) writeControl(ctx context.Context, c *Control, before map[string]HostControl, pauseChanged bool) error {
	after := HostControls(*c)
	hosts := map[string]bool{}
	for h := range before {
		hosts[h] = true
	}
	for h := range after {
		hosts[h] = true
	}
	names := make([]string, 0, len(hosts))
	for h := range hosts {
		names = append(names, h)
	}
	sort.Strings(names)
	var moved []string
	for _, h := range names {
		want := after[h]
		want.Host = h
		if want.equal(before[h]) {
			continue
		}
		if c.newerHosts[h] {
			return fmt.Errorf("control entries of %s: %s: %w: not overwritten", h, s.requestPath(h), ErrUnknownVersion)
		}
		if err := s.putHostControl(ctx, want, c.hostIdx[h]); err != nil {
			return err
		}
		if _, ok := c.legacy[h]; ok {
			moved = append(moved, h)
		}
	}
	if !pauseChanged && len(moved) == 0 {
		return nil
	}
	if c.newer {
		return fmt.Errorf("%s: %w: not overwritten", s.controlPath(), ErrUnknownVersion)
	}
	// The per-host variables are written first: a crash (or conflict) before the
	// control variable is written leaves an entry in both places, which reads the
	// same (the per-host variable wins).
	items := controlItems(c, pauseChanged, moved)
	idx, err := s.write(ctx, s.controlPath(), items, c.ModifyIndex)
	if err != nil {
		return err
	}
	c.ModifyIndex = idx
	return nil
}

// putHostControl writes (or deletes, when empty) one host's control variable with
// check-and-set on index (0: it does not exist).
func (s *Store) putHostControl(ctx context.Context, hc HostControl, index uint64) error {
	if hc.empty() {
		if index == 0 {
			return nil
		}
		return s.remove(ctx, s.requestPath(hc.Host), index)
	}
	_, err := s.write(ctx, s.requestPath(hc.Host), hc.items(), index)
	return err
}

// controlItems is the control variable to write: its current items (so that what
// cannot be read is not lost by an unrelated change), with the pause flag when it
// changed and without the entries of the hosts moved to their own variables.
func controlItems(c *Control, pauseChanged bool, moved []string) map[string]string {
	items := maps.Clone(c.raw)
	if items == nil {
		items = map[string]string{}
	}
	if pauseChanged {
		for _, f := range controlCodec.fields {
			delete(items, f.key)
		}
		controlCodec.put(c, items)
	}
	items[versionKey] = strconv.Itoa(controlCodec.version)
	for _, k := range []string{"requests", "cancels", "releases"} {
		var raw map[string]json.RawMessage
		if items[k] == "" || json.Unmarshal([]byte(items[k]), &raw) != nil {
			continue // nothing there, or unreadable: left for control reset
		}
		for _, h := range moved {
			delete(raw, h)
		}
		if len(raw) == 0 {
			delete(items, k)
			continue
		}
		b, _ := json.Marshal(raw)
		items[k] = string(b)
	}
	return items
}

// ResetReport says what ResetControl did.
type ResetReport struct {
	Moved   []string // hosts whose entries moved from the control variable to their own
	Dropped []string // problems: entries (or variables) that could not be read, removed
}

// ResetControl repairs the control state: every readable entry of the control
// variable moves to its host's variable (an entry already there wins), per-host
// variables that cannot be read are deleted, and the control variable keeps only
// the pause flag. A pause flag that cannot be read becomes "paused", with a reason
// that says so: resume by hand once the state is checked.
func (s *Store) ResetControl(ctx context.Context) (ResetReport, error) {
	for attempt := 0; ; attempt++ {
		rep, err := s.resetControl(ctx)
		if errors.Is(err, ErrConflict) && attempt < 20 {
			continue
		}
		return rep, err
	}
}

func (s *Store) resetControl(ctx context.Context) (ResetReport, error) {
	var rep ResetReport
	c, err := s.readControl(ctx)
	if err != nil {
		return rep, err
	}
	if c.newer {
		return rep, fmt.Errorf("%s: %w: reset it with the rollboot that wrote it", s.controlPath(), ErrUnknownVersion)
	}
	rep.Dropped = append(rep.Dropped, c.Problems...)
	merged := HostControls(c)
	for _, h := range sortedKeys(c.legacy) {
		if c.newerHosts[h] {
			rep.Dropped = append(rep.Dropped, fmt.Sprintf("entries of %s in %s: %s was written by a newer rollboot", h, s.controlPath(), s.requestPath(h)))
			continue
		}
		if err := s.putHostControl(ctx, merged[h], c.hostIdx[h]); err != nil {
			return rep, err
		}
		rep.Moved = append(rep.Moved, h)
	}
	// Per-host variables with problems are rewritten with what could be read.
	s.controls.mu.Lock()
	var broken []cachedControl
	for _, e := range s.controls.m {
		if len(e.val.problems) > 0 {
			broken = append(broken, e.val)
		}
	}
	s.controls.mu.Unlock()
	for _, cc := range broken {
		if _, done := c.legacy[cc.hc.Host]; done {
			continue // rewritten above, with what could be read
		}
		if cc.hc.newer {
			continue // written by a newer rollboot: left to it
		}
		if err := s.putHostControl(ctx, cc.hc, cc.hc.ModifyIndex); err != nil {
			return rep, err
		}
	}
	items := controlCodec.encode(c)
	if c.ModifyIndex == 0 && len(c.raw) == 0 {
		return rep, nil // no control variable: nothing to rewrite
	}
	if _, err := s.write(ctx, s.controlPath(), items, c.ModifyIndex); err != nil {
		return rep, err
	}
	return rep, nil
}

func sortedKeys[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
