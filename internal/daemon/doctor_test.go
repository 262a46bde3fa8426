package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

// The leader logs doctor's findings once, the first time it leads, each at its
// level with its fix: a second term logs nothing more.
func TestLeaderLogsTheChecksOnce(t *testing.T) {
	sim, _ := simtest.Start(t, nomadsim.Config{Clients: 2, NoRawExec: []string{"client-2"}}, nil)
	cfg := compile(t, fmt.Sprintf("nomad { address = %q }\n", sim.Address()))
	var logs syncbuf.Buffer
	checks := &startupChecks{cfg: cfg, log: slog.New(slog.NewTextHandler(&logs, nil))}
	terms := 0
	lead := checks.lead(func(context.Context) error { terms++; return nil })
	for range 2 {
		if err := lead(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	checks.wait()
	out := logs.String()
	if terms != 2 {
		t.Errorf("%d terms ran, want 2", terms)
	}
	for _, want := range []string{
		`level=ERROR msg="start-up check" component=doctor finding="the agents' job default/rollboot is not registered`,
		`level=WARN msg="start-up check" component=doctor finding="node client-2 cannot run the rollboot agent: raw_exec not detected (disabled)" check=drivers subject=client-2 fix=`,
		`msg="start-up checks done (rollboot doctor shows them all)" component=doctor errors=1`,
	} {
		if n := strings.Count(out, want); n != 1 {
			t.Errorf("%q logged %d times, want once:\n%s", want, n, out)
		}
	}
	if strings.Contains(out, `level=INFO msg="start-up check" component=doctor finding="Nomad`) {
		t.Errorf("an OK finding was logged:\n%s", out)
	}
}
