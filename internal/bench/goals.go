package bench

import (
	"fmt"
	"time"
)

// The goals that depend on the host count and the request latency
// (docs/performance.md, "Goals in production terms").
const (
	// latencyGoalHosts and latencyGoal are where the latency figures'
	// goals with a request latency are set: a remote or loaded leader at
	// 5,000 hosts.
	latencyGoalHosts = 5000
	latencyGoal      = 50 * time.Millisecond
	// requestsGoal is the Nomad requests per rebooted host, every rollboot
	// process together, at every host count and latency.
	requestsGoal = 25
)

// makespanGoal is the goal of a rollout's makespan ratio: the most the mean
// of the rollouts at that host count may reach, and how many rollouts the
// goal is set for. It is set with no request latency, at 1,000 hosts (twenty
// cycles per slot) and at 5,000: a smaller rollout's slots run too few cycles
// for it (the start and the tail, a fixed time each, weigh against one or two
// cycles). judged is false where no goal is set.
func makespanGoal(hosts int, latency time.Duration) (limit float64, rollouts int, judged bool) {
	switch {
	case latency > 0 || hosts < makespanGoalHosts:
		return 0, 0, false
	case hosts >= latencyGoalHosts:
		return 1.10, 3, true
	default:
		return 1.05, 5, true
	}
}

// makespanGoalText is the goal column of a makespan row: the goal judged
// there, or where the goals are set.
func makespanGoalText(hosts int, latency time.Duration) string {
	limit, rollouts, judged := makespanGoal(hosts, latency)
	if !judged {
		return fmt.Sprintf("<= 1.05 at %d hosts, 1.10 at %d, no latency", makespanGoalHosts, latencyGoalHosts)
	}
	return fmt.Sprintf("<= %.2f, mean of %d rollouts", limit, rollouts)
}

// latencyGoals are the goals of a latency figure: its limit with no request
// latency (0: none), and at latencyGoal on latencyGoalHosts or more (0: none).
type latencyGoals struct{ none, atGoal time.Duration }

// at says the goal of the figure at a host count and request latency: the
// goal column, the limit, and whether it is judged there (else the figure is
// for information, and the goal column says where the goals are set).
func (g latencyGoals) at(hosts int, latency time.Duration) (goal string, limit time.Duration, judged bool) {
	switch {
	case latency == 0 && g.none > 0:
		return "<= " + g.none.String(), g.none, true
	case latency == latencyGoal && hosts >= latencyGoalHosts && g.atGoal > 0:
		return "<= " + g.atGoal.String(), g.atGoal, true
	}
	var where string
	if g.none > 0 {
		where = fmt.Sprintf("<= %s with no latency", g.none)
	}
	if g.atGoal > 0 {
		if where != "" {
			where += ", "
		}
		where += fmt.Sprintf("<= %s at %s and %d hosts", g.atGoal, latencyGoal, latencyGoalHosts)
	}
	return where, 0, false
}

// The latency figures' goals.
var (
	handOffGoals  = latencyGoals{none: 500 * time.Millisecond, atGoal: time.Second}
	sentinelGoals = latencyGoals{none: time.Second}
	failoverGoals = latencyGoals{atGoal: 5 * time.Second}
)

// judge is the verdict of a figure against its goal: pass or FAIL where the
// goal is judged, info elsewhere.
func judge(judged, ok bool) string {
	if !judged {
		return "info"
	}
	return verdict(ok)
}
