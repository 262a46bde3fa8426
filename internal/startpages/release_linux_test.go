package startpages

import (
	"crypto/sha256"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// rssFile reads how much of this process's resident set is file pages.
func rssFile(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("RssFile %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// TestReleaseDropsAndReadsBack releases this test binary's pages: its file
// pages leave the resident set, and what it reads afterwards from them (code
// that runs, tables in read-only data) is what it read before.
func TestReleaseDropsAndReadsBack(t *testing.T) {
	table := func() [32]byte { // read-only data: the Unicode tables
		h := sha256.New()
		for _, r := range unicode.Letter.R16 {
			h.Write([]byte{byte(r.Lo), byte(r.Lo >> 8), byte(r.Hi), byte(r.Hi >> 8)})
		}
		return [32]byte(h.Sum(nil))
	}
	before := table()
	fileBefore := rssFile(t)
	n, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	fileAfter := rssFile(t)
	t.Logf("released %d KB; file pages resident %d KB before, %d KB after", n>>10, fileBefore>>10, fileAfter>>10)
	if n < 1<<20 {
		t.Errorf("released %d bytes, want the test binary's megabytes", n)
	}
	// What reading the status and the test's own code touch again comes back
	// at once, with the 64 KB around each page: less than a quarter here.
	if fileAfter > fileBefore-n/4 {
		t.Errorf("file pages resident: %d bytes before, %d after releasing %d", fileBefore, fileAfter, n)
	}
	if after := table(); after != before {
		t.Error("read-only data read back differently after the release")
	}
}
