package main

import (
	"bytes"
	"log/slog"
	"runtime"
	"strings"
	"testing"
)

func TestAgentProcs(t *testing.T) {
	tests := []struct {
		name              string
		candidate, envSet bool
		want              int
	}{
		{name: "a plain agent runs on one processor", want: 1},
		{name: "a coordinator candidate keeps Go's default", candidate: true, want: 0},
		{name: "GOMAXPROCS in the environment wins", envSet: true, want: 0},
		{name: "a candidate with GOMAXPROCS set keeps it", candidate: true, envSet: true, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := agentProcs(tt.candidate, tt.envSet); got != tt.want {
				t.Errorf("agentProcs(%t, %t) = %d, want %d", tt.candidate, tt.envSet, got, tt.want)
			}
		})
	}
}

// limitAgentProcs sets this process's GOMAXPROCS and says so in the log; with
// GOMAXPROCS in the environment it leaves it alone. Not parallel: GOMAXPROCS
// is the whole test process's.
func TestLimitAgentProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })

	runtime.GOMAXPROCS(4)
	var logs bytes.Buffer
	limitAgentProcs(false, slog.New(slog.NewTextHandler(&logs, nil)))
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS %d after a plain agent's limit, want 1", got)
	}
	if !strings.Contains(logs.String(), "gomaxprocs=1") {
		t.Errorf("the log does not say so: %q", logs.String())
	}

	runtime.GOMAXPROCS(4)
	logs.Reset()
	t.Setenv("GOMAXPROCS", "4")
	limitAgentProcs(false, slog.New(slog.NewTextHandler(&logs, nil)))
	if got := runtime.GOMAXPROCS(0); got != 4 || logs.Len() != 0 {
		t.Errorf("with GOMAXPROCS=4 set: GOMAXPROCS %d, logs %q; want 4 and nothing logged", got, logs.String())
	}
}
