package config

import (
	"log/slog"
	"strings"
)

// Redacted is what a set Secret prints as.
const Redacted = "<redacted>"

// Secret is a string that never prints: fmt, slog and encoding/json all see
// Redacted (or "" when it is empty). Use Reveal to get the value.
type Secret string

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// String returns Redacted, or "" if the secret is empty.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return Redacted
}

// GoString masks the secret in %#v.
func (s Secret) GoString() string { return `"` + s.String() + `"` }

// LogValue masks the secret in slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON masks the secret in JSON.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// MarshalText masks the secret in encodings that use TextMarshaler.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue gives slog a short summary of the local configuration, the token
// masked.
func (c *Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Group("nomad",
			slog.String("address", c.Nomad.Address),
			slog.String("region", c.Nomad.Region),
			slog.String("namespace", c.Nomad.Namespace),
			slog.Any("token", c.Nomad.Token),
			slog.Bool("tls", c.Nomad.CACert != "" || c.Nomad.ClientCert != "" || strings.HasPrefix(c.Nomad.Address, "https:")),
		),
		slog.String("state_prefix", c.State.Prefix),
		slog.Bool("coordinator", c.Coordinator.Enabled),
		slog.String("reboot_method", c.Agent.Reboot.Method),
		slog.Bool("fleetlock", c.FleetLock.Enabled),
	)
}
