// Package rejoin decides whether a host that came back from its reboot is
// healthy again, so that its slot may be freed: the allocations on its node are
// running and healthy, and (optionally) the Consul checks of its node pass. It
// also decides what happens when they are not within the healthy deadline. It is
// pure: the coordinator observes (coordinator/rejoinhealth.go) and passes what
// it read in, converted to plain values by nomad.go.
package rejoin

import (
	"fmt"
	"strings"
	"time"
)

// What to do with a host whose workloads are not healthy at the deadline.
const (
	// OnDeadlineHold keeps the slot taken and reports the host stuck, until its
	// workloads are healthy or an operator frees the slot (`rollboot release`).
	OnDeadlineHold = "hold"
	// OnDeadlineRelease frees the slot and raises an alert (log and metric).
	OnDeadlineRelease = "release"
)

// Settings are a group's healthy block, the top-level one's values filling what
// the group does not set.
type Settings struct {
	// Deadline is how long after the host came back its workloads may take to
	// be healthy.
	Deadline time.Duration
	// OnDeadline is OnDeadlineHold or OnDeadlineRelease.
	OnDeadline string
	// ConsulChecks: the Consul checks of the node (its services' and its own)
	// must pass too.
	ConsulChecks bool
}

// Alloc is what the decision looks at of one allocation on the node.
type Alloc struct {
	Name          string // the allocation's name, such as "web.api[0]"
	JobType       string // service, system, batch, sysbatch
	DesiredStatus string // run, stop, evict
	ClientStatus  string // pending, running, complete, failed, lost, unknown
	// Healthy is DeploymentStatus.Healthy: nil while the client has not set it.
	Healthy *bool
	// FailedTask names a task whose state says it failed ("": none).
	FailedTask string
}

// Check is one Consul health check of the node (consul/api HealthCheck).
type Check struct {
	Name        string
	ServiceName string // "" for a node check
	Status      string // passing, warning, critical, maintenance
}

// Observed is what the coordinator read of the node.
type Observed struct {
	Allocs []Alloc
	// AllocsErr says why the node's allocations could not be read: the host is
	// held with it (fail closed).
	AllocsErr error
	// Checks are read only with Settings.ConsulChecks; ChecksErr says why they
	// could not be.
	Checks    []Check
	ChecksErr error
}

// Hold is what keeps the slot taken.
type Hold int

const (
	// None: the host is healthy, its slot may be freed.
	None Hold = iota
	// Starting: allocations are still starting (pending, or unknown until
	// their client reports after reconnecting) or their client has not set
	// their health yet; none is known to be unhealthy.
	Starting
	// Allocs: an allocation is unhealthy or failed, or they cannot be read.
	Allocs
	// Checks: a Consul check does not pass, or they cannot be read.
	Checks
)

// Verdict is the decision.
type Verdict struct {
	Hold Hold
	// Detail says what holds, such as "web.api[0] unhealthy".
	Detail string
	// Past: the deadline passed with Hold still set.
	Past bool
	// Release: past the deadline, free the slot all the same (and alert).
	Release bool
}

// Decide decides for a host that came back elapsed ago.
func Decide(o Observed, s Settings, elapsed time.Duration) Verdict {
	v := judge(o, s)
	if v.Hold != None && elapsed >= s.Deadline {
		v.Past = true
		v.Release = s.OnDeadline == OnDeadlineRelease
	}
	return v
}

func judge(o Observed, s Settings) Verdict {
	if o.AllocsErr != nil {
		return Verdict{Hold: Allocs, Detail: o.AllocsErr.Error()}
	}
	if bad, starting := unhealthyAllocs(o.Allocs); len(bad) > 0 {
		h := Allocs
		if starting {
			h = Starting
		}
		return Verdict{Hold: h, Detail: list(bad)}
	}
	if s.ConsulChecks {
		if o.ChecksErr != nil {
			return Verdict{Hold: Checks, Detail: o.ChecksErr.Error()}
		}
		if bad := failingChecks(o.Checks); len(bad) > 0 {
			return Verdict{Hold: Checks, Detail: list(bad)}
		}
	}
	return Verdict{}
}

// unhealthyAllocs says what is wrong with each allocation Nomad wants running
// on the node. Allocations being stopped are left out. A batch allocation that
// completed is done; one of a service or system job is healthy once its client
// set its health (client/allocrunner/health_hook.go: after the group's
// min_healthy_time with its checks passing), so waiting for it gives Nomad's own
// min_healthy_time. starting: every one named is only starting (pending, or its
// health not set yet).
func unhealthyAllocs(allocs []Alloc) (out []string, starting bool) {
	starting = true
	for _, a := range allocs {
		if a.DesiredStatus != "run" {
			continue
		}
		var why string
		switch {
		case a.FailedTask != "":
			why = "task " + a.FailedTask + " failed"
		case a.ClientStatus == "complete":
			continue
		case a.ClientStatus != "running":
			why = a.ClientStatus
		case a.JobType == "batch" || a.JobType == "sysbatch":
			continue
		case a.Healthy == nil:
			why = "health not set yet"
		case !*a.Healthy:
			why = "unhealthy"
		default:
			continue
		}
		// "unknown": the client has not reported since it reconnected.
		starting = starting && (why == "pending" || why == "unknown" || why == "health not set yet")
		out = append(out, a.Name+" "+why)
	}
	return out, starting
}

// failingChecks names the checks that do not pass: "service:api critical" for
// a service's check, "<check name> critical" for a node check.
func failingChecks(checks []Check) []string {
	var out []string
	for _, c := range checks {
		if c.Status == "passing" {
			continue
		}
		name := c.Name
		if c.ServiceName != "" {
			name = "service:" + c.ServiceName
		}
		out = append(out, name+" "+c.Status)
	}
	return out
}

// maxListed bounds the problems named in a reason.
const maxListed = 3

func list(items []string) string {
	if len(items) <= maxListed {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s (and %d more)", strings.Join(items[:maxListed], ", "), len(items)-maxListed)
}
