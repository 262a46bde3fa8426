// Package allocstatus says what an allocation's statuses mean, as Nomad's
// structs.Allocation methods do, for readers that have an API allocation or
// its list stub.
package allocstatus

import "github.com/hashicorp/nomad/api"

// ClientTerminal reports whether an allocation of that client status has been
// stopped by its client: complete, failed or lost (nomad/structs
// Allocation.ClientTerminalStatus). Its tasks have exited, and it uses no room.
func ClientTerminal(client string) bool {
	switch client {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return true
	}
	return false
}

// Terminal reports whether an allocation of those statuses is stopped or
// stopping: asked to stop or evicted, or stopped by its client (nomad/structs
// Allocation.TerminalStatus).
func Terminal(desired, client string) bool {
	return desired == api.AllocDesiredStatusStop || desired == api.AllocDesiredStatusEvict || ClientTerminal(client)
}
