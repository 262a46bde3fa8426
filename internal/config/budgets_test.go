package config

import (
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/policy"
)

// The failure budgets and the rollout block compile into the rules the
// coordinator decides with: the top-level budget for the rollout, a group's
// for that group alone, nothing inherited.
func TestPolicyBudgets(t *testing.T) {
	src := `
failure_budget {
  max_failures = 3
}
rollout {
  max_out             = 4
  max_drains_per_hour = 10
}
group "web" {
  filter = "NodePool == \"web\""
  failure_budget {
    max_failures = 2
    window       = "6h"
    count        = ["stuck", "unhealthy"]
  }
}
group "db" {
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
	bs := r.cc.FailureBudgets
	if bs.Rollout.MaxFailures != 3 || bs.Rollout.Window != 24*time.Hour || len(bs.Rollout.Count) != 4 {
		t.Errorf("rollout budget %+v", bs.Rollout)
	}
	web := bs.Groups["web"]
	if web.MaxFailures != 2 || web.Window != 6*time.Hour || len(web.Count) != 2 || web.Count[1] != policy.FailUnhealthy {
		t.Errorf("web budget %+v", web)
	}
	if _, ok := bs.Groups["db"]; ok {
		t.Errorf("db has a budget it did not set: %+v", bs.Groups["db"])
	}
	if r.cc.RolloutBudget != (policy.RolloutBudget{MaxOut: 4, MaxDrainsPerHour: 10}) {
		t.Errorf("rollout budget %+v", r.cc.RolloutBudget)
	}
	if out := r.String(); !strings.Contains(out, "max_drains_per_hour = 10") || !strings.Contains(out, `count        = ["stuck", "unhealthy"]`) {
		t.Errorf("rendering lacks the budgets:\n%s", out)
	}
	local, err := Compile(Default())
	if err != nil {
		t.Fatal(err)
	}
	if with := local.With(r); with.FailureBudgets.Groups["web"].MaxFailures != 2 || with.RolloutBudget.MaxOut != 4 {
		t.Errorf("the local configuration with the rules lacks their budgets: %+v %+v", with.FailureBudgets, with.RolloutBudget)
	}
	if d := DefaultRules(); d.cc.FailureBudgets.On() || d.cc.RolloutBudget.On() {
		t.Errorf("budgets on by default: %+v %+v", d.cc.FailureBudgets, d.cc.RolloutBudget)
	}
}

func TestPolicyBudgetErrors(t *testing.T) {
	src := `failure_budget {
  max_failures = -1
  window       = "0s"
}
rollout {
  max_out             = -2
  max_drains_per_hour = 1.5
}
group "web" {
  failure_budget {
    max_failures = 2
    count        = ["stuck", "crashed", "stuck"]
  }
}
group "db" {
  failure_budget {
    max_failures = 1
    count        = []
  }
}
`
	p, err := ParsePolicy([]byte(src), "policy.hcl")
	if err == nil {
		_, err = CompilePolicy(p)
	}
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`policy.hcl:2:18: failure_budget.max_failures: must be at least 0, got -1`,
		`policy.hcl:3:18: failure_budget.window: must be greater than 0, got 0s`,
		`policy.hcl:6:25: rollout.max_out: must be at least 0, got -2`,
		`policy.hcl:7:25: rollout.max_drains_per_hour: must be a whole number, got 1.5`,
		`policy.hcl:12:30: group "web".failure_budget.count: unknown failure "crashed": use "stuck", "reboot_failed", "unhealthy", "drain_aborted"`,
		`policy.hcl:12:41: group "web".failure_budget.count: "stuck" is listed twice`,
		`policy.hcl:18:20: group "db".failure_budget.count: must name at least one kind of failure`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
