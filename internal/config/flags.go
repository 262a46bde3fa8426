package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// NomadFlag is a command-line flag of the Nomad CLI that sets a setting of the
// nomad block: -address, -token, -region, -namespace, -ca-cert, -ca-path,
// -client-cert, -client-key, -tls-server-name and -tls-skip-verify, named as
// the nomad CLI names them.
type NomadFlag struct {
	Name    string // the flag, without its dash
	Setting string // the nomad block's setting
	Env     string // the environment variable the flag overrides
	Bool    bool
}

// NomadFlags lists the flags of the nomad block's settings, in the table's
// order: each setting that has an environment variable has a flag.
func NomadFlags() []NomadFlag {
	var out []NomadFlag
	typ := reflect.TypeFor[NomadConfig]()
	for _, row := range nomadTable.settings {
		if row.env == "" {
			continue
		}
		f, _ := typ.FieldByName(row.field)
		out = append(out, NomadFlag{Name: strings.ReplaceAll(row.name, "_", "-"), Setting: row.name, Env: row.env,
			Bool: f.Type.Kind() == reflect.Bool})
	}
	return out
}

// ApplyNomadFlags sets the nomad block's settings given on the command line,
// by setting name ("address", "tls_skip_verify"; a boolean as "true" or
// "false"). Call it after ApplyEnv: a flag wins over the file and the
// environment. Compile's errors about such a value name the flag, e.g.
// "-namespace: nomad.namespace: ...".
func (c *Config) ApplyNomadFlags(set map[string]string) error {
	n := reflect.ValueOf(&c.Nomad).Elem()
	var errs Errors
	for _, row := range nomadTable.settings {
		v, ok := set[row.name]
		if !ok {
			continue
		}
		key := "nomad." + row.name
		rng := hcl.Range{Filename: "-" + strings.ReplaceAll(row.name, "_", "-")}
		if err := setFromEnv(fieldOf(n, row.field), v); err != nil {
			errs = append(errs, &Error{Range: rng, Msg: fmt.Sprintf("%s: %v", key, err)})
			continue
		}
		c.setPos(key, rng)
		delete(c.bad, key) // the value in place is the flag's
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
}
