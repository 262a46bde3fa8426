package status

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// TableWidth is the width the status table fits in: a terminal split in two,
// or a window of 100 columns, reads it without wrapping.
const TableWidth = 100

// maxWhyLines is how many lines of the table a host's "Why" may take; the
// rest is in `rollboot status HOST` and `-json`.
const maxWhyLines = 3

// column bounds: a longer host or group name is cut (with "…"), and the
// "Why" column keeps at least minWhy columns.
const (
	maxHostWidth  = 48
	maxGroupWidth = 20
	minWhy        = 30
	gap           = 2
	// minBesideWhy: with less room than this beside the other columns, the
	// reasons go below each row, indented by belowIndent.
	minBesideWhy = 50
	belowIndent  = 4
)

// writeTable writes the hosts as a table of TableWidth columns: Host, Group,
// Phase, Since and Why, the last wrapped over up to maxWhyLines lines, beside
// the others or, when long names leave it too little room, below each row.
// It reports whether a reason or a name was cut.
func writeTable(w io.Writer, hosts []Host, now time.Time) (cut bool) {
	hostW, groupW := len("Host"), len("Group")
	phaseW, sinceW := len("Phase"), len("Since")
	rows := make([][4]string, len(hosts))
	for i, h := range hosts {
		rows[i] = [4]string{h.Host, orDash(h.Group), h.State(), since(h.Since, now)}
		hostW = max(hostW, utf8.RuneCountInString(h.Host))
		groupW = max(groupW, utf8.RuneCountInString(rows[i][1]))
		phaseW = max(phaseW, utf8.RuneCountInString(rows[i][2]))
		sinceW = max(sinceW, utf8.RuneCountInString(rows[i][3]))
	}
	hostW, groupW = min(hostW, maxHostWidth), min(groupW, maxGroupWidth)
	whyW := max(TableWidth-hostW-groupW-phaseW-sinceW-4*gap, minWhy)
	line := func(cells [4]string, why string) {
		var b strings.Builder
		for i, wd := range []int{hostW, groupW, phaseW, sinceW} {
			c, short := fit(cells[i], wd)
			cut = cut || short
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", wd-utf8.RuneCountInString(c)+gap))
		}
		b.WriteString(why)
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	if whyW < minBesideWhy {
		// Long names leave too little room beside them: each host's reason
		// goes below its row, across the table.
		line([4]string{"Host", "Group", "Phase", "Since"}, "")
		fmt.Fprintln(w, strings.Repeat(" ", belowIndent)+"Why")
		for i, h := range hosts {
			line(rows[i], "")
			text := why(h)
			if text == "-" {
				continue
			}
			lines, short := wrap(text, TableWidth-belowIndent, maxWhyLines)
			cut = cut || short
			for _, l := range lines {
				fmt.Fprintln(w, strings.Repeat(" ", belowIndent)+l)
			}
		}
		return cut
	}
	line([4]string{"Host", "Group", "Phase", "Since"}, "Why")
	for i, h := range hosts {
		lines, short := wrap(why(h), whyW, maxWhyLines)
		cut = cut || short
		line(rows[i], lines[0])
		for _, l := range lines[1:] {
			line([4]string{}, l)
		}
	}
	return cut
}

// since is how long ago t was, short: "45s", "12m", "5h12m", "3d".
func since(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := max(now.Sub(t), 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// fit cuts s to width runes, ending with "…" when cut.
func fit(s string, width int) (string, bool) {
	if utf8.RuneCountInString(s) <= width {
		return s, false
	}
	r := []rune(s)
	return string(r[:width-1]) + "…", true
}

// wrap breaks s into lines of at most width runes at spaces (a word longer
// than width is cut), at most n lines, the last ending with "…" when
// something was left out.
func wrap(s string, width, n int) ([]string, bool) {
	var lines []string
	cur := ""
	for _, word := range strings.Fields(s) {
		for utf8.RuneCountInString(word) > width {
			if cur != "" {
				lines, cur = append(lines, cur), ""
			}
			r := []rune(word)
			lines, word = append(lines, string(r[:width])), string(r[width:])
		}
		switch {
		case cur == "":
			cur = word
		case utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(word) <= width:
			cur += " " + word
		default:
			lines, cur = append(lines, cur), word
		}
	}
	if cur != "" || len(lines) == 0 {
		lines = append(lines, cur)
	}
	if len(lines) <= n {
		return lines, false
	}
	lines = lines[:n]
	last, _ := fit(lines[n-1]+" …", width)
	if !strings.HasSuffix(last, "…") {
		last += "…"
	}
	lines[n-1] = last
	return lines, true
}
