package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/nomad/api"
)

// ApplyEnv fills the nomad block from the environment variables of the
// Nomad CLI (NOMAD_ADDR, NOMAD_TOKEN, ...: each setting's env in the nomad
// block's table), for each setting that the configuration file did not set.
// Empty variables are ignored. getenv is usually os.Getenv. A value that
// cannot be parsed (NOMAD_SKIP_VERIFY=maybe) is an error, not ignored.
// Values taken from the environment are reported in Compile's errors
// under the variable's name. Call ApplyEnv before applying flags: it
// overwrites any value that did not come from the file.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	n := reflect.ValueOf(&c.Nomad).Elem()
	for _, row := range nomadTable.settings {
		if row.env == "" {
			continue
		}
		v, key := getenv(row.env), "nomad."+row.name
		if v == "" || c.fromFile(key) {
			continue
		}
		rng := hcl.Range{Filename: "$" + row.env}
		if err := setFromEnv(fieldOf(n, row.field), v); err != nil {
			return Errors{{Range: rng, Msg: fmt.Sprintf("%s: %v", key, err)}}
		}
		c.setPos(key, rng)
		delete(c.bad, key) // the value in place is the environment's
	}
	return nil
}

// setFromEnv stores the value of an environment variable in dst.
func setFromEnv(dst reflect.Value, v string) error {
	if dst.Kind() != reflect.Bool {
		dst.SetString(v)
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("invalid boolean %q: use true or false", v)
	}
	dst.SetBool(b)
	return nil
}

// fromFile reports whether the value at key was written in a file.
func (c *Config) fromFile(key string) bool {
	r, ok := c.pos[key]
	return ok && r.Filename != "" && !strings.HasPrefix(r.Filename, "$") && !strings.HasPrefix(r.Filename, "-")
}

// APIConfig returns the configuration of a nomad/api client for this
// connection: address, token, region, namespace and TLS. It does not read
// the environment; use ApplyEnv for that.
func (n *NomadConfig) APIConfig() *api.Config {
	return &api.Config{
		Address:   n.Address,
		SecretID:  n.Token.Reveal(),
		Region:    n.Region,
		Namespace: n.Namespace,
		TLSConfig: &api.TLSConfig{
			CACert:        n.CACert,
			CAPath:        n.CAPath,
			ClientCert:    n.ClientCert,
			ClientKey:     n.ClientKey,
			TLSServerName: n.TLSServerName,
			Insecure:      n.TLSSkipVerify,
		},
	}
}
