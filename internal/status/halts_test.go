package status

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
)

type haltStore struct {
	hs  policy.HaltState
	err error
}

func (s haltStore) Halts(context.Context) (policy.HaltState, uint64, error) { return s.hs, 1, s.err }

// A halted scope is shown at the top of the status, with its failures and the
// resume that lifts it; a halt state that cannot be read is said there too.
func TestReadHalts(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	hs := policy.HaltState{Halts: map[string]policy.Halt{
		"web": {Scope: "web", Since: t0, Failures: []policy.Failure{{Host: "web-1", Kind: policy.FailStuck}, {Host: "web-2", Kind: policy.FailRebootFailed}}},
		"db":  {Scope: "db", Since: t0, Failures: []policy.Failure{{Host: "db-1", Kind: policy.FailStuck}}},
	}}
	tests := []struct {
		name   string
		st     haltStore
		scopes []string
		banner string
	}{
		{name: "two groups halted, by name", st: haltStore{hs: hs}, scopes: []string{"db", "web"},
			banner: `HALTED: group "db" halted at 2026-12-06T10:00:00Z: 1 failed cycle (db-1 stuck); rollboot resume -group db lifts it`},
		{name: "nothing halted", st: haltStore{}},
		{name: "the halt state cannot be read", st: haltStore{err: errors.New("500")},
			banner: "HALT STATE UNKNOWN: cannot read the failure budgets' halt state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v View
			readHalts(context.Background(), &v, tt.st)
			var scopes []string
			for _, h := range v.Halts {
				scopes = append(scopes, h.Scope)
			}
			if strings.Join(scopes, ",") != strings.Join(tt.scopes, ",") {
				t.Errorf("halts %q, want %q", scopes, tt.scopes)
			}
			var b bytes.Buffer
			if err := WriteText(&b, v, t0); err != nil {
				t.Fatal(err)
			}
			if first, _, _ := strings.Cut(b.String(), "\n"); tt.banner != "" && !strings.HasPrefix(first, tt.banner) {
				t.Errorf("first line %q, want %q", first, tt.banner)
			}
			if tt.banner == "" && strings.Contains(b.String(), "HALT") {
				t.Errorf("a halt shown:\n%s", b.String())
			}
		})
	}
}
