package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/nomad/api"
)

// ApplyEnv fills the nomad block from the environment variables of the
// Nomad CLI, for each setting that the configuration file did not set:
//
//	NOMAD_ADDR            nomad.address
//	NOMAD_TOKEN           nomad.token
//	NOMAD_REGION          nomad.region
//	NOMAD_NAMESPACE       nomad.namespace
//	NOMAD_CACERT          nomad.ca_cert
//	NOMAD_CLIENT_CERT     nomad.client_cert
//	NOMAD_CLIENT_KEY      nomad.client_key
//	NOMAD_TLS_SERVER_NAME nomad.tls_server_name
//	NOMAD_SKIP_VERIFY     nomad.tls_skip_verify
//
// Empty variables are ignored. getenv is usually os.Getenv. A value that
// cannot be parsed (NOMAD_SKIP_VERIFY=maybe) is an error, not ignored.
// Values taken from the environment are reported in Compile's errors
// under the variable's name. Call ApplyEnv before applying flags: it
// overwrites any value that did not come from the file.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	n := &c.Nomad
	strs := []struct {
		env, key string
		dst      *string
	}{
		{"NOMAD_ADDR", "address", &n.Address},
		{"NOMAD_REGION", "region", &n.Region},
		{"NOMAD_NAMESPACE", "namespace", &n.Namespace},
		{"NOMAD_CACERT", "ca_cert", &n.CACert},
		{"NOMAD_CLIENT_CERT", "client_cert", &n.ClientCert},
		{"NOMAD_CLIENT_KEY", "client_key", &n.ClientKey},
		{"NOMAD_TLS_SERVER_NAME", "tls_server_name", &n.TLSServerName},
	}
	for _, s := range strs {
		if v := getenv(s.env); v != "" && !c.fromFile("nomad."+s.key) {
			*s.dst = v
			c.setPos("nomad."+s.key, hcl.Range{Filename: "$" + s.env})
		}
	}
	if v := getenv("NOMAD_TOKEN"); v != "" && !c.fromFile("nomad.token") {
		n.Token = Secret(v)
		c.setPos("nomad.token", hcl.Range{Filename: "$NOMAD_TOKEN"})
	}
	if v := getenv("NOMAD_SKIP_VERIFY"); v != "" && !c.fromFile("nomad.tls_skip_verify") {
		rng := hcl.Range{Filename: "$NOMAD_SKIP_VERIFY"}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Errors{{Range: rng, Msg: fmt.Sprintf("nomad.tls_skip_verify: invalid boolean %q: use true or false", v)}}
		}
		n.TLSSkipVerify = b
		c.setPos("nomad.tls_skip_verify", rng)
	}
	return nil
}

// fromFile reports whether the value at key was written in a file.
func (c *Config) fromFile(key string) bool {
	r, ok := c.pos[key]
	return ok && r.Filename != "" && !strings.HasPrefix(r.Filename, "$")
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
			ClientCert:    n.ClientCert,
			ClientKey:     n.ClientKey,
			TLSServerName: n.TLSServerName,
			Insecure:      n.TLSSkipVerify,
		},
	}
}
