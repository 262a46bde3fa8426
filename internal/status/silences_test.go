package status

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

type fakeSilences map[string]string

func (f fakeSilences) Silences(context.Context) (map[string]string, uint64, error) { return f, 1, nil }

// The silences kept are shown with how long each has left, and a failed write
// with its error: a silence failure holds nothing, so status is where it shows.
func TestStatusShowsSilences(t *testing.T) {
	now := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	var v View
	readSilences(context.Background(), &v, fakeSilences{
		"web-2": `{"id":"abc","ends_at":"2026-01-05T10:04:00Z"}`,
		"web-1": `{"error":"create: POST http://am/api/v2/silences: connection refused","error_at":"2026-01-05T09:59:50Z"}`,
		"web-3": `not json`,
	})
	var b bytes.Buffer
	if err := WriteText(&b, v, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Silences (Alertmanager, while hosts are out):",
		"web-1  -           -        create: POST http://am/api/v2/silences: connection refused",
		"web-2  abc         in 4m0s  -",
		"Silences: the silence kept for web-3 does not decode",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}
