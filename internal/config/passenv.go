package config

import (
	"fmt"
	"regexp"
)

// envName is a portable environment variable name (POSIX: letters, digits and
// underscores, not starting with a digit).
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// envNames checks agent.pass_env: each element a variable name, not a
// NAME=VALUE pair or a pattern, pointing at the bad element.
func (v *validator) envNames(key scope, names []string) {
	for i, n := range names {
		if envName.MatchString(n) {
			continue
		}
		v.errorAt(fmt.Sprintf("%s.%d", key.key, i), fmt.Sprintf("%s[%d]", key.name, i),
			"%q is not an environment variable name: write the name alone, such as \"VAULT_TOKEN\" (letters, digits and _, no = and no wildcards)", n)
	}
}
