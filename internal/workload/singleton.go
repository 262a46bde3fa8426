package workload

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Singletons: a Nomad drain stops a task group whose job asks for one
// instance (count = 1) before its replacement runs elsewhere (nomad#11879,
// #5916), so its service is down for the drain. A group's singletons = "hold"
// keeps such a node in service until an operator approves the drain
// (`rollboot approve HOST`) or the singleton goes away.

// SingletonsHold and SingletonsAllow are the values of a group's singletons.
const (
	SingletonsHold  = "hold"
	SingletonsAllow = "allow"
)

// TaskGroup is a job's task group.
type TaskGroup struct {
	Job   JobKey
	Group string
}

func (g TaskGroup) String() string { return g.Job.String() + "." + g.Group }

// GroupAlloc is an allocation as the singleton check sees it.
type GroupAlloc struct {
	TaskGroup
	NodeID string
	// JobType is its job's type; Count its task group's count in the job
	// version the allocation runs (Allocation.Job).
	JobType string
	Count   int
	// Terminal: the allocation is stopped or stopping (Nomad's
	// Allocation.TerminalStatus).
	Terminal bool
	// Healthy: it runs (client status running) and its deployment, if any,
	// did not mark it unhealthy.
	Healthy bool
}

// Candidates are the task groups on node whose allocations may be singletons:
// a live allocation of a service or batch job whose group's count is 1
// (system and sysbatch jobs run on every node and are not moved by a drain).
// Whether another healthy instance runs elsewhere is asked of each
// (Singletons).
func Candidates(node string, onNode []GroupAlloc) []TaskGroup {
	var out []TaskGroup
	for _, a := range onNode {
		if a.NodeID != node || a.Terminal || a.Count != 1 || (a.JobType != "service" && a.JobType != "batch" && a.JobType != "") {
			continue
		}
		if !slices.Contains(out, a.TaskGroup) {
			out = append(out, a.TaskGroup)
		}
	}
	slices.SortFunc(out, func(a, b TaskGroup) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Singletons are the candidates of node with no other healthy instance: none
// of the allocations of their jobs (jobAllocs, by job) on another node is
// live and healthy. A job whose allocations were not read (missing from
// jobAllocs) counts as a singleton: the check fails closed.
func Singletons(node string, candidates []TaskGroup, jobAllocs map[JobKey][]GroupAlloc) []TaskGroup {
	var out []TaskGroup
	for _, g := range candidates {
		other := slices.ContainsFunc(jobAllocs[g.Job], func(a GroupAlloc) bool {
			return a.TaskGroup == g && a.NodeID != node && !a.Terminal && a.Healthy
		})
		if !other {
			out = append(out, g)
		}
	}
	return out
}

// SingletonHold says why a host whose group holds singletons waits (""
// when it does not): its node runs singletons and no approval of the host
// stands at now (approvedUntil: the approval's expiry, zero for none).
func SingletonHold(host string, singletons []TaskGroup, approvedUntil, now time.Time) string {
	if len(singletons) == 0 || now.Before(approvedUntil) {
		return ""
	}
	names := make([]string, len(singletons))
	for i, g := range singletons {
		names[i] = g.String()
	}
	what := "job group "
	if len(names) > 1 {
		what = "job groups "
	}
	return fmt.Sprintf("runs the only instance of %s%s (count = 1): a drain stops it; rollboot approve %s lets it drain",
		what, strings.Join(names, ", "), host)
}
