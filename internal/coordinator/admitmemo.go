package coordinator

import (
	"maps"
	"reflect"
	"strconv"
	"time"

	"github.com/rollboot/rollboot/internal/alertgate"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
)

// What admission derives from a pass's snapshot before it offers any slot: the
// queue, the hosts the alerts, a settling group or a workload blocker hold, the
// groups' sizes and slots in use, the candidates in service, the clusters with
// a server out and the sealed Vaults. Each is a walk over every host, and a
// pass admits several times over the same snapshot (the alert, workload and
// capacity reads each ask for the queue, the capacity gate admits once per
// round of its reads, admitWithJobs once and again after each round that holds
// a host whose agent would be lost, the metrics
// want the group statuses): at 5,000 hosts those walks were most of a pass.
// They are computed once per snapshot and kept in it, keyed by what they are
// computed from that a pass may replace (the plans map, as preview does; the
// rules; the alerts and workloads read), so that a snapshot changed that way
// gets them computed again. Nothing kept is changed by its users: callers that
// change a queue or a map copy it first.
type admitMemo struct {
	// queue: admissionQueue, for the plans map queuePlans.
	queue      []policy.Request
	queuePlans uintptr
	queueDone  bool
	// busy: busyNames, for the plans map busyPlans.
	busy      []string
	busyPlans uintptr
	busyDone  bool
	// busyAt: the positions of busy in busyAtNames (busy.go).
	busyAt      []int
	busyAtPlans uintptr
	busyAtNames []string
	busyAtDone  bool
	// statuses: groupStatuses, for the plans and rules of statusesKey.
	statuses    []policy.GroupStatus
	statusesKey rulesKey
	statusesOK  bool
	// base: the rest, for the plans, rules, alerts and workloads of base.key.
	base   admitBase
	baseOK bool
	// last: the admission the capacity gate's last round made, for lastKey.
	last    admission
	lastKey admitKey
	lastOK  bool
}

// admitKey identifies the inputs of one admission: admission's (rulesKey),
// what the capacity gate read, and the hosts held because their agent would
// be lost (a map that only grows in a pass).
type admitKey struct {
	rules     rulesKey
	capacity  *capacityView
	agentLost int
}

func admitKeyOf(r admitRules, s *snapshot) admitKey {
	return admitKey{rules: keyOf(r, s), capacity: s.capacity, agentLost: len(s.agentLost)}
}

// admitted returns admit(r, s): the admission the capacity gate's last round
// made when nothing it is made from changed since (its reads were done then,
// and observe ends there), instead of admitting once more. The caller must
// not change it.
func admitted(r admitRules, s *snapshot) admission {
	m := &s.memo
	if m.lastOK && m.lastKey == admitKeyOf(r, s) {
		return m.last
	}
	return admit(r, s)
}

// keepAdmission keeps adm, made by admit(r, s), for admitted.
func keepAdmission(r admitRules, s *snapshot, adm admission) {
	s.memo.last, s.memo.lastKey, s.memo.lastOK = adm, admitKeyOf(r, s), true
}

// rulesKey identifies the inputs of a memo: the plans map, the rules (each
// admitRules call makes a new groups slice), the alerts and workloads read.
type rulesKey struct {
	plans          uintptr
	groups         *policy.Group
	nGroups        int
	drainDeadline  time.Duration
	groupDeadlines uintptr
	alerts         *alertgate.Verdict
	workloads      *workloadView
}

// admitBase is what admit starts from.
type admitBase struct {
	key rulesKey
	// queue: the hosts that compete for a slot, after the holds, in the
	// order admission serves them (policy.InQueueOrder).
	queue []policy.Request
	// held: why each host taken out of the queue waits (alerts, a settling
	// group, a workload blocker); settled: when a pass is due for them.
	held    map[string]phase.WaitReason
	settled time.Time
	// The rest of admission's inputs: see admit.
	statuses   []policy.GroupStatus
	spare      int
	serversOut map[string]string
	sealed     []string
	// queued: the reason of a host waiting for a slot of each group.
	queued map[string]phase.WaitReason
}

// mapID identifies a map (0: nil): a pass that replaces its plans map makes
// what was derived from it stale.
func mapID[K comparable, V any](m map[K]V) uintptr {
	return uintptr(reflect.ValueOf(m).UnsafePointer())
}

func keyOf(r admitRules, s *snapshot) rulesKey {
	k := rulesKey{plans: mapID(s.plans), nGroups: len(r.groups), drainDeadline: r.drainDeadline,
		groupDeadlines: mapID(r.groupDeadlines), alerts: s.alerts, workloads: s.workloads}
	if len(r.groups) > 0 {
		k.groups = &r.groups[0]
	}
	return k
}

// admissionQueue returns the pending hosts that may compete for a slot
// (buildAdmissionQueue), computed once per snapshot. The caller must not
// change it.
func admissionQueue(s *snapshot) []policy.Request {
	m, id := &s.memo, mapID(s.plans)
	if !m.queueDone || m.queuePlans != id {
		m.queue, m.queuePlans, m.queueDone = buildAdmissionQueue(s), id, true
	}
	return m.queue[:len(m.queue):len(m.queue)]
}

// groupStatuses returns each group's status (buildGroupStatuses), computed
// once per snapshot and rules. The caller must not change it.
func groupStatuses(r admitRules, s *snapshot) []policy.GroupStatus {
	m, k := &s.memo, keyOf(r, s)
	k.alerts, k.workloads = nil, nil // the statuses do not depend on them
	if !m.statusesOK || m.statusesKey != k {
		m.statuses, m.statusesKey, m.statusesOK = buildGroupStatuses(r, s), k, true
	}
	return m.statuses
}

// admitBase returns what admit starts from, computed once per snapshot, rules
// and what was read of the alerts and workloads.
func (s *snapshot) admitBase(r admitRules) *admitBase {
	m, k := &s.memo, keyOf(r, s)
	if m.baseOK && m.base.key == k {
		return &m.base
	}
	b := admitBase{key: k, held: map[string]phase.WaitReason{}}
	queue := holdForAlerts(s, admissionQueue(s), b.held)
	queue, settling, settled := settle(r, s, queue)
	maps.Copy(b.held, settling)
	b.settled = settled
	queue, held := workloadHolds(s, queue)
	if maps.Copy(b.held, held); len(held) > 0 {
		b.settled = sooner(b.settled, s.now.Add(workloadRecheck)) // workloads.go
	}
	b.queue = policy.InQueueOrder(queue) // sorted once, not in each admission
	b.statuses = groupStatuses(r, s)
	b.spare, b.serversOut, b.sealed = hostTallies(s)
	b.queued = make(map[string]phase.WaitReason, len(r.groups))
	for _, g := range r.groups {
		b.queued[g.Name] = phase.WaitFor(phase.WaitQueued, strconv.Quote(g.Name))
	}
	m.base, m.baseOK = b, true
	return &m.base
}

// rulesOf returns the admission rules of the pass that observed s, taken once
// for all its admissions: what admission derives from them is then computed
// once too.
func (c *Coordinator) rulesOf(s *snapshot) admitRules {
	if s.rules == nil {
		r := c.admitRules()
		s.rules = &r
	}
	return *s.rules
}

// queuedFor is the reason of a host waiting for a slot of group.
func (b *admitBase) queuedFor(group string) phase.WaitReason {
	if w, ok := b.queued[group]; ok {
		return w
	}
	return phase.WaitFor(phase.WaitQueued, strconv.Quote(group))
}
