// Command rollboot gives HashiCorp Nomad clusters safe, automatic, rolling reboots.
package main

import (
	"fmt"
	"os"
)

func main() {
	root := newRootCmd()
	root.SetArgs(normalizeArgs(root, os.Args[1:]))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
