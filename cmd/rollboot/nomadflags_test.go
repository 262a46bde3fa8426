package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
)

// Every connection flag of the nomad CLI, in its one-dash form, sets its
// setting of the nomad block on every command that talks to Nomad, and wins
// over the file and the NOMAD_* environment; an unset flag leaves the
// environment's value; a malformed value is an error naming the flag.
func TestNomadFlagsOverrideEnvAndFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c.hcl")
	if err := os.WriteFile(file, []byte("nomad {\n  region = \"file-region\"\n  tls_server_name = \"file.nomad\"\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOMAD_ADDR", "http://env:4646")
	t.Setenv("NOMAD_TOKEN", "env-token")
	t.Setenv("NOMAD_NAMESPACE", "env-ns")
	t.Setenv("NOMAD_CAPATH", "/env/ca.d")
	args := []string{"-config", file, "-address", "https://flag:4646", "-token", "flag-token", "-namespace", "ops",
		"-region", "eu", "-ca-cert", "/flag/ca.pem", "-client-cert", "/flag/c.pem", "-client-key", "/flag/k.pem",
		"-tls-server-name", "server.eu.nomad", "-tls-skip-verify"}
	for _, name := range []string{"status", "history", "plan", "request", "cancel", "pause", "resume", "release",
		"forget", "policy apply", "policy show", "policy history", "control reset", "agent", "coordinator"} {
		t.Run(name, func(t *testing.T) {
			cf := parseConfigFlags(t, strings.Fields(name), args)
			cfg, err := cf.load()
			if err != nil {
				t.Fatal(err)
			}
			n := cfg.Nomad
			got := []string{n.Address, n.Token.Reveal(), n.Namespace, n.Region, n.CACert, n.CAPath, n.ClientCert, n.ClientKey, n.TLSServerName}
			want := []string{"https://flag:4646", "flag-token", "ops", "eu", "/flag/ca.pem", "/env/ca.d", "/flag/c.pem", "/flag/k.pem", "server.eu.nomad"}
			if strings.Join(got, " ") != strings.Join(want, " ") || !n.TLSSkipVerify {
				t.Errorf("nomad block %q (skip verify %v), want %q (skip verify true)", got, n.TLSSkipVerify, want)
			}
		})
	}
	cf := parseConfigFlags(t, []string{"status"}, []string{"-config", file})
	cfg, err := cf.load()
	if err != nil {
		t.Fatal(err)
	}
	if n := cfg.Nomad; n.Address != "http://env:4646" || n.Token.Reveal() != "env-token" || n.Region != "file-region" || n.TLSSkipVerify {
		t.Errorf("without flags: address %q token %q region %q skip %v, want the environment's and the file's", n.Address, n.Token.Reveal(), n.Region, n.TLSSkipVerify)
	}
	cf = parseConfigFlags(t, []string{"status"}, []string{"-namespace", "no*pe", "-tls-skip-verify=false"})
	_, err = cf.load()
	if err == nil || !strings.Contains(err.Error(), "-namespace: nomad.namespace:") {
		t.Errorf("a bad -namespace: %v, want an error naming the flag", err)
	}
}

// parseConfigFlags parses args as the command path names them would, through
// the root's normalizeArgs, and returns the configuration flags it reads.
func parseConfigFlags(t *testing.T, path, args []string) *configFlags {
	t.Helper()
	var shared sharedFlags
	root := &cobra.Command{Use: "rollboot"}
	shared.register(root.PersistentFlags())
	parent := root
	for _, p := range path {
		c := &cobra.Command{Use: p, RunE: func(*cobra.Command, []string) error { return nil }}
		parent.AddCommand(c)
		parent = c
	}
	full := append(append([]string{}, path...), args...)
	root.SetArgs(normalizeArgs(root, full))
	if err := root.Execute(); err != nil {
		t.Fatalf("%v: %v", full, err)
	}
	return &shared.config
}

// Every command of the real tree takes every connection flag, in both
// spellings: those registered once on the root reach every command.
func TestEveryCommandTakesNomadFlags(t *testing.T) {
	root := newRootCmd()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() {
			for _, nf := range config.NomadFlags() {
				if c.Flags().Lookup(nf.Name) == nil && c.InheritedFlags().Lookup(nf.Name) == nil {
					t.Errorf("%s lacks -%s", c.CommandPath(), nf.Name)
				}
				args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "rollboot ")), "-"+nf.Name+"=x")
				if got := normalizeArgs(root, args); got[len(got)-1] != "--"+nf.Name+"=x" {
					t.Errorf("%s: -%s=x is not read as a flag: %q", c.CommandPath(), nf.Name, got)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if len(config.NomadFlags()) != 10 {
		t.Errorf("%d connection flags, want the nomad CLI's 10", len(config.NomadFlags()))
	}
}
