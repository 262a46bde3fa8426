package main

import (
	"bytes"
	"log/slog"
	"os"
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

// The agent runs on one processor from its start; once configured, a plain
// agent stays on it and says so in the log, and a candidate gets Go's default
// back. With GOMAXPROCS in the environment nothing changes. Not parallel:
// GOMAXPROCS is the whole test process's.
func TestStartAgentProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	env, envSet := os.LookupEnv("GOMAXPROCS")
	if envSet {
		os.Unsetenv("GOMAXPROCS")
		t.Cleanup(func() { os.Setenv("GOMAXPROCS", env) })
	}

	for _, candidate := range []bool{false, true} {
		runtime.GOMAXPROCS(4)
		var logs bytes.Buffer
		apply := startAgentProcs()
		if got := runtime.GOMAXPROCS(0); got != 1 {
			t.Errorf("GOMAXPROCS %d while the configuration is read, want 1", got)
		}
		apply(candidate, slog.New(slog.NewTextHandler(&logs, nil)))
		want, wantLog := 1, "gomaxprocs=1"
		if candidate {
			want, wantLog = def, ""
		}
		if got := runtime.GOMAXPROCS(0); got != want || !strings.Contains(logs.String(), wantLog) || (wantLog == "" && logs.Len() > 0) {
			t.Errorf("candidate %t: GOMAXPROCS %d, logs %q; want %d and %q", candidate, got, logs.String(), want, wantLog)
		}
	}

	runtime.GOMAXPROCS(4)
	t.Setenv("GOMAXPROCS", "4")
	var logs bytes.Buffer
	startAgentProcs()(false, slog.New(slog.NewTextHandler(&logs, nil)))
	if got := runtime.GOMAXPROCS(0); got != 4 || logs.Len() != 0 {
		t.Errorf("with GOMAXPROCS=4 set: GOMAXPROCS %d, logs %q; want 4 and nothing logged", got, logs.String())
	}
}
