// Package policy holds rollboot's pure decisions: which group a Nomad node
// belongs to, whether a maintenance window is open and for how long, how
// many hosts of a group may be out of service at once, which pending hosts
// may start now, and how long to back off after a failure.
//
// Nothing here does I/O or reads the clock: the current time and the
// observed cluster state are passed in, and decisions are returned as plain
// values. The coordinator loads state, calls these functions and applies
// the result to Nomad.
package policy
