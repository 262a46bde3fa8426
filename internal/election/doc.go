// Package election chooses the one coordinator that leads: a lease on a Nomad
// Variable lock, renewed while it leads and checked before every write it
// fences (CheckLease, LeaseTransport), with quiet standbys that take over.
package election
