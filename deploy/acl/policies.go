// Package acl embeds the ACL policies rollboot ships, the *.policy.hcl files
// of this folder, so that commands compare with (and apply) the files
// themselves. A file's policy is named after it: rollboot-agent.policy.hcl is
// the policy "rollboot-agent".
package acl

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.policy.hcl
var files embed.FS

// suffix ends every policy file's name.
const suffix = ".policy.hcl"

// Names are the shipped policies' names, sorted.
func Names() []string {
	entries, _ := fs.ReadDir(files, ".") // the embedded folder always reads
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), suffix); ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Rules returns the HCL rules of the shipped policy name, and false when no
// such policy is shipped.
func Rules(name string) ([]byte, bool) {
	b, err := files.ReadFile(name + suffix)
	return b, err == nil
}

// File is the policy's file in the repository, for messages.
func File(name string) string { return "deploy/acl/" + name + suffix }
