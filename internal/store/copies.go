package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/nomad/api"
)

// The copies: what a new leader needs to know of every plan and host record
// without reading thousands of variables one by one after a fail-over.
//
//	<prefix>/copies/<n>   written by the coordinator only: copies of plans and
//	                      host records, each with the ModifyIndex it was read
//	                      or written at
//
// An entry says "the variable at this path had these items at this
// ModifyIndex". Nomad gives every write a new, higher Raft index
// (nomad/state/state_store_variables.go varSetTxn sets ModifyIndex to the
// write's index; a deleted and recreated variable gets a new one), so the
// items of a path at one ModifyIndex never change: a new leader lists the
// plans and the records (one request each, GET /v1/vars?prefix=: ModifyIndex
// of every variable, no items), and uses an entry only when the list shows
// the variable at the entry's ModifyIndex; it reads the others one by one,
// as before. An entry can be stale, never wrong: the copies decide nothing a
// read of the variable would not. That holds after a crash at any instant (a
// leader killed between a plan write and the copy of it leaves an entry at
// the old index, which no list matches), and against a stale leader writing
// an old copy late (again an old index).
//
// Trust: only the coordinator's token can write under copies/ (the agents
// write hosts/ only: deploy/acl/rollboot-agent.policy.hcl), so a host cannot
// put words in another's mouth through them; an entry of a host record is
// that host's claim, as the record itself is, and is checked as a record is.
//
// Writes: the entries are spread over shards by a hash of their path, each
// under Nomad's limit on a variable (64 KiB of keys and values:
// nomad/structs/variables.go maxVariableSize), compressed. A shard is written
// again only when copiesStale of its entries are out of date, so a rollout
// costs a shard write per several rebooted hosts and an idle cluster none;
// what a new leader still reads one by one is at most copiesStale per shard,
// and the hosts under way.

func (s *Store) copiesPrefix() string      { return s.prefix + "/copies/" }
func (s *Store) copyPath(shard int) string { return s.copiesPrefix() + strconv.Itoa(shard) }

const (
	// copiesStale: a shard is written again once this many of its entries
	// of hosts at rest (atRest) are out of date (changed, new, or gone), or a
	// quarter of its entries in a small cluster (at least copiesStaleMin: a
	// new leader of a cluster that small reads what is stale in a round trip
	// or two, and rewriting a shard for every few changes would cost the
	// cluster's writes more than it saves).
	copiesStale    = 32
	copiesStaleMin = 8
	// copiesPerShard: the entries a shard is laid out for at first (about 60
	// bytes each once compressed); a shard that does not fit copiesMaxBytes
	// doubles the shards.
	copiesPerShard = 768
	// copiesMaxBytes: a shard's items at most (Nomad refuses a variable
	// over 65,536 bytes of keys and values).
	copiesMaxBytes = 60000
	copiesVersion  = 1
	// copiesMaxShards bounds the shards (LoadCopies reads no more).
	copiesMaxShards = 1 << 16
	copiesItem      = "copies"
)

// copyBook is what the coordinator knows of the plans and records it read or
// wrote (cur), and of what each shard of the copies holds (shards): written
// by the store's reads and writes of plans and records, read by WriteCopies.
type copyBook struct {
	mu sync.Mutex
	on bool // KeepCopies: only the coordinator keeps the book
	// cur: every plan and usable record by path relative to the prefix, at
	// the ModifyIndex it was last read or written.
	cur map[string]bookEntry
	// gen counts the changes to cur and to shards; checked: the gen
	// WriteCopies last found nothing due at.
	gen, checked uint64
	shards       []shardState // len: the shards' count (0: not laid out yet)
	// loaded: the entries of the copies last read (LoadCopies), by path,
	// until the plans and the records they serve have been read; waiting:
	// the folders ("plan/", "hosts/") whose read has not taken them yet.
	loaded  map[string]copyEntry
	waiting map[string]bool
	// used and listed: since LoadCopies, the plans and records listed, and
	// those of them that needed no read (CopiesUsed).
	used, listed int
}

type bookEntry struct {
	index uint64
	plan  *Plan
	host  *HostRecord
}

func (e bookEntry) items() map[string]string {
	if e.plan != nil {
		return e.plan.items()
	}
	return e.host.items()
}

// shardState is what one shard's variable holds, as this store last read or
// wrote it.
type shardState struct {
	known bool              // read or written by this store
	index uint64            // its ModifyIndex (0: absent)
	held  map[string]uint64 // path -> the ModifyIndex of its entry
}

// copyEntry is one entry of a shard, as stored.
type copyEntry struct {
	Path  string            `json:"p"` // relative to the prefix: "plan/<host>", "hosts/<host>"
	Index uint64            `json:"i"`
	Items map[string]string `json:"v"`
}

// KeepCopies makes the store keep the book of the plans and records it reads
// and writes, for WriteCopies: the coordinator's store does, no other.
func (s *Store) KeepCopies() {
	s.copies.mu.Lock()
	s.copies.on = true
	s.copies.mu.Unlock()
}

func (s *Store) relative(path string) string { return strings.TrimPrefix(path, s.prefix+"/") }

// noteCopy records that the variable at path is at index with the value of
// plan or host (one of them; neither: it is gone or unusable, not copied).
func (s *Store) noteCopy(path string, index uint64, plan *Plan, host *HostRecord) {
	b := &s.copies
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.on {
		return
	}
	rel := s.relative(path)
	if plan == nil && host == nil {
		if _, ok := b.cur[rel]; ok {
			delete(b.cur, rel)
			b.gen++
		}
		return
	}
	if e, ok := b.cur[rel]; ok && e.index == index {
		return
	}
	if b.cur == nil {
		b.cur = map[string]bookEntry{}
	}
	b.cur[rel] = bookEntry{index: index, plan: plan, host: host}
	b.gen++
}

// forgetCopies drops from the book the paths under dir ("plan/") that keep
// does not name.
func (s *Store) forgetCopies(dir string, keep func(rel string) bool) {
	b := &s.copies
	b.mu.Lock()
	defer b.mu.Unlock()
	for rel := range b.cur {
		if strings.HasPrefix(rel, dir) && !keep(rel) {
			delete(b.cur, rel)
			b.gen++
		}
	}
}

// LoadCopies reads the copies (a list, then every shard side by side), keeps
// their entries for the next read of every plan (PlansChecked) and of the
// records (HostsIn), which use an entry in place of a read where the list
// shows the variable at the entry's index, and learns what each shard holds.
// A shard that cannot be decoded is skipped (its entries are read one by one).
func (s *Store) LoadCopies(ctx context.Context) error {
	metas, _, err := s.list(ctx, s.copiesPrefix(), 0, 0)
	if err != nil {
		return err
	}
	var paths []string
	count := 0
	for _, m := range metas {
		n, err := strconv.Atoi(strings.TrimPrefix(m.Path, s.copiesPrefix()))
		if err != nil || n < 0 || n >= copiesMaxShards {
			continue // not one of ours
		}
		paths = append(paths, m.Path)
		count = max(count, n+1)
	}
	vars, err := s.readEach(ctx, paths)
	if err != nil {
		return err
	}
	loaded := map[string]copyEntry{}
	shards := make([]shardState, count)
	for i, v := range vars {
		n, _ := strconv.Atoi(strings.TrimPrefix(paths[i], s.copiesPrefix()))
		if v == nil {
			shards[n] = shardState{known: true}
			continue
		}
		entries, err := decodeCopies(v.Items)
		st := shardState{known: true, index: v.ModifyIndex, held: map[string]uint64{}}
		if err == nil {
			for _, e := range entries {
				loaded[e.Path] = e
				st.held[e.Path] = e.Index
			}
		}
		shards[n] = st
	}
	b := &s.copies
	b.mu.Lock()
	defer b.mu.Unlock()
	b.loaded = loaded
	b.waiting = map[string]bool{"plan/": true, "hosts/": true}
	b.used, b.listed = 0, 0
	if len(b.shards) < len(shards) {
		b.shards = append(b.shards, make([]shardState, len(shards)-len(b.shards))...)
	}
	for n, st := range shards {
		if st.known {
			b.shards[n] = st
		}
	}
	b.gen++
	return nil
}

// takeLoaded returns the loaded entries under dir ("plan/", "hosts/"), by
// path relative to the prefix, and forgets them; nil when no LoadCopies
// waits for this read.
func (s *Store) takeLoaded(dir string) map[string]copyEntry {
	b := &s.copies
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.waiting[dir] {
		return nil
	}
	delete(b.waiting, dir)
	out := map[string]copyEntry{}
	for rel, e := range b.loaded {
		if strings.HasPrefix(rel, dir) {
			out[rel] = e
			delete(b.loaded, rel)
		}
	}
	return out
}

// countUse adds to the plans and records listed since LoadCopies, and to
// those that needed no read.
func (s *Store) countUse(used, listed int) {
	b := &s.copies
	b.mu.Lock()
	b.used += used
	b.listed += listed
	b.mu.Unlock()
}

// CopiesUsed returns how many plans and records were listed since LoadCopies,
// and how many of them needed no read thanks to the copies.
func (s *Store) CopiesUsed() (used, listed int) {
	b := &s.copies
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.listed
}

// copied returns the variable at path as the entry of loaded shows it, when
// the list shows it at the same index (m.ModifyIndex); nil otherwise.
func (s *Store) copied(loaded map[string]copyEntry, m *api.VariableMetadata) *api.Variable {
	e, ok := loaded[s.relative(m.Path)]
	if !ok || e.Index != m.ModifyIndex || e.Index == 0 {
		return nil
	}
	return &api.Variable{Namespace: m.Namespace, Path: m.Path, ModifyIndex: e.Index, CreateIndex: m.CreateIndex, Items: e.Items}
}

// WriteCopies writes every shard with at least copiesStale entries out of
// date, one after another, and returns how many it wrote. Nothing is written
// unless KeepCopies was called. A shard that lost a write to another writer
// (a CAS conflict) is taken as that writer left it and written next time.
func (s *Store) WriteCopies(ctx context.Context) (int, error) {
	due := s.dueShards()
	written := 0
	var errs error
	for _, d := range due {
		wrote, err := s.writeShard(ctx, d)
		if wrote {
			written++
		}
		errs = errors.Join(errs, err)
		if s.relaidOut(d.shards) {
			break // laid out anew: the next WriteCopies writes the new layout
		}
	}
	return written, errs
}

// dueShard is a shard to write: its number, the variable's index as known
// (CAS), and its entries' paths and values (encoded outside the book's lock:
// the values are never changed, only replaced); shards: the count of the
// shards it is one of.
type dueShard struct {
	n      int
	index  uint64
	paths  []string
	vals   []bookEntry
	shards int
}

// relaidOut reports whether the shards are no longer n.
func (s *Store) relaidOut(n int) bool {
	s.copies.mu.Lock()
	defer s.copies.mu.Unlock()
	return len(s.copies.shards) != n
}

// entries encodes the shard's entries.
func (d dueShard) entries() []copyEntry {
	out := make([]copyEntry, len(d.paths))
	for i, rel := range d.paths {
		out[i] = copyEntry{Path: rel, Index: d.vals[i].index, Items: d.vals[i].items()}
	}
	return out
}

// dueShards lays the shards out (at first, or doubled when one does not fit)
// and returns those with copiesStale entries out of date, encoded.
func (s *Store) dueShards() []dueShard {
	b := &s.copies
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.on || b.gen == b.checked {
		return nil
	}
	// As many shards as copiesPerShard entries each need, doubled as the
	// cluster grows (and when one does not fit: writeShard).
	n := max(1, len(b.shards))
	for n*copiesPerShard < len(b.cur) && n < copiesMaxShards {
		n *= 2
	}
	if n > len(b.shards) {
		b.shards = append(b.shards, make([]shardState, n-len(b.shards))...)
	}
	members := make([][]string, len(b.shards))
	for rel := range b.cur {
		i := shardOf(rel, len(b.shards))
		members[i] = append(members[i], rel)
	}
	var due []dueShard
	for i, st := range b.shards {
		stale := 0
		for _, rel := range members[i] {
			if st.held[rel] != b.cur[rel].index && b.atRest(rel) {
				stale++
			}
		}
		for rel := range st.held {
			if e, ok := b.cur[rel]; !ok || shardOf(rel, len(b.shards)) != i || e.index == 0 {
				stale++
			}
		}
		if stale < min(copiesStale, max(copiesStaleMin, len(members[i])/4)) {
			continue
		}
		slices.Sort(members[i])
		d := dueShard{n: i, index: st.index, paths: members[i], vals: make([]bookEntry, len(members[i])), shards: len(b.shards)}
		for k, rel := range members[i] {
			d.vals[k] = b.cur[rel]
		}
		due = append(due, d)
	}
	if len(due) == 0 {
		b.checked = b.gen
	}
	return due
}

// atRest reports whether the host of the entry at rel is at rest: its plan
// (as the book has it) is idle, pending or backing off, or it has none. A
// host under way changes its plan and record every few seconds; copying
// each change would cost a shard write per change, and a new leader reads
// the few hosts under way (the groups' budgets bound them) one by one. Their
// entries are copied with the rest when a shard is written.
func (b *copyBook) atRest(rel string) bool {
	host := rel[strings.IndexByte(rel, '/')+1:]
	p := b.cur["plan/"+host].plan
	if p == nil {
		return true
	}
	switch p.Phase {
	case PhaseIdle, PhasePending, PhaseBackoff:
		return true
	}
	return false
}

// shardOf is the shard of the entry at rel among n.
func shardOf(rel string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(rel))
	return int(h.Sum32() % uint32(n))
}

// writeShard writes one due shard with CAS and reports whether it did; one
// too large doubles the shards instead (the next WriteCopies writes the new
// layout).
func (s *Store) writeShard(ctx context.Context, d dueShard) (bool, error) {
	entries := d.entries()
	items, err := encodeCopies(entries)
	if err != nil {
		return false, err
	}
	b := &s.copies
	if len(items[copiesItem])+len(copiesItem)+len(versionKey)+1 > copiesMaxBytes {
		b.mu.Lock()
		if len(b.shards) == d.shards && len(b.shards) < copiesMaxShards {
			b.shards = append(b.shards, make([]shardState, len(b.shards))...)
			b.gen++
		}
		b.mu.Unlock()
		return false, nil
	}
	path := s.copyPath(d.n)
	idx, err := s.writeCopy(ctx, path, items, d)
	b.mu.Lock()
	defer b.mu.Unlock()
	if d.n >= len(b.shards) {
		return false, err
	}
	var conflict *api.Variable
	var cas api.ErrCASConflict
	switch {
	case errors.As(err, &cas):
		conflict = cas.Conflict
	case err != nil:
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	st := shardState{known: true, index: idx, held: map[string]uint64{}}
	if conflict != nil {
		// Taken as the other writer left it: its entries are as good as
		// ours, each checked against the list when used.
		st.index = conflict.ModifyIndex
		if entries, err := decodeCopies(conflict.Items); err == nil {
			for _, e := range entries {
				st.held[e.Path] = e.Index
			}
		}
	} else {
		for _, e := range entries {
			st.held[e.Path] = e.Index
		}
	}
	b.shards[d.n] = st
	b.gen++
	return conflict == nil, nil
}

// writeCopy writes a shard with CAS on the index known; a shard not known
// yet is created (cas=0): if it exists, the conflict says what it holds.
func (s *Store) writeCopy(ctx context.Context, path string, items map[string]string, d dueShard) (uint64, error) {
	v := &api.Variable{Namespace: s.namespace, Path: path, Items: items, ModifyIndex: d.index}
	var (
		out *api.Variable
		err error
	)
	if d.index == 0 {
		out, _, err = s.vars.CheckedCreate(v, s.w(ctx))
	} else {
		out, _, err = s.vars.CheckedUpdate(v, s.w(ctx))
	}
	if err != nil {
		return 0, err
	}
	return out.ModifyIndex, nil
}

// encodeCopies is a shard's items: the entries as JSON, gzipped, in base64.
func encodeCopies(entries []copyEntry) (map[string]string, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if err := json.NewEncoder(zw).Encode(entries); err != nil {
		return nil, fmt.Errorf("encode copies: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("encode copies: %w", err)
	}
	return map[string]string{versionKey: strconv.Itoa(copiesVersion), copiesItem: base64.StdEncoding.EncodeToString(buf.Bytes())}, nil
}

// decodeCopies reads a shard's entries; a shard of a version this rollboot
// does not know is refused whole.
func decodeCopies(items map[string]string) ([]copyEntry, error) {
	if v := items[versionKey]; v != strconv.Itoa(copiesVersion) {
		return nil, fmt.Errorf("%w: copies version %q", ErrUnknownVersion, CleanText(v))
	}
	raw, err := base64.StdEncoding.DecodeString(items[copiesItem])
	if err != nil {
		return nil, fmt.Errorf("decode copies: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("decode copies: %w", err)
	}
	data, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("decode copies: %w", err)
	}
	var entries []copyEntry
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("decode copies: %w", err)
	}
	return entries, nil
}
