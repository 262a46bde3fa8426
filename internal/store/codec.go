package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Nomad variable items are string maps. Each record type has one codec: the list
// of its fields, each naming its item and how it is written and read. Encoding
// and decoding both walk that list, so adding a field to a record is one line in
// its codec. Items are read in list order, and a strict record reports the first
// item it cannot read.
//
// Every record carries the version of its schema in the item "version"; a record
// without one is version 1. A change that a reader not knowing it would misread
// bumps the codec's version, and a reader refuses a record of a version newer
// than its own, whole (ErrUnknownVersion): it never half-reads one.

// versionKey is the item that holds a record's schema version.
const versionKey = "version"

// ErrUnknownVersion means a record was written with a schema version this
// rollboot does not know (a newer rollboot wrote it): it is refused, not half-read.
var ErrUnknownVersion = errors.New("record version unknown to this rollboot")

// field is one item of a record R.
type field[R any] struct {
	key string
	// put writes the item into items (or nothing, for a value stored as absent).
	put func(r *R, items map[string]string)
	// get reads the item from items into r, reporting what it cannot read.
	get func(r *R, items map[string]string, bad func(key string, err error))
}

// codec is the schema of a record R: its version and its fields.
type codec[R any] struct {
	version int
	fields  []field[R]
	// writeVersion, when set, is the version a record is written as (at
	// most version): a record that uses nothing added since an older
	// version is written as that one, so that older readers still read it.
	writeVersion func(*R) int
}

// itemError is an item that cannot be read.
type itemError struct {
	key string
	err error
}

// cleaner is a record with free text, which its host writes in its own words
// (HostRecord, freetext.go): it is cleaned as the record is decoded, so that
// nothing downstream sees it raw, and as it is encoded, so that a record and
// the record it reads back as are stored as the same items (Equal).
type cleaner interface{ cleanText() }

func clean[R any](r *R) {
	if c, ok := any(r).(cleaner); ok {
		c.cleanText()
	}
}

func (c codec[R]) encode(r R) map[string]string {
	v := c.version
	if c.writeVersion != nil {
		v = c.writeVersion(&r)
	}
	items := map[string]string{versionKey: strconv.Itoa(v)}
	clean(&r)
	c.put(&r, items)
	return items
}

// put writes r's fields into items, without the version item.
func (c codec[R]) put(r *R, items map[string]string) {
	for _, f := range c.fields {
		f.put(r, items)
	}
}

// decode reads every field it can, cleans the free text of a cleaner, and
// returns the items it cannot read, in field order. A record of an unknown
// version is refused whole (an ErrUnknownVersion).
func (c codec[R]) decode(items map[string]string) (R, []itemError, error) {
	var r R
	if err := c.checkVersion(items[versionKey]); err != nil {
		return r, nil, err
	}
	var bad []itemError
	report := func(key string, err error) { bad = append(bad, itemError{key, cleanError(err)}) }
	for _, f := range c.fields {
		f.get(&r, items, report)
	}
	clean(&r)
	return r, bad, nil
}

func (c codec[R]) checkVersion(v string) error {
	if v == "" {
		return nil // written before records carried a version: version 1
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil || n < 1:
		return fmt.Errorf("%w: version %q cannot be read (this rollboot reads versions 1 to %d)", ErrUnknownVersion, CleanText(v), c.version)
	case n > c.version:
		return fmt.Errorf("%w: version %d is newer than this rollboot reads (1 to %d): written by a newer rollboot", ErrUnknownVersion, n, c.version)
	}
	return nil
}

// cleanError is err with its text cleaned (CleanText): a parse error quotes the
// item it could not read, which its writer chose, into logs and status. It
// still wraps err.
func cleanError(err error) error {
	if text := err.Error(); !isClean(text) {
		return &cleanedError{text: CleanText(text), err: err}
	}
	return err
}

type cleanedError struct {
	text string
	err  error
}

func (e *cleanedError) Error() string { return e.text }
func (e *cleanedError) Unwrap() error { return e.err }

// decodeStrict decodes the items of the variable at path: an unknown version or
// an item that cannot be read is an error (the first such item), returned with
// what could be read.
func decodeStrict[R any](c codec[R], path string, items map[string]string) (R, error) {
	r, bad, err := c.decode(items)
	if err != nil {
		return r, fmt.Errorf("variable %s: %w", path, err)
	}
	if len(bad) > 0 {
		return r, fmt.Errorf("variable %s: item %q: %w", path, bad[0].key, bad[0].err)
	}
	return r, nil
}

// ---- fields -----------------------------------------------------------------

// parsed is a field whose item is a string, absent when empty: put formats the
// value ("" to leave the item out), parse reads a present item.
func parsed[R, T any](key string, at func(*R) *T, format func(T) string, parse func(string) (T, error)) field[R] {
	return field[R]{
		key: key,
		put: func(r *R, items map[string]string) {
			if s := format(*at(r)); s != "" {
				items[key] = s
			}
		},
		get: func(r *R, items map[string]string, bad func(string, error)) {
			s := items[key]
			if s == "" {
				return
			}
			v, err := parse(s)
			if err != nil {
				bad(key, err)
				return
			}
			*at(r) = v
		},
	}
}

// text is a string item, absent when empty.
func text[R any](key string, at func(*R) *string) field[R] {
	return parsed(key, at, func(s string) string { return s }, func(s string) (string, error) { return s, nil })
}

// flag is a boolean item: "true" or "false" when always, else present only when true.
func flag[R any](key string, at func(*R) *bool, always bool) field[R] {
	return parsed(key, at, func(b bool) string {
		if !b && !always {
			return ""
		}
		return strconv.FormatBool(b)
	}, strconv.ParseBool)
}

// number is an integer item, absent when 0 unless always.
func number[R any](key string, at func(*R) *int, always bool) field[R] {
	return parsed(key, at, func(n int) string {
		if n == 0 && !always {
			return ""
		}
		return strconv.Itoa(n)
	}, strconv.Atoi)
}

// counter is an unsigned integer item, absent when 0.
func counter[R any](key string, at func(*R) *uint64) field[R] {
	return parsed(key, at, func(n uint64) string {
		if n == 0 {
			return ""
		}
		return strconv.FormatUint(n, 10)
	}, func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) })
}

// instant is a time item in RFC 3339 (UTC, nanoseconds), absent when zero
// unless always.
func instant[R any](key string, at func(*R) *time.Time, always bool) field[R] {
	return parsed(key, at, func(t time.Time) string {
		if t.IsZero() && !always {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}, parseInstant)
}

// parseInstant reads an RFC 3339 time that can be written back: its UTC year
// has four digits.
func parseInstant(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err == nil {
		if y := t.UTC().Year(); y < 0 || y > 9999 {
			return time.Time{}, fmt.Errorf("time %q is out of range", s)
		}
	}
	return t, err
}

// list is a comma-separated list item, absent when empty; sorted when stored
// if sorted (a set).
func list[R any](key string, at func(*R) *[]string, sorted bool) field[R] {
	return parsed(key, at, func(l []string) string {
		if sorted {
			l = slices.Sorted(slices.Values(l))
		}
		return strings.Join(l, ",")
	}, func(s string) ([]string, error) { return strings.Split(s, ","), nil })
}

// object is a JSON item, absent when empty (no elements). It is decoded into the
// field as it is (json.Unmarshal), so an item that fails half-way keeps what it
// read.
func object[R, T any](key string, at func(*R) *T, empty func(T) bool) field[R] {
	return field[R]{
		key: key,
		put: func(r *R, items map[string]string) {
			if v := *at(r); !empty(v) {
				b, _ := json.Marshal(v)
				items[key] = string(b)
			}
		},
		get: func(r *R, items map[string]string, bad func(string, error)) {
			if s := items[key]; s != "" {
				if err := json.Unmarshal([]byte(s), at(r)); err != nil {
					bad(key, err)
				}
			}
		},
	}
}

// part is a sub-record T stored flat in its parent's items, present (non-nil)
// when its item key is: when it is non-empty, or, if keyOnly, whenever the item
// exists.
func part[R, T any](key string, keyOnly bool, at func(*R) **T, fields []field[T]) field[R] {
	return field[R]{
		key: key,
		put: func(r *R, items map[string]string) {
			if t := *at(r); t != nil {
				for _, f := range fields {
					f.put(t, items)
				}
			}
		},
		get: func(r *R, items map[string]string, bad func(string, error)) {
			s, ok := items[key]
			if !ok || s == "" && !keyOnly {
				return
			}
			t := new(T)
			for _, f := range fields {
				f.get(t, items, bad)
			}
			*at(r) = t
		},
	}
}

func noElements[T any](s []T) bool                  { return len(s) == 0 }
func noEntries[K comparable, V any](m map[K]V) bool { return len(m) == 0 }
