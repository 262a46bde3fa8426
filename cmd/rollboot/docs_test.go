package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollboot/rollboot/internal/daemon"
)

// docs/install.md states the oldest Nomad rollboot runs against, the one the
// daemons check at start.
func TestInstallDocStatesMinimumNomad(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "(" + strings.TrimSuffix(daemon.MinNomadVersion, ".0") + " or newer)"
	if !strings.Contains(string(b), want) {
		t.Errorf("docs/install.md does not say %q", want)
	}
}
