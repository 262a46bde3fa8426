//go:build !norollbootsim

package main

import "github.com/spf13/cobra"

// simCommands are the commands that embed the Nomad emulator: `demo`, `sim`, `bench` and
// `sim-ctl`. A release build may leave them out with -tags norollbootsim
// (simcmds_none.go), and with them the emulator's code (docs/release.md). The
// demo and the benchmark log as lf says.
func simCommands(lf *logFlags) []*cobra.Command {
	return []*cobra.Command{newDemoCmd(lf), newSimCmd(), newSimCtlCmd(), newBenchCmd(lf)}
}
