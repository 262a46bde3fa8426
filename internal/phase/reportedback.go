package phase

import "github.com/rollboot/rollboot/internal/store"

// reportedBack says how the host itself reports that it rebooted since its grant
// ("" if it does not): its agent publishes a new boot ID, or, for a FleetLock
// client (whose boot ID the FleetLock server cannot see), the server records
// that the client came back from this grant's reboot (RebootedGrant).
func reportedBack(h *store.HostRecord, p store.Plan) string {
	switch {
	case h == nil:
		return ""
	case h.BootID != p.BootIDAtGrant:
		return "host is back with a new boot ID"
	case p.GrantID != "" && h.RebootedGrant == p.GrantID:
		return "the FleetLock client reports it is back from the reboot"
	}
	return ""
}
