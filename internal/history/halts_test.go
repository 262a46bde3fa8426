package history

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
)

func TestWriteHalts(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	if err := WriteHalts(&b, nil); err != nil || b.Len() != 0 {
		t.Fatalf("no log wrote %q, %v", b.String(), err)
	}
	log := []policy.HaltEvent{{At: at, Scope: "web", Event: "halted", Reason: "2 failed cycles"},
		{At: at.Add(time.Hour), Scope: "web", Event: "resumed", By: "token ops"}}
	if err := WriteHalts(&b, log); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Halts and resumes", `2026-12-06T10:00:00Z  group "web"  halted   2 failed cycles`, `group "web"  resumed  token ops`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
}
