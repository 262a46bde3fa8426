package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"

	"github.com/rollboot/rollboot/internal/workload"
)

// WorkloadsConfig is the policy's workloads block: the workload blockers
// (package workload).
type WorkloadsConfig struct {
	// JobFilter: a node is not drained while it runs allocations of a job this
	// filter (bexpr over the job, as `nomad job status -filter`) selects; ""
	// selects none.
	JobFilter string
	// Deployments: no drain starts in a node pool while a deployment of one of
	// its jobs (DeploymentFilter) is in progress or failed.
	Deployments bool
	// DeploymentFilter selects the jobs whose deployments count; "" every job.
	DeploymentFilter string
	// BlockedEvals: no drain starts in a node pool while evaluations of its
	// jobs are blocked.
	BlockedEvals bool
}

func defaultWorkloads() WorkloadsConfig {
	d := workload.Default()
	return WorkloadsConfig{JobFilter: d.JobFilter, Deployments: d.Deployments, DeploymentFilter: d.DeploymentFilter, BlockedEvals: d.BlockedEvals}
}

// Settings are the block's settings as package workload takes them.
func (w WorkloadsConfig) Settings() workload.Settings {
	return workload.Settings{JobFilter: w.JobFilter, Deployments: w.Deployments, DeploymentFilter: w.DeploymentFilter, BlockedEvals: w.BlockedEvals}
}

func (d *decoder) workloads(body hcl.Body) {
	s := scope{"workloads", "workloads"}
	content := d.content(body, &hcl.BodySchema{Attributes: attrSchema(
		"job_filter", "deployments", "deployment_filter", "blocked_evals")})
	if content == nil {
		return
	}
	a, w := content.Attributes, &d.c.Workloads
	d.str(a, s, "job_filter", &w.JobFilter)
	d.boolean(a, s, "deployments", &w.Deployments)
	d.str(a, s, "deployment_filter", &w.DeploymentFilter)
	d.boolean(a, s, "blocked_evals", &w.BlockedEvals)
}

// workloads checks the filters of the workloads block.
func (v *validator) workloads() {
	s := scope{"workloads", "workloads"}
	w := v.c.Workloads
	for _, f := range []struct{ attr, expr string }{{"job_filter", w.JobFilter}, {"deployment_filter", w.DeploymentFilter}} {
		if k := s.sub(f.attr); f.expr != "" && v.good(k) {
			expr := f.expr
			if err := workload.CheckFilter(expr); err != nil {
				v.errorf(k, "%v", err)
			}
		}
	}
}

func (c *Config) writeWorkloads(root *hclwrite.Body) {
	b := root.AppendNewBlock("workloads", nil).Body()
	w := c.Workloads
	b.SetAttributeValue("job_filter", cty.StringVal(w.JobFilter))
	b.SetAttributeValue("deployments", cty.BoolVal(w.Deployments))
	b.SetAttributeValue("deployment_filter", cty.StringVal(w.DeploymentFilter))
	b.SetAttributeValue("blocked_evals", cty.BoolVal(w.BlockedEvals))
}
