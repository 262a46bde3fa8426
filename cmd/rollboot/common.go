package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/hashicorp/nomad/api"
	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
)

// configFlags are the flags every command that talks to Nomad takes.
type configFlags struct {
	path    string
	address string
	prefix  string
}

func (f *configFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.path, "config", "", "HCL configuration file (default: built-in defaults)")
	cmd.Flags().StringVar(&f.address, "address", "", "Nomad HTTP API address (overrides the file and NOMAD_ADDR)")
	cmd.Flags().StringVar(&f.prefix, "prefix", "", "Nomad Variables path prefix of rollboot's state (overrides the file)")
}

// load reads the configuration: defaults, then the file, then the NOMAD_*
// environment, then flags, then validation (which reports every error at once).
func (f *configFlags) load() (*config.Config, error) {
	cfg := config.Default()
	if f.path != "" {
		c, err := config.Load(f.path)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	if err := cfg.ApplyEnv(os.Getenv); err != nil {
		return nil, err
	}
	if f.address != "" {
		cfg.Nomad.Address = f.address
	}
	if f.prefix != "" {
		cfg.State.Prefix = f.prefix
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// client loads the configuration and builds the Nomad client it names.
func (f *configFlags) client() (*config.Config, *api.Client, error) {
	cfg, err := f.load()
	if err != nil {
		return nil, nil, err
	}
	c, err := daemon.Client(cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, c, nil
}

// logFlags choose the log format and level.
type logFlags struct {
	json  bool
	level string
}

func (f *logFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.json, "log-json", false, "log as JSON lines instead of text")
	cmd.Flags().StringVar(&f.level, "log-level", "info", "log level: debug, info, warn or error")
}

func (f *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(strings.ToLower(f.level))); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", f.level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	if f.json {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}
