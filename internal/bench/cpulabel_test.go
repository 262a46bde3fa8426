package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"strings"
	"sync"
	"testing"
	"time"
)

// spin keeps a CPU busy for d of wall time.
func spin(d time.Duration) int {
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		n++
	}
	return n
}

// The CPU of the goroutines labelled, and of the goroutines they start, is
// told apart from the rest of the process's.
func TestLabelledCPU(t *testing.T) {
	p, err := startCPUProfile()
	if err != nil {
		t.Skipf("no CPU profile: %v", err)
	}
	// A second profile cannot start while one runs: the bench's -cpu-profile
	// leaves the rollout's CPU unmeasured, and says so.
	if _, err := startCPUProfile(); err == nil {
		t.Error("a second CPU profile started beside the first")
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		withCPULabel(context.Background(), "coordinator", func(context.Context) {
			var inner sync.WaitGroup
			inner.Add(1)
			go func() { defer inner.Done(); spin(200 * time.Millisecond) }() // inherits the label
			spin(200 * time.Millisecond)
			inner.Wait()
		})
	}()
	go func() { defer wg.Done(); spin(200 * time.Millisecond) }()
	wg.Wait()
	labelled, total, err := p.stop("coordinator")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("labelled %s of %s", labelled, total)
	// On a loaded machine the spinning goroutines get less than their wall
	// time: only the proportions are checked, loosely.
	if labelled <= 0 || total < labelled || labelled == total {
		t.Errorf("labelled %s of %s: want some of it, not all", labelled, total)
	}
}

func TestLabelledCPUMalformed(t *testing.T) {
	if _, _, err := labelledCPU(bytes.NewReader([]byte("not a profile")), cpuLabel, "coordinator"); err == nil || !strings.Contains(err.Error(), "CPU profile") {
		t.Errorf("err %v, want one about the profile", err)
	}
}

// A profile whose sample values are packed (as other writers than Go's
// runtime encode them) reads the same.
func TestLabelledCPUPacked(t *testing.T) {
	varint := func(v uint64) []byte { return binary.AppendUvarint(nil, v) }
	field := func(num int, b []byte) []byte { // length-delimited
		return append(append(varint(uint64(num)<<3|2), varint(uint64(len(b)))...), b...)
	}
	num := func(n int, v uint64) []byte { return append(varint(uint64(n)<<3), varint(v)...) }
	strs := []string{"", "samples", "count", "cpu", "nanoseconds", cpuLabel, "coordinator"}
	var msg []byte
	msg = append(msg, field(1, append(num(1, 1), num(2, 2)...))...) // samples/count
	msg = append(msg, field(1, append(num(1, 3), num(2, 4)...))...) // cpu/nanoseconds
	packed := append(varint(1), varint(10_000_000)...)
	msg = append(msg, field(2, append(field(2, packed), field(3, append(num(1, 5), num(2, 6)...))...))...) // labelled
	msg = append(msg, field(2, field(2, append(varint(1), varint(30_000_000)...)))...)                     // not
	for _, s := range strs {
		msg = append(msg, field(6, []byte(s))...)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(msg)
	zw.Close()
	labelled, total, err := labelledCPU(&buf, cpuLabel, "coordinator")
	if err != nil || labelled != 10*time.Millisecond || total != 40*time.Millisecond {
		t.Errorf("labelled %s of %s (%v), want 10ms of 40ms", labelled, total, err)
	}
}
