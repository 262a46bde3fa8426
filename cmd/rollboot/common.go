package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
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

// configFlags name the configuration of a command that talks to Nomad: the
// file, the state prefix, and the nomad CLI's connection flags (-address,
// -token, -namespace, -region and the TLS ones), each overriding the file and
// its NOMAD_* environment variable.
type configFlags struct {
	path   string
	prefix string
	// nomad holds the connection flags by setting name (config.NomadFlags);
	// set, when not nil, says which were given (a flag given as "" still
	// overrides: -namespace "" is an error, not the default).
	nomad map[string]*string
	set   func(name string) bool
	// address is -address when no flag set parsed it (tests).
	address string
}

func (f *configFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.path, "config", "", "HCL configuration file (default: built-in defaults)")
	fs.StringVar(&f.prefix, "prefix", "", "Nomad Variables path prefix of rollboot's state (overrides the file)")
	f.nomad = map[string]*string{}
	for _, nf := range config.NomadFlags() {
		v := new(string)
		f.nomad[nf.Setting] = v
		usage := fmt.Sprintf("%s (overrides the file and %s)", nomadFlagUsage[nf.Setting], nf.Env)
		if nf.Bool {
			fs.Var(boolString{v}, nf.Name, usage)
			fs.Lookup(nf.Name).NoOptDefVal = "true"
			continue
		}
		fs.StringVar(v, nf.Name, "", usage)
	}
	f.set = func(name string) bool { return fs.Changed(name) }
}

// nomadFlagUsage is the usage of each connection flag, by setting name.
var nomadFlagUsage = map[string]string{
	"address":         "Nomad HTTP API address",
	"token":           "Nomad ACL token (secret ID; prefer NOMAD_TOKEN, which no process list shows)",
	"region":          "Nomad region to talk to",
	"namespace":       "Nomad namespace of rollboot's Variables",
	"ca_cert":         "PEM CA certificate file to verify the Nomad servers with",
	"ca_path":         "directory of PEM CA certificates to verify the Nomad servers with",
	"client_cert":     "PEM client certificate for mutual TLS",
	"client_key":      "PEM client key for mutual TLS",
	"tls_server_name": "server name to verify the Nomad server's certificate against",
	"tls_skip_verify": "do not verify the Nomad server's certificate (tests only)",
}

// boolString is a boolean flag kept as the text config.ApplyNomadFlags takes.
type boolString struct{ v *string }

func (b boolString) String() string {
	if b.v == nil || *b.v == "" {
		return "false"
	}
	return *b.v
}

func (b boolString) Set(s string) error {
	if _, err := strconv.ParseBool(s); err != nil {
		return fmt.Errorf("use true or false")
	}
	*b.v = s
	return nil
}

func (b boolString) Type() string { return "bool" }

// IsBoolFlag lets -tls-skip-verify stand without a value.
func (b boolString) IsBoolFlag() bool { return true }

// nomadFlags are the connection flags given, by setting name.
func (f configFlags) nomadFlags() map[string]string {
	out := map[string]string{}
	for _, nf := range config.NomadFlags() {
		if v := f.nomad[nf.Setting]; v != nil && f.set != nil && f.set(nf.Name) {
			out[nf.Setting] = *v
		}
	}
	if f.address != "" {
		out["address"] = f.address
	}
	return out
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
	if err := cfg.ApplyNomadFlags(f.nomadFlags()); err != nil {
		return nil, err
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
