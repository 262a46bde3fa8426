package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/version"
)

func newVersionCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the rollboot version, commit, build date and Go version",
		Args:  noArgs("version"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printVersion(cmd.OutOrStdout(), version.Get(), asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON object")
	return cmd
}

// printVersion prints info like `nomad version`: the version on the first line,
// then one line per detail; or, with asJSON, one JSON object.
func printVersion(w io.Writer, info version.Info, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	unknown := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	commit := unknown(info.Commit)
	if info.Modified {
		commit += " (modified)"
	}
	fmt.Fprintf(w, "rollboot %s\n", info.Version)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Revision\t%s\n", commit)
	fmt.Fprintf(tw, "BuildDate\t%s\n", unknown(info.Date))
	fmt.Fprintf(tw, "GoVersion\t%s\n", info.GoVersion)
	fmt.Fprintf(tw, "Platform\t%s\n", info.Platform)
	return tw.Flush()
}
