package bench

import (
	"fmt"
	"syscall"
)

// filesPerHost is about how many files a rollout holds open per host, all in
// the bench's process: the host's listener and its agent's one connection to
// it (both ends: agentTransport), with room for the coordinator's and the
// emulator's own. Measured: 3.45 at 300 hosts (7.1 at 1,000 with a
// connection per request in flight over HTTP/1.1).
const filesPerHost = 3.5

// checkOpenFiles fails at once when a rollout of hosts would run out of open
// files (RLIMIT_NOFILE; Go raises the soft limit to the hard one at start):
// past the limit, listeners stop accepting and agents stop connecting, and
// the rollout waits until its timeout.
func checkOpenFiles(hosts int) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil // not known: try
	}
	need := uint64(float64(hosts)*filesPerHost) + 1000
	if lim.Cur < need {
		return fmt.Errorf("a rollout of %d hosts holds about %d files open (%.1f per host: its listener and its agent's connection, in this process) "+
			"and the limit is %d: raise it (ulimit -n, as root) or lower -rollout-max", hosts, need, filesPerHost, lim.Cur)
	}
	return nil
}
