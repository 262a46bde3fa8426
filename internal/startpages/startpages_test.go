package startpages

import (
	"strconv"
	"strings"
	"testing"
)

// smapsEntry is one mapping of a smaps fixture.
func smapsEntry(header string, rssKB, anonKB int, flags string) string {
	return header + "\n" +
		"Size:               1024 kB\n" +
		"Rss:                " + strconv.Itoa(rssKB) + " kB\n" +
		"Anonymous:          " + strconv.Itoa(anonKB) + " kB\n" +
		"VmFlags: " + flags + "\n"
}

func TestReleasable(t *testing.T) {
	tests := []struct {
		name  string
		smaps string
		want  []span
		err   string
	}{
		{name: "the binary's code and constants",
			smaps: smapsEntry("00400000-00db1000 r-xp 00000000 fd:01 123 /usr/bin/rollboot", 8576, 0, "rd ex mr mw me") +
				smapsEntry("00db1000-018d0000 r--p 009b1000 fd:01 123 /usr/bin/rollboot", 8188, 0, "rd mr mw me"),
			want: []span{{0x400000, 0xdb1000, 8576 << 10}, {0xdb1000, 0x18d0000, 8188 << 10}}},
		{name: "a replaced binary is still its file",
			smaps: smapsEntry("00400000-00db1000 r-xp 00000000 fd:01 123 /usr/bin/rollboot (deleted)", 100, 0, "rd ex"),
			want:  []span{{0x400000, 0xdb1000, 100 << 10}}},
		{name: "writable data would lose what the process wrote",
			smaps: smapsEntry("018d0000-01982000 rw-p 014d0000 fd:01 123 /usr/bin/rollboot", 648, 40, "rd wr mr mw me ac")},
		{name: "a read-only mapping holding private copies (relocations, breakpoints)",
			smaps: smapsEntry("00db1000-018d0000 r--p 009b1000 fd:01 123 /usr/bin/rollboot", 8188, 4, "rd mr mw me")},
		{name: "locked pages stay",
			smaps: smapsEntry("00400000-00db1000 r-xp 00000000 fd:01 123 /usr/bin/rollboot", 8576, 0, "rd ex mr mw me lo")},
		{name: "the heap, the stack and the kernel's pages are not files",
			smaps: smapsEntry("10d63800000-10d64000000 r--p 00000000 00:00 0", 2256, 2256, "rd mr mw me ac") +
				smapsEntry("7ffe1b497000-7ffe1b4b8000 rw-p 00000000 00:00 0 [stack]", 16, 16, "rd wr") +
				smapsEntry("7f6ef572c000-7f6ef572e000 r-xp 00000000 00:00 0 [vdso]", 8, 0, "rd ex")},
		{name: "not readable",
			smaps: smapsEntry("7f0000000000-7f0000001000 ---p 00000000 fd:01 9 /usr/lib/x.so", 0, 0, "mr mw me")},
		{name: "a malformed mapping says where",
			smaps: smapsEntry("00400000-00db1000 r-xp 00000000 fd:01 123 /usr/bin/rollboot", 1, 0, "rd") + "zzzz r-xp 0 fd:01 1 /x\n",
			err:   "smaps line 6: mapping range \"zzzz\""},
		{name: "a malformed size says where",
			smaps: "00400000-00db1000 r-xp 00000000 fd:01 123 /usr/bin/rollboot\nRss: many kB\n",
			err:   "smaps line 2: Rss \"many\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := releasable(strings.NewReader(tt.smaps))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("span %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}
