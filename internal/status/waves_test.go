package status

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/wave"
)

type fakeWaves struct {
	items map[string]string
	err   error
}

func (f fakeWaves) Waves(context.Context) (map[string]string, uint64, error) {
	return f.items, 1, f.err
}

// A wave held by its canary's failure is said first, unmistakably; a wave
// under way is listed with its canaries; a finished one is left out; a state
// that cannot be read is said (the coordinator then holds).
func TestStatusShowsWaves(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	st := wave.State{Waves: []wave.Wave{
		{Group: "web", Fingerprint: "k1", Seen: t0, Failed: "web-1: stuck: host not back in time", FailedAt: t0,
			Members: []wave.Member{{Host: "web-1", At: t0, Canary: true}}},
		{Group: "db", Fingerprint: "k2", Seen: t0, Completed: 2,
			Members: []wave.Member{{Host: "db-1", At: t0, Canary: true, Done: t0.Add(time.Minute)}}},
		{Group: "batch", Fingerprint: "k3", Seen: t0, Completed: 4, Finished: t0},
	}}
	st.Waves = append(st.Waves, wave.Wave{Group: "web", Fingerprint: "k0", Failed: "web-2: stuck", FailedAt: t0})
	v := View{Hosts: []Host{{Host: "web-3", Group: "web", RebootRequired: true, Fingerprint: "k1"}}}
	readWaves(context.Background(), &v, fakeWaves{items: wave.Items(st)})
	var b bytes.Buffer
	if err := WriteText(&b, v, t0); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`WAVE HELD: group "web", wave k1: canary web-1: stuck: host not back in time`,
		"db     k2    db-1 back at 2026-01-05T10:01:00Z  2            under way",
		"web    k1    web-1                              0            held: canary failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "batch") || strings.Contains(out, "web-2") {
		t.Errorf("status shows a finished wave, or a held one no host needs:\n%s", out)
	}
	v = View{}
	readWaves(context.Background(), &v, fakeWaves{err: errors.New("connection refused")})
	if !strings.Contains(v.WaveProblem, "cannot read the waves") {
		t.Errorf("wave problem %q", v.WaveProblem)
	}
}
