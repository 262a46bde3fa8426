// Package version holds the rollboot version, set at build time with
// -ldflags "-X github.com/rollboot/rollboot/internal/version.Version=v1.2.3".
package version

// Version is the rollboot version.
var Version = "0.1.0-dev"
