// Package startpages gives back the pages of a process's binary that only its
// start needed, so that what stays resident is what it runs.
//
// A Go binary runs the initialisation of every package it links before main,
// scattered over its code and data. For each page such code or data touches,
// Linux maps the 64 KB around it that are in the page cache (fault-around), and
// the process keeps them mapped: most of the binary's pages an idle agent held
// were touched once at its start (the figures: docs/performance.md, "The
// agent's memory"). Release unmaps the resident pages of the read-only files
// the process maps (its binary, and the C library in a cgo build) with madvise
// MADV_DONTNEED; the ones the process uses again come back at their next
// touch from the page cache, where the others stay, for the kernel to reclaim
// first. Nothing is lost: only mappings no one can write and that hold no
// private copy of a page (Anonymous: 0 in smaps) are released, so every page
// reads back as it was.
package startpages

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// span is one mapping that may be released: its address range and how much
// of it is resident.
type span struct {
	start, end uintptr
	rss        int64 // bytes
}

// releasable reads smaps (the format of /proc/<pid>/smaps) and returns the
// mappings whose pages can be dropped and read back unchanged: backed by a
// file, not writable, not locked, and holding no anonymous page (a private
// copy, which dropping would lose, such as a relocated page of a
// position-independent binary or a debugger's breakpoint).
func releasable(smaps io.Reader) ([]span, error) {
	var out []span
	var cur *span
	keep := false
	flush := func() {
		if cur != nil && keep {
			out = append(out, *cur)
		}
		cur, keep = nil, false
	}
	// Only the lines that matter are split: a process has hundreds of
	// mappings of twenty-odd lines each, and what this allocates stays
	// resident until the next collection, which may be an hour away.
	sc := bufio.NewScanner(smaps)
	for line := 1; sc.Scan(); line++ {
		key, rest, _ := bytes.Cut(sc.Bytes(), []byte(" "))
		if len(key) == 0 {
			continue
		}
		if key[len(key)-1] != ':' { // a mapping: range perms offset dev inode [path]
			flush()
			s, ok, err := mapping(strings.Fields(sc.Text()))
			if err != nil {
				return nil, fmt.Errorf("smaps line %d: %w", line, err)
			}
			cur, keep = &s, ok
			continue
		}
		if cur == nil {
			continue
		}
		value, _, _ := bytes.Cut(bytes.TrimLeft(rest, " "), []byte(" "))
		switch string(key) {
		case "Rss:":
			kb, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("smaps line %d: Rss %q: %w", line, value, err)
			}
			cur.rss = kb * 1024
		case "Anonymous:":
			keep = keep && string(value) == "0"
		case "VmFlags:":
			keep = keep && !slices.Contains(strings.Fields(string(rest)), "lo")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
	return out, nil
}

// mapping parses a mapping's header line, split in fields, and tells whether
// its kind may be released: a file's (its path absolute), readable, not
// writable.
func mapping(f []string) (span, bool, error) {
	if len(f) < 5 {
		return span{}, false, fmt.Errorf("mapping %q: want at least 5 fields", strings.Join(f, " "))
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if !ok || err1 != nil || err2 != nil || end < start {
		return span{}, false, fmt.Errorf("mapping range %q", f[0])
	}
	perms := f[1]
	file := len(f) >= 6 && strings.HasPrefix(f[5], "/")
	return span{start: uintptr(start), end: uintptr(end)},
		file && len(perms) == 4 && perms[0] == 'r' && perms[1] == '-', nil
}
