package config

import (
	"fmt"
	"strings"
)

// healthy checks the healthy blocks and the drain options, at the top level
// and in each group. A group's value is checked only where the group wrote it:
// one it takes from the top level is checked there.
func (v *validator) healthy() {
	v.healthyBlock(scope{"healthy", "healthy"}, v.c.Healthy)
	v.stopJobs(scope{"drain", "drain"}.sub("stop_jobs"), v.c.Drain.StopJobs)
	for i, g := range v.c.Groups {
		s := groupScope(i, g.Name)
		v.healthyBlock(s.sub("healthy"), g.Healthy)
		ds := s.sub("drain")
		if v.written(ds.sub("deadline")) {
			v.positive(ds.sub("deadline"), g.Drain.Deadline)
		}
		v.stopJobs(ds.sub("stop_jobs"), g.Drain.StopJobs)
	}
}

// written reports whether the value at key was given in the file.
func (v *validator) written(key scope) bool {
	_, ok := v.c.pos[key.key]
	return ok
}

func (v *validator) healthyBlock(s scope, h HealthyConfig) {
	if k := s.sub("deadline"); v.written(k) || s.key == "healthy" {
		v.positive(k, h.Deadline)
	}
	if k := s.sub("on_deadline"); v.written(k) || s.key == "healthy" {
		switch h.OnDeadline {
		case OnDeadlineHold, OnDeadlineRelease:
		default:
			v.errorf(k, `unknown value %q: use "hold" or "release"`, h.OnDeadline)
		}
	}
}

// stopJobs checks a stop_jobs list written at key: each "job" or
// "namespace/job", none twice.
func (v *validator) stopJobs(key scope, jobs []string) {
	if !v.written(key) {
		return
	}
	seen := map[string]bool{}
	for i, j := range jobs {
		elem := fmt.Sprintf("%s.%d", key.key, i)
		ns, id, scoped := strings.Cut(j, "/")
		switch {
		case j == "" || (scoped && (ns == "" || id == "" || strings.Contains(id, "/"))):
			v.errorAt(elem, key.name, `%q is not a job: use "job" (any namespace) or "namespace/job"`, j)
		case seen[j]:
			v.errorAt(elem, key.name, "job %q is listed twice", j)
		}
		seen[j] = true
	}
}
