package startpages

import (
	"bytes"
	"os"
	"testing"
)

// TestReleasableAllocatesLittle reads this process's own smaps: what one read
// allocates stays resident in an idle agent until its next collection.
func TestReleasableAllocatesLittle(t *testing.T) {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	perRead := testing.AllocsPerRun(10, func() {
		if _, err := releasable(bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	})
	lines := 0
	for _, c := range b {
		if c == '\n' {
			lines++
		}
	}
	t.Logf("%.0f allocations for %d lines", perRead, lines)
	if perRead > float64(lines)/4 {
		t.Errorf("%.0f allocations to read %d lines of smaps, want well under one per line", perRead, lines)
	}
}
