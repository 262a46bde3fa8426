//go:build norollbootsim

package main

import "github.com/spf13/cobra"

// simCommands: none in a build with -tags norollbootsim. Such a binary holds
// no emulator, no demo and no simulated-host control client: only what runs
// against a real cluster.
func simCommands(*logFlags) []*cobra.Command { return nil }
