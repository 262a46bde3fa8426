package silence

import (
	"regexp"
	"sort"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

// Kept is what rollboot remembers of a host's silence, in its state so that a
// new leader carries on with it (store.Silences).
type Kept struct {
	// ID is the silence's ID in Alertmanager ("" when its creation failed).
	ID string `json:"id,omitempty"`
	// EndsAt is when the silence ends, as last written.
	EndsAt time.Time `json:"ends_at,omitzero"`
	// Err is the last write that failed ("" after one that succeeded), ErrAt
	// when.
	Err   string    `json:"error,omitempty"`
	ErrAt time.Time `json:"error_at,omitzero"`
}

// Op is what an Action does.
type Op string

const (
	// OpCreate creates a silence for the host.
	OpCreate Op = "create"
	// OpExtend sets the end of the host's silence: later while the host is
	// out, earlier (its tail) once it is back.
	OpExtend Op = "extend"
	// OpEnd ends the host's silence now (its host is stuck, or silences are
	// turned off for it).
	OpEnd Op = "end"
	// OpForget drops a silence that ended from the state.
	OpForget Op = "forget"
)

// Action is one thing to do to Alertmanager (or to the state alone, for
// OpForget).
type Action struct {
	Op       Op
	Host     string
	ID       string    // the silence of OpExtend and OpEnd
	Matchers []Matcher // of OpCreate
	EndsAt   time.Time // of OpCreate and OpExtend
	// Err is why the silence of OpCreate cannot be written (its matchers do
	// not render for the host): nothing is sent, and it counts as a failure.
	Err error
}

// Decision is every action due at Input.Now, and when to decide again
// without any other change (zero: only on a change).
type Decision struct {
	Actions   []Action
	RecheckAt time.Time
}

// Input is what Desired decides from.
type Input struct {
	// Plans are the hosts' plans as stored (a host without a plan is idle).
	Plans map[string]store.Plan
	// Rules are the silence settings of a group.
	Rules func(group string) Rules
	// Kept are the silences remembered, by host.
	Kept map[string]Kept
	// Retry is how long after a failed write the host's silence is written
	// again.
	Retry time.Duration
	Now   time.Time
}

// out reports whether a host in phase is out of service for its reboot: from
// its drain's start until it is back.
func out(phase string) bool {
	switch phase {
	case store.PhaseDraining, store.PhaseDrained, store.PhaseRebooting, store.PhaseRejoining:
		return true
	}
	return false
}

// Desired decides what to do so that each host has a silence exactly while it
// is out: created when its drain starts, extended while it is out once less
// than half of rules.Duration is left, ended rules.Tail after it is back
// (after it left its last phase out of service), ended at once when it is
// stuck (never extended then: a real failure must page), ended when its
// group's silences are turned off, and forgotten once ended. A host whose
// last write failed is written again no sooner than Retry after it; a
// failed creation is remembered (for status) until the tail after the host
// is back.
func Desired(in Input) Decision {
	var d Decision
	hosts := map[string]bool{}
	for h, p := range in.Plans {
		if out(p.Phase) {
			hosts[h] = true
		}
	}
	for h := range in.Kept {
		hosts[h] = true
	}
	names := make([]string, 0, len(hosts))
	for h := range hosts {
		names = append(names, h)
	}
	sort.Strings(names)
	for _, h := range names {
		p, hasPlan := in.Plans[h]
		var r Rules
		if hasPlan {
			r = in.Rules(p.Group)
		}
		k := in.Kept[h]
		a, recheck := decideHost(h, p, hasPlan, r, k, in.Now)
		if retry := k.ErrAt.Add(in.Retry); a.Op != "" && a.Op != OpForget && k.Err != "" && in.Now.Before(retry) {
			a, recheck = Action{}, retry
		}
		if a.Op != "" {
			d.Actions = append(d.Actions, a)
		}
		if !recheck.IsZero() && (d.RecheckAt.IsZero() || recheck.Before(d.RecheckAt)) {
			d.RecheckAt = recheck
		}
	}
	return d
}

// decideHost is Desired for one host: its action (Op "" for none) and when
// to look at it again.
func decideHost(h string, p store.Plan, hasPlan bool, r Rules, k Kept, now time.Time) (Action, time.Time) {
	active := k.ID != "" && k.EndsAt.After(now)
	switch {
	case hasPlan && out(p.Phase) && len(r.Matchers) > 0:
		if !active {
			ms, err := r.render(Vars{Host: h, HostRegex: regexp.QuoteMeta(h), Group: p.Group})
			return Action{Op: OpCreate, Host: h, Matchers: ms, EndsAt: now.Add(r.Duration), Err: err}, time.Time{}
		}
		if extendAt := k.EndsAt.Add(-r.Duration / 2); !now.Before(extendAt) {
			return Action{Op: OpExtend, Host: h, ID: k.ID, EndsAt: now.Add(r.Duration)}, time.Time{}
		} else {
			return Action{}, extendAt
		}
	case !active && k == (Kept{}):
		return Action{}, time.Time{}
	case !active && k.ID == "" && hasPlan && p.Phase != store.PhaseStuck && len(r.Matchers) > 0 && now.Before(p.PhaseSince.Add(r.Tail)):
		// A silence that could not be written is shown (status) until the
		// tail after its host is back, as the silence would have lasted.
		return Action{}, p.PhaseSince.Add(r.Tail)
	case !active:
		return Action{Op: OpForget, Host: h}, time.Time{}
	case hasPlan && p.Phase == store.PhaseStuck, len(r.Matchers) == 0:
		return Action{Op: OpEnd, Host: h, ID: k.ID}, time.Time{}
	}
	// Back: the silence lasts until the tail after the host left its last
	// phase out of service, never longer than it was.
	end := p.PhaseSince.Add(r.Tail)
	switch {
	case !end.After(now):
		return Action{Op: OpEnd, Host: h, ID: k.ID}, time.Time{}
	case k.EndsAt.After(end):
		return Action{Op: OpExtend, Host: h, ID: k.ID, EndsAt: end}, time.Time{}
	}
	return Action{}, k.EndsAt
}
