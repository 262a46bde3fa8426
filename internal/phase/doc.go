// Package phase is the phase machine of a host's reboot cycle: a pure function
// (Step) of one host's plan, what was observed of it and the time, returning
// the next plan, the Nomad operations to apply and when to decide again.
package phase
