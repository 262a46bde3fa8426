package setup

import (
	"fmt"
	"io"
	"strings"

	"github.com/hashicorp/nomad/api"
)

// Action is what setup does to one thing.
type Action string

const (
	Create Action = "create"
	Update Action = "update"
	Keep   Action = "keep"
	// Skip: not done, with the reason in Detail (ACL policies while ACLs are off).
	Skip Action = "skip"
)

// Change is one thing setup creates, changes, keeps or skips.
type Change struct {
	Kind   string // "namespace", "acl policy", "stored policy", "job"
	Name   string
	Action Action
	Detail string
	// policy, job: what to write (Apply).
	policy *DesiredPolicy
	job    *DesiredJob
}

// Observed is what the cluster has of what setup installs.
type Observed struct {
	ACLs       bool
	Namespaces map[string]bool
	Policies   map[string]*api.ACLPolicy
	// Jobs by "namespace/id"; a stopped job counts as absent.
	Jobs map[string]*api.Job
	// StoredPolicyVersion is the stored rollout policy's version (0: none).
	StoredPolicyVersion int
}

// Plan decides what to do: everything wanted and missing is created, what
// differs from the shipped files is updated, the rest kept. The stored rollout
// policy is created when none is stored and never changed: it is the operator's
// (`rollboot policy apply`).
func Plan(d Desired, o Observed) []Change {
	var out []Change
	ns := Change{Kind: "namespace", Name: d.Namespace.Name, Action: Keep}
	if !o.Namespaces[d.Namespace.Name] {
		ns.Action = Create
	}
	out = append(out, ns)
	for i := range d.Policies {
		out = append(out, planPolicy(&d.Policies[i], o))
	}
	sp := Change{Kind: "stored policy", Name: "rollboot/policy", Action: Create, Detail: "deploy/policy.hcl, as `rollboot policy apply` stores it"}
	switch {
	case o.StoredPolicyVersion > 0:
		sp.Action, sp.Detail = Keep, fmt.Sprintf("version %d is stored; `rollboot policy apply` changes it", o.StoredPolicyVersion)
	case o.StoredPolicyVersion < 0:
		sp.Action, sp.Detail = Keep, "a variable is there that rollboot cannot read; left as it is (`rollboot policy show` says why)"
	}
	out = append(out, sp)
	for i := range d.Jobs {
		j := &d.Jobs[i]
		c := Change{Kind: "job", Name: j.Namespace + "/" + j.ID, Action: Create, Detail: "deploy/" + j.File, job: j}
		if cur := o.Jobs[c.Name]; cur != nil {
			c.Action = Keep
			switch cur.Meta[MetaKey] {
			case j.Digest:
			case "":
				c.Action, c.Detail = Update, "deploy/"+j.File+": the registered job was not registered by setup"
			default:
				c.Action, c.Detail = Update, "deploy/"+j.File+": another file or release than the registered one"
			}
		}
		out = append(out, c)
	}
	return out
}

func planPolicy(p *DesiredPolicy, o Observed) Change {
	c := Change{Kind: "acl policy", Name: p.Name, Action: Create, policy: p}
	if p.JobACL != nil {
		c.Detail = "attached to job " + p.JobACL.Namespace + "/" + p.JobACL.JobID
	}
	if !o.ACLs {
		c.Action, c.Detail = Skip, "ACLs are off"
		return c
	}
	cur := o.Policies[p.Name]
	if cur == nil {
		return c
	}
	var diffs []string
	if cur.Rules != p.Rules {
		diffs = append(diffs, "rules differ from deploy/acl/"+p.Name+".policy.hcl")
	}
	if !sameJobACL(cur.JobACL, p.JobACL) {
		diffs = append(diffs, "attached to "+jobACLString(cur.JobACL)+", want "+jobACLString(p.JobACL))
	}
	if len(diffs) == 0 {
		c.Action = Keep
		return c
	}
	c.Action, c.Detail = Update, strings.Join(diffs, "; ")
	return c
}

func sameJobACL(a, b *api.JobACL) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func jobACLString(j *api.JobACL) string {
	if j == nil {
		return "no job"
	}
	s := "job " + j.Namespace + "/" + j.JobID
	if j.Group != "" {
		s += " group " + j.Group
	}
	if j.Task != "" {
		s += " task " + j.Task
	}
	return s
}

// Pending counts the changes that would write something.
func Pending(changes []Change) int {
	n := 0
	for _, c := range changes {
		if c.Action == Create || c.Action == Update {
			n++
		}
	}
	return n
}

// symbols are the plan's marks, as `nomad job plan` marks its diff.
var symbols = map[Action]string{Create: "+", Update: "~", Keep: "=", Skip: "-"}

// WritePlan prints the changes, one a line.
func WritePlan(w io.Writer, changes []Change) {
	for _, c := range changes {
		line := fmt.Sprintf("  %s %s %s", symbols[c.Action], c.Kind, c.Name)
		if c.Detail != "" {
			line += " (" + c.Detail + ")"
		}
		fmt.Fprintln(w, line)
	}
}
