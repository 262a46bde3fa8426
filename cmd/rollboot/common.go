package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rollboot/rollboot/internal/config"
)

// sharedFlags are the flags every command shares, registered once on the root
// command as persistent flags: where the configuration comes from (for the
// commands that talk to Nomad) and how to log (for those that log). newRootCmd
// hands each command the part it uses.
type sharedFlags struct {
	config configFlags
	log    logFlags
}

func (f *sharedFlags) register(fs *pflag.FlagSet) {
	f.config.register(fs)
	f.log.register(fs)
}

// configFlags name the configuration of a command that talks to Nomad.
type configFlags struct {
	path    string
	address string
	prefix  string
}

func (f *configFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.path, "config", "", "HCL configuration file (default: built-in defaults)")
	fs.StringVar(&f.address, "address", "", "Nomad HTTP API address (overrides the file and NOMAD_ADDR)")
	fs.StringVar(&f.prefix, "prefix", "", "Nomad Variables path prefix of rollboot's state (overrides the file)")
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

// logFlags choose the log format and level.
type logFlags struct {
	json  bool
	level string
}

func (f *logFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.json, "log-json", false, "log as JSON lines instead of text")
	fs.StringVar(&f.level, "log-level", "info", "log level: debug, info, warn or error")
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
