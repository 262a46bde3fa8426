package config

import (
	"strings"
	"testing"
	"time"
)

func TestPolicyWaves(t *testing.T) {
	src := `
group "staging" {
  filter = "NodePool == \"staging\""
  canary {
    hosts = 1
    soak  = "30m"
  }
}
group "prod" {
  after      = ["staging"]
  after_soak = "1h"
}
`
	p, err := ParsePolicy([]byte(src), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r, err := CompilePolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	w := r.cc.WaveRules()
	if g := w["staging"]; g.Canaries != 1 || g.Soak != 30*time.Minute || len(g.After) != 0 {
		t.Errorf("staging %+v", g)
	}
	if g := w["prod"]; g.Canaries != 0 || g.AfterSoak != time.Hour || len(g.After) != 1 || g.After[0] != "staging" {
		t.Errorf("prod %+v", g)
	}
	if out := strings.Join(strings.Fields(r.String()), " "); !strings.Contains(out, `after_soak = "1h"`) || !strings.Contains(out, "hosts = 1 soak = \"30m\"") {
		t.Errorf("rendering lacks the wave settings:\n%s", out)
	}
	if DefaultRules().cc.WaveRules().Enabled() {
		t.Error("waves on by default")
	}
}

func TestPolicyWaveErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{name: "unknown and self", src: `group "a" {
  after = ["a", "nope"]
  canary {
    hosts = -1
    soak  = "-1m"
  }
}
`, want: []string{
			`policy.hcl:2:12: group "a".after: group "a" cannot follow itself`,
			`policy.hcl:2:17: group "a".after: unknown group "nope": after names groups of this file (or "default")`,
			`policy.hcl:4:13: group "a".canary.hosts: must be at least 0`,
			`policy.hcl:5:13: group "a".canary.soak: must not be negative`,
		}},
		{name: "cycle", src: `group "a" {
  filter = "NodePool == \"a\""
  after  = ["b"]
}
group "b" {
  filter = "NodePool == \"b\""
  after  = ["c"]
}
group "c" {
  after = ["a", "default"]
}
`, want: []string{
			`policy.hcl:3:12: group "a".after: the groups follow each other in a cycle (a after b after c after a)`,
			`policy.hcl:10:11: group "c".after: the groups follow each other in a cycle (c after a after b after c)`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tc.src), "policy.hcl")
			if err != nil {
				t.Fatal(err)
			}
			_, err = CompilePolicy(p)
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error lacks %q:\n%v", want, err)
				}
			}
		})
	}
}
