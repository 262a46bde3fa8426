package store

import "slices"

// identical reports whether r and o hold the very same values, ModifyIndex
// aside. Identical records encode to the same items, so Equal is true without
// encoding either: an idle agent compares its record with the one it last
// wrote at every poll (twice a second), and encoding both allocated most of
// what it allocates at rest. Records that are not identical may still be
// Equal (roles in another order, the same instant in another zone): Equal
// then compares their items. Every field of HostRecord but ModifyIndex is
// compared (TestHostIdenticalComparesEveryField).
func (r HostRecord) identical(o HostRecord) bool {
	return r.Host == o.Host && r.NodeID == o.NodeID && r.Hostname == o.Hostname &&
		sameSlice(r.Roles, o.Roles) && r.BootID == o.BootID && r.BootedAt == o.BootedAt &&
		r.RebootRequired == o.RebootRequired && r.Reason == o.Reason && r.RequestedAt == o.RequestedAt &&
		r.Fingerprint == o.Fingerprint &&
		r.RebootingGrant == o.RebootingGrant && r.RebootedGrant == o.RebootedGrant && r.FleetLockID == o.FleetLockID &&
		sameSlice(r.Servers, o.Servers) && r.VaultSealed == o.VaultSealed && r.Group == o.Group &&
		r.AgentVersion == o.AgentVersion && r.DetectError == o.DetectError && r.DiscoverError == o.DiscoverError &&
		r.AgentJob == o.AgentJob && r.HoldReason == o.HoldReason &&
		(r.Failure == o.Failure || r.Failure != nil && o.Failure != nil && *r.Failure == *o.Failure)
}

// sameSlice: the same elements, and both nil or neither.
func sameSlice[E comparable](a, b []E) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}
