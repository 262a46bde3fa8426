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

// startAgentProcs puts the agent on one processor from its start, so that
// reading the configuration fills no other processor's caches, unless
// GOMAXPROCS is in the environment. The function it returns applies
// agentProcs once the configuration tells whether the agent is a candidate: it
// gives a candidate Go's default back, with its updates when the CPUs the
// process may use change, and logs the one processor of a plain agent.
func startAgentProcs() func(candidate bool, log *slog.Logger) {
	if _, envSet := os.LookupEnv("GOMAXPROCS"); envSet {
		return func(bool, *slog.Logger) {}
	}
	runtime.GOMAXPROCS(1)
	return func(candidate bool, log *slog.Logger) {
		n := agentProcs(candidate, false)
		if n == 0 {
			runtime.SetDefaultGOMAXPROCS()
			return
		}
		runtime.GOMAXPROCS(n)
		log.Info("runtime", "gomaxprocs", n)
	}
}
