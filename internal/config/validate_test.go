package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// posOf returns "file:line:col" of the first occurrence of needle in src.
func posOf(t *testing.T, file, src, needle string) string {
	t.Helper()
	i := strings.Index(src, needle)
	if i < 0 {
		t.Fatalf("%q not in the source", needle)
	}
	line := strings.Count(src[:i], "\n") + 1
	col := i - strings.LastIndex(src[:i], "\n") // byte column, 1-based
	return fmt.Sprintf("%s:%d:%d", file, line, col)
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		at   string // where the error must point: the first occurrence of this text
		msg  string // in the message
	}{
		// Durations.
		{name: "bad duration", src: "drain {\n  deadline = \"1x\"\n}", at: `"1x"`, msg: `drain.deadline: invalid duration "1x"`},
		{name: "duration without unit", src: "drain {\n  deadline = 5\n}", at: `5`, msg: `drain.deadline: invalid duration "5"`},
		{name: "negative duration", src: "drain {\n  deadline = \"-1h\"\n}", at: `"-1h"`, msg: "drain.deadline: must be greater than 0, got -1h"},
		{name: "zero interval", src: "agent {\n  sentinel_command_interval = \"0s\"\n}", at: `"0s"`, msg: "agent.sentinel_command_interval: must be greater than 0"},
		{name: "negative delay", src: "agent {\n  reboot {\n    delay = \"-5s\"\n  }\n}", at: `"-5s"`, msg: "agent.reboot.delay: must not be negative"},
		{name: "duration as list", src: "drain {\n  deadline = [\"1h\"]\n}", at: `["1h"]`, msg: "drain.deadline: must be a duration string"},
		{name: "null", src: "drain {\n  deadline = null\n}", at: `null`, msg: "drain.deadline: must be a duration string such as \"30s\", \"5m\" or \"1h30m\", not null"},
		{name: "variables are not allowed", src: "drain {\n  deadline = var.x\n}", at: `var.x`, msg: "Variables not allowed"},
		{name: "retry max below backoff", src: "drain {\n  retry_backoff = \"2h\"\n  retry_max_backoff = \"1h\"\n}", at: `"1h"`, msg: "drain.retry_max_backoff: 1h is less than drain.retry_backoff (2h)"},
		{name: "retry max below default backoff", src: "drain {\n  retry_max_backoff = \"1m\"\n}", at: `"1m"`, msg: "drain.retry_max_backoff: 1m is less than drain.retry_backoff (5m)"},
		{name: "loop max below backoff", src: "coordinator {\n  reboot_loop_max_backoff = \"30m\"\n}", at: `"30m"`, msg: "coordinator.reboot_loop_max_backoff: 30m is less than coordinator.reboot_loop_backoff (1h)"},
		{name: "lock ttl too short", src: "coordinator {\n  lock_ttl = \"5s\"\n}", at: `"5s"`, msg: "coordinator.lock_ttl: must be between 10s and 24h"},
		{name: "negative standbys", src: "coordinator {\n  standbys = -1\n}", at: `-1`, msg: "coordinator.standbys: must be between 0 and 16, got -1"},
		{name: "lock ttl too long", src: "coordinator {\n  lock_ttl = \"25h\"\n}", at: `"25h"`, msg: "got 25h"},
		{name: "history size", src: "coordinator {\n  history_size = 0\n}", at: `0`, msg: "coordinator.history_size: must be at least 1"},
		{name: "enabled not a bool", src: "coordinator {\n  enabled = \"yes\"\n}", at: `"yes"`, msg: "coordinator.enabled: must be true or false"},

		// Enumerations and numbers.
		{name: "unknown method", src: "agent {\n  reboot {\n    method = \"kexec\"\n  }\n}", at: `"kexec"`, msg: `agent.reboot.method: unknown reboot method "kexec"`},
		{name: "empty command", src: "agent {\n  reboot {\n    command = []\n  }\n}", at: `[]`, msg: `agent.reboot.command: must not be empty when method = "command"`},
		{name: "empty program", src: "agent {\n  reboot {\n    command = [\"\", \"reboot\"]\n  }\n}", at: `[""`, msg: "agent.reboot.command: the program (first element) of command must not be empty"},
		{name: "signal zero", src: "agent {\n  reboot {\n    signal = 0\n  }\n}", at: `0`, msg: "agent.reboot.signal: must be a signal number from 1 to 64, got 0"},
		{name: "signal too big", src: "agent {\n  reboot {\n    signal = 65\n  }\n}", at: `65`, msg: "got 65"},
		{name: "signal not whole", src: "agent {\n  reboot {\n    signal = 39.5\n  }\n}", at: `39.5`, msg: "agent.reboot.signal: must be a whole number, got 39.5"},
		{name: "empty hook", src: "agent {\n  reboot {\n    pre_hooks = [[\"/bin/a\"], []]\n  }\n}", at: `[]]`, msg: "agent.reboot.pre_hooks[1]: a hook must have at least the program"},
		{name: "hook not a list of lists", src: "agent {\n  reboot {\n    post_hooks = [\"/bin/a\"]\n  }\n}", at: `["/bin/a"]`, msg: "agent.reboot.post_hooks: must be a list of argv lists"},
		{name: "on_timeout", src: "drain {\n  on_timeout = \"Force\"\n}", at: `"Force"`, msg: `drain.on_timeout: unknown value "Force": use "abort" or "force"`},
		{name: "leader_transfer_denied", src: "coordinator {\n  leader_transfer_denied = \"wait\"\n}", at: `"wait"`, msg: `coordinator.leader_transfer_denied: must be "continue" or "hold", got "wait"`},
		{name: "server_stable_for", src: "coordinator {\n  server_stable_for = \"-1s\"\n}", at: `"-1s"`, msg: `coordinator.server_stable_for: must not be negative, got -1s`},
		{name: "unknown detector kind", src: "agent {\n  detectors = [\"kernel\", \"ubuntu\"]\n}", at: `"ubuntu"`,
			msg: `agent.detectors: unknown detector kind "ubuntu": use "auto", "debian", "rhel", "suse", "nixos", "rpm-ostree", "kernel" or "needrestart"`},
		{name: "relative detector root", src: "agent {\n  detector_root = \"host\"\n}", at: `"host"`, msg: `agent.detector_root: "host" must be an absolute path`},
		{name: "zero detector timeout", src: "agent {\n  detector_timeout = \"0s\"\n}", at: `"0s"`, msg: "agent.detector_timeout: must be greater than 0"},
		{name: "relative boot time file", src: "agent {\n  boot_time_file = \"stat\"\n}", at: `"stat"`, msg: `agent.boot_time_file: "stat" must be an absolute path`},
		{name: "negative max_uptime", src: "group \"web\" {\n  max_uptime = \"-1h\"\n}", at: `"-1h"`, msg: `group "web".max_uptime: must not be negative, got -1h`},
		{name: "sentinel command empty program", src: "agent {\n  sentinel_command = [\"\"]\n}", at: `[""]`, msg: "agent.sentinel_command: the program"},
		{name: "relative boot id file", src: "agent {\n  boot_id_file = \"boot_id\"\n}", at: `"boot_id"`, msg: "must be an absolute path"},
		{name: "relative sentinel file", src: "agent {\n  sentinel_file = \"reboot-required\"\n}", at: `"reboot-required"`, msg: "agent.sentinel_file"},
		{name: "relative server lock file", src: "agent {\n  server_lock_file = \"lock.json\"\n}", at: `"lock.json"`, msg: "agent.server_lock_file: \"lock.json\" must be an absolute path"},
		{name: "no server lock file", src: "agent {\n  server_lock_file = \"\"\n}", at: `""`, msg: "agent.server_lock_file"},
		{name: "server lock ttl too short", src: "agent {\n  server_lock_ttl = \"5s\"\n}", at: `"5s"`, msg: "agent.server_lock_ttl: must be between 10s and 24h"},
		{name: "server lock ttl too long", src: "agent {\n  server_lock_ttl = \"25h\"\n}", at: `"25h"`, msg: "got 25h"},

		// Nomad and state.
		{name: "address without scheme", src: "nomad {\n  address = \"nomad:4646\"\n}", at: `"nomad:4646"`, msg: "nomad.address"},
		{name: "address ftp", src: "nomad {\n  address = \"ftp://nomad:4646\"\n}", at: `"ftp`, msg: `must start with http://, https:// or unix://`},
		{name: "address empty", src: "nomad {\n  address = \"\"\n}", at: `""`, msg: "nomad.address: must not be empty"},
		{name: "namespace wildcard", src: "nomad {\n  namespace = \"*\"\n}", at: `"*"`, msg: `nomad.namespace: invalid namespace "*"`},
		{name: "client cert without key", src: "nomad {\n  client_cert = \"/c.pem\"\n}", at: `"/c.pem"`, msg: "client_cert is set but client_key is not"},
		{name: "skip verify not bool", src: "nomad {\n  tls_skip_verify = \"maybe\"\n}", at: `"maybe"`, msg: "nomad.tls_skip_verify: must be true or false"},
		{name: "prefix with dot", src: "state {\n  prefix = \"roll.boot\"\n}", at: `"roll.boot"`, msg: "no dots"},
		{name: "prefix leading slash", src: "state {\n  prefix = \"/rollboot\"\n}", at: `"/rollboot"`, msg: "must not start or end with a slash"},
		{name: "prefix trailing slash", src: "state {\n  prefix = \"rollboot/\"\n}", at: `"rollboot/"`, msg: "must not start or end with a slash"},
		{name: "prefix empty segment", src: "state {\n  prefix = \"a//b\"\n}", at: `"a//b"`, msg: "empty path segment"},
		{name: "prefix under nomad", src: "state {\n  prefix = \"nomad/rollboot\"\n}", at: `"nomad/rollboot"`, msg: "Nomad reserves"},
		{name: "prefix empty", src: "state {\n  prefix = \"\"\n}", at: `""`, msg: "state.prefix: must not be empty"},
		{name: "prefix too long", src: "state {\n  prefix = \"" + strings.Repeat("a", 65) + "\"\n}", at: `"aaa`, msg: "longer than 64"},

		// Groups.
		{name: "negative concurrency", src: "group \"a\" {\n  concurrency = -1\n}", at: `-1`, msg: `group "a".concurrency: must be at least 1, got -1`},
		{name: "bad filter syntax", src: "group \"a\" {\n  filter = \"NodePool ==\"\n}", at: `"NodePool ==`, msg: `group "a".filter: invalid filter expression`},
		{name: "unknown filter field", src: "group \"a\" {\n  filter = \"NodePol == \\\"x\\\"\"\n}", at: `"NodePol`, msg: `the node has no field "NodePol"`},
		{name: "percentage without sign", src: "group \"a\" {\n  max_unavailable = \"25\"\n}", at: `"25"`, msg: `group "a".max_unavailable: invalid percentage "25"`},
		{name: "percentage zero", src: "group \"a\" {\n  max_unavailable = \"0%\"\n}", at: `"0%"`, msg: "out of range"},
		{name: "percentage above 100", src: "group \"a\" {\n  max_unavailable = \"150%\"\n}", at: `"150%"`, msg: "out of range"},
		{name: "duplicate group", src: "group \"a\" {\n  filter = \"NodePool == \\\"x\\\"\"\n}\ngroup \"a\" {}", at: "\"a\" {}", msg: `group "a": duplicate group name, first defined at t.hcl:1:1`},
		{name: "reserved group name", src: "group \"default\" {}", at: `"default"`, msg: `the name "default" is reserved`},
		{name: "empty group name", src: "group \"\" {}", at: `""`, msg: "a group needs a name"},
		{name: "group after catch-all", src: "group \"all\" {}\ngroup \"never\" {\n  filter = \"NodePool == \\\"x\\\"\"\n}", at: `"never"`, msg: `group "never": can never match a node: group "all" before it has no filter`},
		{name: "unknown window", src: "window \"night\" {\n  start = \"22:00\"\n  end = \"04:00\"\n}\ngroup \"a\" {\n  windows = [\"night\", \"nigth\"]\n}", at: `"nigth"`, msg: `group "a".windows: unknown window "nigth": defined windows are "night"`},
		{name: "unknown window, none defined", src: "group \"a\" {\n  windows = [\"night\"]\n}", at: `"night"`, msg: "no window block is defined"},
		{name: "concurrency as string", src: "group \"a\" {\n  concurrency = \"two\"\n}", at: `"two"`, msg: `group "a".concurrency: must be a whole number`},

		// Windows.
		{name: "bad start time", src: "window \"w\" {\n  start = \"25:00\"\n  end = \"04:00\"\n}", at: `"25:00"`, msg: `window "w".start: invalid time of day "25:00"`},
		{name: "bad end format", src: "window \"w\" {\n  start = \"22:00\"\n  end = \"4am\"\n}", at: `"4am"`, msg: `window "w".end: invalid time of day "4am"`},
		{name: "start 24:00", src: "window \"w\" {\n  start = \"24:00\"\n  end = \"04:00\"\n}", at: `"24:00"`, msg: `"24:00" can only be an end`},
		{name: "start equals end", src: "window \"w\" {\n  start = \"22:00\"\n  end = \"22:00:00\"\n}", at: `"22:00:00"`, msg: `window "w".end: start and end are both 22:00, so the window would be empty`},
		{name: "missing start", src: "window \"w\" {\n  end = \"04:00\"\n}", at: `window`, msg: `window "w".start: is required`},
		{name: "unknown day", src: "window \"w\" {\n  days = [\"mon\", \"funday\"]\n  start = \"22:00\"\n  end = \"04:00\"\n}", at: `"funday"`, msg: `window "w".days: unknown day "funday"`},
		{name: "no days", src: "window \"w\" {\n  days = []\n  start = \"22:00\"\n  end = \"04:00\"\n}", at: `[]`, msg: "must list at least one day"},
		{name: "bad time zone", src: "window \"w\" {\n  start = \"22:00\"\n  end = \"04:00\"\n  time_zone = \"Europe/Berlinn\"\n}", at: `"Europe/Berlinn"`, msg: `window "w".time_zone: unknown time zone "Europe/Berlinn"`},
		{name: "local time zone", src: "window \"w\" {\n  start = \"22:00\"\n  end = \"04:00\"\n  time_zone = \"Local\"\n}", at: `"Local"`, msg: `"Local" depends on the machine`},
		{name: "empty time zone", src: "window \"w\" {\n  start = \"22:00\"\n  end = \"04:00\"\n  time_zone = \"\"\n}", at: `""`, msg: "must name an IANA time zone"},
		{name: "duplicate window", src: "window \"w\" {\n  start = \"22:00\"\n  end = \"04:00\"\n}\nwindow \"w\" {\n  start = \"01:00\"\n  end = \"02:00\"\n}", at: "\"w\" {\n  start = \"01", msg: `window "w": duplicate window name, first defined at t.hcl:1:1`},

		// Structure.
		{name: "unknown attribute", src: "drain {\n  dedline = \"1h\"\n}", at: `dedline`, msg: `An argument named "dedline" is not expected here. Did you mean "deadline"?`},
		{name: "unknown block", src: "drain {}\nwindw \"x\" {}", at: `windw`, msg: `Blocks of type "windw" are not expected here`},
		{name: "unknown nested block", src: "agent {\n  rebot {}\n}", at: `rebot`, msg: `Blocks of type "rebot" are not expected here`},
		{name: "attribute at top level", src: "deadline = \"1h\"", at: `deadline`, msg: `An argument named "deadline" is not expected here`},
		{name: "duplicate block", src: "drain {}\ndrain {\n}", at: "drain {\n}", msg: "duplicate drain block: only one is allowed, the first is at t.hcl:1:1"},
		{name: "duplicate attribute", src: "drain {\n  deadline = \"1h\"\n  deadline = \"2h\"\n}", at: `deadline = "2h"`, msg: "Attribute redefined"},
		{name: "group without label", src: "group {}", at: `{}`, msg: "Missing name for group"},
		{name: "syntax error", src: "drain {\n  deadline = \n}", at: "\n}", msg: "Invalid expression"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadBoth([]byte(tt.src), "t.hcl")
			if err == nil {
				t.Fatalf("no error; config:\n%s", c)
			}
			if c != nil {
				t.Errorf("a config was returned with the errors")
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error %T is not Errors: %v", err, err)
			}
			if len(errs) != 1 {
				t.Errorf("want exactly one error, got %d:\n%v", len(errs), err)
			}
			pos := posOf(t, "t.hcl", tt.src, tt.at)
			want := pos + ": "
			if !strings.HasPrefix(errs[0].Error(), want) || !strings.Contains(errs[0].Error(), tt.msg) {
				t.Errorf("error:\n  %v\nwant it to start with %q and contain %q", errs[0], want, tt.msg)
			}
		})
	}
}

func TestLoadValidWindowEdges(t *testing.T) {
	for _, src := range []string{
		"window \"w\" {\n  start = \"00:00\"\n  end = \"24:00\"\n}",
		"window \"w\" {\n  days = [\"MON\", \"sunday\"]\n  start = \"22:00:30\"\n  end = \"4:00\"\n  time_zone = \"America/New_York\"\n}",
		"group \"a\" {\n  filter = \"NodePool == \\\"a\\\"\"\n  max_unavailable = \"100%\"\n}\ngroup \"b\" {\n  max_unavailable = \"1%\"\n  concurrency = 10\n}",
		"agent {\n  sentinel_file = \"\"\n  reboot {\n    method = \"signal\"\n    command = []\n  }\n}",
		"agent {\n  reboot {\n    method = \"logind\"\n    signal = 64\n  }\n}",
		"coordinator {\n  lock_ttl = \"10s\"\n}\ncoordinator_unused = 1",
	} {
		_, err := loadBoth([]byte(src), "t.hcl")
		if strings.Contains(src, "coordinator_unused") {
			if err == nil {
				t.Errorf("unknown top-level attribute accepted")
			}
			continue
		}
		if err != nil {
			t.Errorf("%s\nunexpected error: %v", src, err)
		}
	}
}

func TestLoadManyErrorsAtOnce(t *testing.T) {
	src := `nomad {
  namespace = "*"
}
agent {
  sentinel_command_interval = "5x"
  reboot {
    method = "kexec"
  }
}
drain {
  deadline   = "-1h"
  on_timeout = "later"
}
group "batch" {
  filter      = "NodePool =="
  concurrency = 0
  windows     = ["nightly"]
}
window "night" {
  days      = ["mon", "funday"]
  start     = "22:00"
  end       = "22:00"
  time_zone = "Mars/Olympus"
}
bogus {}
`
	_, err := loadBoth([]byte(src), "rollboot.hcl")
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error = %v", err)
	}
	want := []struct {
		at   string
		skip int // bytes of at before the position
		msg  string
	}{
		{`"*"`, 0, "nomad.namespace"},
		{`"5x"`, 0, "agent.sentinel_command_interval"},
		{`"kexec"`, 0, "agent.reboot.method"},
		{`"-1h"`, 0, "drain.deadline"},
		{`"later"`, 0, "drain.on_timeout"},
		{`"NodePool ==`, 0, `group "batch".filter`},
		{`concurrency = 0`, len("concurrency = "), `group "batch".concurrency`},
		{`"nightly"`, 0, `group "batch".windows`},
		{`"funday"`, 0, `window "night".days`},
		{`end       = "22:00"`, len("end       = "), `window "night".end`},
		{`"Mars/Olympus"`, 0, `window "night".time_zone`},
		{`bogus`, 0, "Unsupported block type"},
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) || len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		k := strings.Index(src, w.at) + w.skip
		pos := fmt.Sprintf("rollboot.hcl:%d:%d", strings.Count(src[:k], "\n")+1, k-strings.LastIndex(src[:k], "\n"))
		if !strings.HasPrefix(lines[i], pos+": "+w.msg) {
			t.Errorf("error %d = %q, want %s: %s...", i, lines[i], pos, w.msg)
		}
	}
}

func TestValidateWithoutPositions(t *testing.T) {
	c := Default()
	c.Drain.Deadline = 0
	c.Groups = []GroupConfig{{Name: "a", Concurrency: 1, Windows: []string{"x"}}}
	_, err := Compile(c)
	if err == nil {
		t.Fatal("no error")
	}
	want := "drain.deadline: must be greater than 0, got 0s\n" + `group "a".windows: unknown window "x": no window block is defined`
	if err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
}

func TestDecodeErrorDoesNotCascade(t *testing.T) {
	// A malformed backoff must not also produce "max is less than backoff"
	// about the default left in its place.
	_, err := loadBoth([]byte("coordinator {\n  reboot_loop_backoff = \"2x\"\n  reboot_loop_max_backoff = \"30m\"\n}"), "t.hcl")
	if err == nil {
		t.Fatal("no error")
	}
	if n := len(err.(Errors)); n != 1 {
		t.Errorf("want 1 error, got %d:\n%v", n, err)
	}
}

func TestValidNamespace(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"default", true},
		{"ops-1", true},
		{"A9", true},
		{strings.Repeat("a", 128), true},
		{"", false},
		{strings.Repeat("a", 129), false},
		{"*", false},
		{"a.b", false},
		{"a_b", false},
		{"é", false},
	} {
		if got := validNamespace(tc.name); got != tc.ok {
			t.Errorf("validNamespace(%q) = %t, want %t", tc.name, got, tc.ok)
		}
	}
}
