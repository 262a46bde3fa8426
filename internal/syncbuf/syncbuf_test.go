package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers and a reader at once (run with -race): every write lands whole.
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if _, err := b.Write([]byte("line\n")); err != nil {
					t.Error(err)
				}
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if n := strings.Count(b.String(), "line\n"); n != 800 || len(b.Bytes()) != 800*5 {
		t.Errorf("%d lines, %d bytes, want 800 and 4000", n, len(b.Bytes()))
	}
}
