package config

import (
	"strings"
	"testing"
	"time"
)

// A group's silence block overrides the top-level values it sets and keeps the
// others; matchers = [] turns silences off for the group.
func TestPolicySilence(t *testing.T) {
	src := `
alerts {
  alertmanager_url = "http://am:9093"
}
silence {
  matchers = ["instance=~\"{{.HostRegex}}(:[0-9]+)?\""]
  tail     = "2m"
}
group "web" {
  filter = "Meta.role == \"web\""
  silence {
    duration = "10m"
  }
}
group "batch" {
  silence {
    matchers = []
  }
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
	top := r.cc.Silence.Rules()
	if len(top.Matchers) != 1 || top.Tail != 2*time.Minute || top.Duration != 30*time.Minute {
		t.Errorf("top-level silence %+v", top)
	}
	web, batch := r.cc.Groups[0].Silence.Rules(), r.cc.Groups[1].Silence.Rules()
	if len(web.Matchers) != 1 || web.Duration != 10*time.Minute || web.Tail != 2*time.Minute {
		t.Errorf("web silence %+v", web)
	}
	if len(batch.Matchers) != 0 || batch.Tail != 2*time.Minute {
		t.Errorf("batch silence %+v", batch)
	}
	if out := r.String(); !strings.Contains(out, `duration = "10m"`) || !strings.Contains(out, `instance=~\"{{.HostRegex}}(:[0-9]+)?\"`) {
		t.Errorf("rendering lacks the silence settings:\n%s", out)
	}
	if d := DefaultRules(); len(d.cc.Silence.Matchers) != 0 {
		t.Errorf("silences on by default: %+v", d.cc.Silence)
	}
}

func TestPolicySilenceErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string
	}{
		{name: "bad matchers", src: `alerts {
  alertmanager_url = "http://am:9093"
}
silence {
  matchers = ["instance", "job=~\"(\"", "host={{.Nope}}", "x={{.Host"]
  duration = "0s"
  tail     = "-1s"
}
`, want: []string{
			`policy.hcl:5:15: silence.matchers: "instance" has no operator after "instance"`,
			`policy.hcl:5:27: silence.matchers: "job=~\"(\"": invalid regular expression`,
			`policy.hcl:5:41: silence.matchers: invalid template (it may use {{.Host}}, {{.HostRegex}} and {{.Group}}): matcher:1:7: executing "matcher" at <.Nope>`,
			`policy.hcl:5:59: silence.matchers: invalid template: matcher:1: unclosed action`,
			`policy.hcl:6:14: silence.duration: must be greater than 0`,
			`policy.hcl:7:14: silence.tail: must not be negative`,
		}},
		{name: "matches every alert", src: `alerts {
  alertmanager_url = "http://am:9093"
}
silence {
  matchers = ["instance=~\".*\"", "job!=\"x\""]
}
`, want: []string{`policy.hcl:5:14: silence.matchers: matchers {instance=~".*", job!="x"} for host host-1: every matcher matches an empty label`}},
		{name: "no Alertmanager", src: `silence {
  matchers = ["instance=\"{{.Host}}\""]
}
group "g" {
  silence {
    matchers = ["host=\"{{.Host}}\""]
  }
}
`, want: []string{
			`policy.hcl:2:14: silence.matchers: silences are written to the Alertmanager of alerts.alertmanager_url`,
			`policy.hcl:6:16: group "g".silence.matchers: silences are written to the Alertmanager of alerts.alertmanager_url`,
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
	if _, err := LoadBytes([]byte("silence {\n  tail = \"5m\"\n}\n"), "local.hcl"); err == nil ||
		!strings.Contains(err.Error(), "silence block is a rollout policy setting") {
		t.Errorf("local silence block: %v", err)
	}
}
