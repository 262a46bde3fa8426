package store

import (
	"strings"
	"unicode/utf8"
)

// A host record is a claim (shared DESIGN.md, "Trust"), and so is every word
// of it: the text a host writes in its own words (why it needs a reboot, its
// errors, why it holds) goes into plans, history, every log line, status, the
// status page and notifications. So it is cleaned as it is read (and as it is
// written, so that what an agent writes reads back Equal): no control
// characters and at most MaxTextBytes. Host names and IDs are no free text:
// they are checked where they are used.

// MaxTextBytes is the most bytes of one free-text item of a host record, the
// cut marker included.
const MaxTextBytes = 256

// CutMarker ends a text cut to MaxTextBytes.
const CutMarker = "…"

// unreadableText stands for a non-empty text made of control characters only:
// cleaning never turns a text that says something (a discovery error holds the
// host) into one that says nothing.
const unreadableText = "\uFFFD"

// cleanText cleans the record's free text (a cleaner, codec.go). The failure is
// replaced, not changed, when it needs cleaning: a record being encoded is a
// copy whose Failure is still its caller's.
func (r *HostRecord) cleanText() {
	for _, s := range []*string{&r.Reason, &r.Fingerprint, &r.DetectError, &r.DiscoverError, &r.HoldReason, &r.AgentVersion, &r.AgentJob} {
		*s = CleanText(*s)
	}
	if f := r.Failure; f != nil && (!isClean(f.Step) || !isClean(f.Message)) {
		c := *f
		c.Step, c.Message = CleanText(c.Step), CleanText(c.Message)
		r.Failure = &c
	}
}

// CleanText returns s fit for one line of a log, a table or a message: ANSI
// escape sequences, control characters (C0, DEL, C1) and the Unicode
// bidirectional controls removed, each run of line breaks and tabs made one
// space, invalid UTF-8 made U+FFFD, and cut on a character boundary to at most
// MaxTextBytes, ending with CutMarker. A clean text is returned as it is, and
// cleaning a cleaned text changes nothing. A non-empty text stays non-empty
// (U+FFFD when nothing was left).
func CleanText(s string) string {
	if isClean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(min(len(s), MaxTextBytes))
	spaced := false // the last thing written is a line break's space
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == 0x1b || r == 0x9b || r == 0x9d || r == 0x90 || r == 0x98 || r == 0x9e || r == 0x9f:
			n = escapeLen(s[i:])
		case isBreak(r):
			if !spaced {
				b.WriteByte(' ')
			}
			spaced = true
		case r == utf8.RuneError && n == 1:
			b.WriteString(unreadableText)
			spaced = false
		case !isControl(r):
			b.WriteString(s[i : i+n])
			spaced = false
		}
		i += n
	}
	out := b.String()
	if out == "" {
		return unreadableText
	}
	return cut(out)
}

// isClean: s has nothing CleanText changes.
func isClean(s string) bool {
	if len(s) > MaxTextBytes {
		return false
	}
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || isControl(r) || isBreak(r) {
			return false
		}
		i += n
	}
	return true
}

// isBreak: a line break or tab, shown as a space.
func isBreak(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// isControl: a control character (C0, DEL, C1) or a bidirectional control
// (which reorders how the text around it is shown), removed.
func isControl(r rune) bool {
	switch {
	case r < 0x20 || r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c || r == 0x200e || r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// escapeLen returns the length of the escape sequence s starts with (ESC or a
// C1 introducer): a CSI sequence up to its final byte, a control string (OSC,
// DCS, SOS, PM, APC: a terminal title, a hyperlink) up to BEL or its string
// terminator, or ESC and the bytes that complete it. A sequence cut short by
// the end of s runs to the end.
func escapeLen(s string) int {
	r, n := utf8.DecodeRuneInString(s)
	intro := r // C1 introducer, or the ESC sequence's second byte
	if r == 0x1b {
		if len(s) < 2 {
			return 1
		}
		if s[1] < 0x20 || s[1] > 0x7e {
			return 1 // no sequence: ESC alone
		}
		intro, n = rune(s[1]), 2
		if intro >= 0x40 && intro <= 0x5f {
			intro += 0x40 // ESC [ is CSI (0x9b), ESC ] is OSC (0x9d), ...
		}
	}
	switch intro {
	case 0x9b: // CSI: parameter and intermediate bytes, then one final byte
		for n < len(s) {
			c := s[n]
			n++
			if c >= 0x40 && c <= 0x7e || c < 0x20 {
				break
			}
		}
		return n
	case 0x9d, 0x90, 0x98, 0x9e, 0x9f: // a control string: up to BEL or ST
		for n < len(s) {
			switch {
			case s[n] == 0x07:
				return n + 1
			case s[n] == 0x1b && n+1 < len(s) && s[n+1] == '\\':
				return n + 2
			case strings.HasPrefix(s[n:], "\u009c"):
				return n + len("\u009c")
			}
			n++
		}
		return n
	}
	if r != 0x1b {
		return n // another C1 control alone
	}
	// ESC, intermediate bytes, one final byte (ESC ( B, ESC 7, ESC c, ...).
	for n < len(s) && s[n-1] >= 0x20 && s[n-1] <= 0x2f {
		n++
	}
	return n
}

// cut returns s cut on a character boundary to at most MaxTextBytes, ending
// with CutMarker when it was cut.
func cut(s string) string {
	if len(s) <= MaxTextBytes {
		return s
	}
	end := MaxTextBytes - len(CutMarker)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + CutMarker
}
