package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// A group's drain and healthy blocks override the top-level values they set and
// keep the others; the rendering shows every value in force.
func TestPolicyHealthyAndGroupDrain(t *testing.T) {
	src := `
drain {
  deadline = "1h"
}
healthy {
  deadline    = "15m"
  on_deadline = "release"
}
group "web" {
  filter = "Meta.role == \"web\""
  healthy {
    consul_checks = true
  }
}
group "batch" {
  drain {
    deadline           = "2h"
    ignore_system_jobs = false
    stop_jobs          = ["cache", "ops/etl"]
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
	top := HealthyConfig{Deadline: 15 * time.Minute, OnDeadline: "release"}
	if got := r.cc.Healthy; got != top {
		t.Errorf("top-level healthy %+v", got)
	}
	web, batch := r.cc.Groups[0], r.cc.Groups[1]
	if want := (HealthyConfig{Deadline: 15 * time.Minute, OnDeadline: "release", ConsulChecks: true}); web.Healthy != want {
		t.Errorf("web healthy %+v, want %+v", web.Healthy, want)
	}
	if want := (GroupDrainConfig{Deadline: time.Hour, IgnoreSystemJobs: true}); !reflect.DeepEqual(web.Drain, want) {
		t.Errorf("web drain %+v, want %+v", web.Drain, want)
	}
	if batch.Healthy != top {
		t.Errorf("batch healthy %+v, want the top level's", batch.Healthy)
	}
	if want := (GroupDrainConfig{Deadline: 2 * time.Hour, StopJobs: []string{"cache", "ops/etl"}}); !reflect.DeepEqual(batch.Drain, want) {
		t.Errorf("batch drain %+v, want %+v", batch.Drain, want)
	}
	out := r.String()
	for _, want := range []string{`on_deadline   = "release"`, `stop_jobs          = ["cache", "ops/etl"]`, `consul_checks = true`} {
		if !strings.Contains(out, want) {
			t.Errorf("rendering lacks %s:\n%s", want, out)
		}
	}
	// The defaults: a hold after 10 minutes, no Consul checks, system jobs ignored.
	d := DefaultRules()
	if want := (HealthyConfig{Deadline: 10 * time.Minute, OnDeadline: "hold"}); d.cc.Healthy != want || !d.cc.Drain.IgnoreSystemJobs {
		t.Errorf("defaults: healthy %+v, drain %+v", d.cc.Healthy, d.cc.Drain)
	}
}

func TestPolicyHealthyErrors(t *testing.T) {
	src := `healthy {
  deadline    = "0s"
  on_deadline = "later"
}
drain {
  stop_jobs = ["", "a/b/c"]
}
group "x" {
  healthy {
    on_deadline = "never"
  }
  drain {
    deadline  = "-1m"
    stop_jobs = ["cache", "cache"]
  }
}
`
	p, err := ParsePolicy([]byte(src), "policy.hcl")
	if err != nil {
		t.Fatal(err)
	}
	_, err = CompilePolicy(p)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`policy.hcl:2:17: healthy.deadline: must be greater than 0`,
		`policy.hcl:3:17: healthy.on_deadline: unknown value "later": use "hold" or "release"`,
		`policy.hcl:6:16: drain.stop_jobs: "" is not a job`,
		`policy.hcl:6:20: drain.stop_jobs: "a/b/c" is not a job`,
		`policy.hcl:10:19: group "x".healthy.on_deadline: unknown value "never"`,
		`policy.hcl:13:17: group "x".drain.deadline: must be greater than 0`,
		`policy.hcl:14:27: group "x".drain.stop_jobs: job "cache" is listed twice`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	// A healthy block is policy: refused in a local file.
	if _, err := LoadBytes([]byte("healthy {\n  deadline = \"5m\"\n}\n"), "local.hcl"); err == nil ||
		!strings.Contains(err.Error(), "healthy block is a rollout policy setting") {
		t.Errorf("local healthy block: %v", err)
	}
}
