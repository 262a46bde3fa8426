package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/hashicorp/nomad/api"
	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
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
// environment, then flags, then Compile, which checks the result once and
// reports every problem at once.
func (f *configFlags) load() (*config.Compiled, error) {
	return compileConfig(*f)
}

// compileConfig is load for the flags f (also for a candidate policy file:
// `rollboot plan -policy`).
func compileConfig(f configFlags) (*config.Compiled, error) {
	cfg := config.Default()
	if f.path != "" {
		c, err := config.Parse(f.path)
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
	return config.Compile(cfg)
}

// loaded is what clientCommand loaded for the command it runs: the configuration,
// compiled once, and the Nomad client it names.
type loaded struct {
	cfg    *config.Compiled
	client *api.Client
}

type loadedKey struct{}

// withLoaded records what clientCommand loaded, for loadedOf.
func withLoaded(ctx context.Context, cfg *config.Compiled, c *api.Client) context.Context {
	return context.WithValue(ctx, loadedKey{}, loaded{cfg: cfg, client: c})
}

// loadedOf returns the configuration and client clientCommand loaded for cmd.
func loadedOf(cmd *cobra.Command) (*config.Compiled, *api.Client, error) {
	var l loaded
	ok := false
	if ctx := cmd.Context(); ctx != nil {
		l, ok = ctx.Value(loadedKey{}).(loaded)
	}
	if !ok {
		return nil, nil, fmt.Errorf("%s: no configuration loaded (the command is not a clientCommand)", cmd.Name())
	}
	return l.cfg, l.client, nil
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
