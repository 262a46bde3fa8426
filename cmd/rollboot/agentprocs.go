package main

import (
	"log/slog"
	"os"
	"runtime"
)

// agentProcs is how many threads may run Go code at once (GOMAXPROCS) in
// `rollboot agent`, or 0 to keep Go's default (one per CPU the process may use).
// An agent without a coordinator candidate mostly waits on Nomad and ticks
// twice a second: one is plenty, and each processor Go adds keeps memory of
// its own (a cache of heap spans per size of object), so that on a host with
// many CPUs the default costs megabytes (docs/performance.md, "The agent's
// memory"). A candidate may lead and then reads and decides for every host,
// so it keeps the default; so does an agent whose environment sets GOMAXPROCS,
// which Go has already applied.
func agentProcs(candidate, envSet bool) int {
	if candidate || envSet {
		return 0
	}
	return 1
}

// limitAgentProcs applies agentProcs to this process and logs what it set.
func limitAgentProcs(candidate bool, log *slog.Logger) {
	_, envSet := os.LookupEnv("GOMAXPROCS")
	if n := agentProcs(candidate, envSet); n > 0 {
		runtime.GOMAXPROCS(n)
		log.Info("runtime", "gomaxprocs", n)
	}
}
