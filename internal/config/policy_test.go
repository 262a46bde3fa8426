package config

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// bothKinds is a file that may hold local and policy settings: the tests of the
// checks shared by both kinds use it.
const bothKinds fileKind = -1

// loadBoth parses src as a file of both kinds and compiles it.
func loadBoth(src []byte, filename string) (*Compiled, error) {
	file, err := parseHCL(src, filename)
	if err != nil {
		return nil, err
	}
	return Compile(decodeFile(file, bothKinds))
}

func TestSettingsInTheWrongFile(t *testing.T) {
	tests := []struct {
		name, src string
		policy    bool   // parse as a policy file
		at, msg   string // where and what
	}{
		{name: "group in a local file", src: "nomad {}\ngroup \"a\" {}\n", at: "t.hcl:2:1", msg: `group "a" block is a rollout policy setting, stored in the cluster: move it to a policy file and run ` + "`rollboot policy apply FILE`"},
		{name: "window in a local file", src: "window \"w\" {\n  start = \"01:00\"\n  end = \"02:00\"\n}\n", at: "t.hcl:1:1", msg: `window "w" block is a rollout policy setting`},
		{name: "drain in a local file", src: "drain {\n  deadline = \"1h\"\n}\n", at: "t.hcl:1:1", msg: "drain block is a rollout policy setting"},
		{name: "rollout rule in a local file", src: "coordinator {\n  lock_ttl = \"20s\"\n  rejoin_timeout = \"1h\"\n}\n", at: "t.hcl:3:3", msg: "coordinator.rejoin_timeout is a rollout policy setting"},
		{name: "nomad in a policy", policy: true, src: "group \"a\" {}\nnomad {\n  address = \"http://x:4646\"\n}\n", at: "t.hcl:2:1", msg: "nomad block is a local setting of each host, not a policy one"},
		{name: "election timing in a policy", policy: true, src: "coordinator {\n  history_size = 3\n  lock_ttl = \"20s\"\n}\n", at: "t.hcl:3:3", msg: "coordinator.lock_ttl is a local setting"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.policy {
				var p *PolicyFile
				if p, err = ParsePolicy([]byte(tt.src), "t.hcl"); err == nil {
					_, err = CompilePolicy(p)
				}
			} else {
				_, err = LoadBytes([]byte(tt.src), "t.hcl")
			}
			if err == nil || !strings.Contains(err.Error(), tt.at+": "+tt.msg) {
				t.Fatalf("error = %v\nwant %s: %s", err, tt.at, tt.msg)
			}
		})
	}
}

func TestPolicyExample(t *testing.T) {
	p, err := ParsePolicy(docExample(t, "<!-- policy-example"), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r, err := CompilePolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	local, err := LoadBytes(fullExample(t), "rollboot.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cc := local.With(r)
	if cc.Nomad.Address != local.Nomad.Address || cc.Coordinator.LockTTL != 20*time.Second {
		t.Errorf("local settings lost: %+v", cc.Coordinator)
	}
	if cc.Coordinator.RejoinTimeout != 45*time.Minute || cc.Coordinator.HistorySize != 500 || cc.Drain.Deadline != 45*time.Minute {
		t.Errorf("policy settings not taken: %+v %+v", cc.Coordinator, cc.Drain)
	}
	if got := cc.Policy.Names(); strings.Join(got, ",") != "batch,gpu-r1,default" {
		t.Errorf("groups = %v", got)
	}
	if cc.Groups[1].MaxUptime != 720*time.Hour || cc.Groups[0].MaxUptime != 0 {
		t.Errorf("max_uptime: batch %s, gpu-r1 %s; want none and 720h", cc.Groups[0].MaxUptime, cc.Groups[1].MaxUptime)
	}
	if local.Policy.Names()[0] != "default" || local.Coordinator.HistorySize != 200 {
		t.Error("With changed the local configuration")
	}
	// The rendering loads back to the same policy.
	again, err := ParsePolicy([]byte(r.String()), "printed.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := CompilePolicy(again)
	if err != nil {
		t.Fatalf("String() does not load back: %v\n%s", err, r.String())
	}
	if r2.String() != r.String() {
		t.Errorf("round trip differs:\n%s\n---\n%s", r.String(), r2.String())
	}
}

func TestDefaultRules(t *testing.T) {
	r := DefaultRules()
	p := r.cc.Policy
	if len(p.Groups) != 0 || p.Default.Name != "default" || p.Default.Concurrency != 1 || len(p.Default.Schedule) != 0 {
		t.Errorf("default policy = %+v", p)
	}
}

func TestSettle(t *testing.T) {
	p, err := ParsePolicy([]byte("group \"a\" {\n  settle = \"2m\"\n}\ngroup \"b\" {\n  filter = \"Name == \\\"x\\\"\"\n  settle = \"-1s\"\n}\n"), "s.hcl")
	if err != nil {
		t.Fatal(err)
	}
	_, err = CompilePolicy(p)
	if err == nil || !strings.Contains(err.Error(), `s.hcl:6:12: group "b".settle: must not be negative, got -1s`) {
		t.Fatalf("error = %v", err)
	}
	p, _ = ParsePolicy([]byte("group \"a\" {\n  settle = \"2m\"\n}\n"), "s.hcl")
	r, err := CompilePolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	if g := r.cc.Policy.Groups[0]; g.Settle != 2*time.Minute {
		t.Errorf("settle = %v", g.Settle)
	}
}

// A group that names no windows in a file where others do inherits every
// window: said once per such group; nothing when no group names windows or
// there is none.
func TestInheritedWindows(t *testing.T) {
	const windows = "window \"night\" {\n  start = \"22:00\"\n  end = \"04:00\"\n}\nwindow \"weekend\" {\n  days = [\"sat\"]\n  start = \"00:00\"\n  end = \"24:00\"\n}\n"
	for _, tt := range []struct {
		name, src string
		want      []string // the groups warned of
	}{
		{"one group windowed, one not", windows + "group \"db\" {\n  filter = \"NodePool == \\\"db\\\"\"\n  windows = [\"night\"]\n}\ngroup \"web\" {}\n", []string{"web"}},
		{"no group names windows", windows + "group \"db\" {\n  filter = \"NodePool == \\\"db\\\"\"\n}\ngroup \"web\" {}\n", nil},
		{"every group names its windows", windows + "group \"db\" {\n  filter = \"NodePool == \\\"db\\\"\"\n  windows = [\"night\"]\n}\ngroup \"web\" {\n  windows = [\"weekend\"]\n}\n", nil},
		{"no window", "group \"db\" {}\n", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tt.src), "t.hcl")
			if err != nil {
				t.Fatal(err)
			}
			r, err := CompilePolicy(p)
			if err != nil {
				t.Fatal(err)
			}
			got := r.InheritedWindows()
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %q, want one for each of %q", got, tt.want)
			}
			for i, g := range tt.want {
				if want := fmt.Sprintf(`group %q names no windows: it inherits every window of the file ("night", "weekend")`, g); !strings.HasPrefix(got[i], want) {
					t.Errorf("warning %q, want it to begin %q", got[i], want)
				}
			}
		})
	}
}
