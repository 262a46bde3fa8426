package denied

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/health"
)

func TestIs(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"nomad permission denied", errors.New("Unexpected response code: 403 (Permission denied)"), true},
		{"wrapped", fmt.Errorf("read rollboot/plan/a: %w", errors.New("Unexpected response code: 403 (ACL token not found)")), true},
		{"expired", errors.New("Unexpected response code: 403 (ACL token expired)"), true},
		{"consul's", errors.New("Unexpected response code: 403 (Permission denied: token with AccessorID 'x' lacks permission 'operator:read')"), false},
		{"a 500", errors.New("Unexpected response code: 500 (No cluster leader)"), false},
		{"a refusal that names its need", &health.DeniedError{Product: health.Nomad, Op: "transfer leadership", Need: "a management token",
			Err: errors.New("Unexpected response code: 403 (Permission denied)")}, false},
		{"none", nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Is(tt.err); got != tt.want {
				t.Errorf("Is(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// A refusal is logged once, at error level, naming the policy file, until its
// text changes or an hour passes; other records pass unchanged.
func TestHandlerLogsARefusalOncePerChange(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	log := slog.New(New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}),
		"deploy/acl/rollboot-coordinator.policy.hcl", func() time.Time { return now })).With("host", "c1")
	denied := errors.New("Unexpected response code: 403 (Permission denied)")
	lines := func() []string {
		s := strings.TrimSpace(buf.String())
		buf.Reset()
		if s == "" {
			return nil
		}
		return strings.Split(s, "\n")
	}
	log.Warn("reconcile failed", "err", denied)
	got := lines()
	if len(got) != 1 || !strings.Contains(got[0], "level=ERROR") || !strings.Contains(got[0], "deploy/acl/rollboot-coordinator.policy.hcl") ||
		!strings.Contains(got[0], "host=c1") || !strings.Contains(got[0], `msg="reconcile failed"`) {
		t.Fatalf("first refusal logged as %q", got)
	}
	for range 5 {
		now = now.Add(time.Minute)
		log.Warn("reconcile failed", "err", denied)
	}
	if got := lines(); got != nil {
		t.Errorf("repeats logged: %q", got)
	}
	log.Warn("coordinator election: acquire failed", "err", fmt.Errorf("lock rollboot/leader: %w", errors.New("Unexpected response code: 403 (ACL token not found)")))
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], "ACL token not found") {
		t.Errorf("a new refusal: %q", got)
	}
	log.Warn("reconcile failed", "err", errors.New("Unexpected response code: 500 (No cluster leader)"))
	log.Debug("not shown")
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], "level=WARN") || strings.Contains(got[0], "fix=") {
		t.Errorf("other records: %q", got)
	}
	now = now.Add(Remind)
	log.Warn("reconcile failed", "err", denied)
	if got := lines(); len(got) != 1 {
		t.Errorf("after an hour the refusal is logged again once: %q", got)
	}
}
