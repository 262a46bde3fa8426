package nomadsim

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim/simfeasible"
)

// JobSpec is the small job model the emulator schedules: enough for drains, reboots
// and the demo. Allocations have one task and use their group's CPU and memory
// (resources.go); they start and stop in Config.MigrateTime.
type JobSpec struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace,omitempty"` // default "default"
	Type      string `json:"type,omitempty"`      // service (default), batch or system
	// NodePool restricts placement to one node pool. Empty: every pool (Nomad's
	// built-in pool "all").
	NodePool string `json:"node_pool,omitempty"`
	// RunTime is how long a batch allocation runs before it completes on its own.
	// 0: it runs until stopped.
	RunTime time.Duration `json:"run_time,omitempty"`
	// Groups are the task groups. Empty: one group named after the job, count 1.
	Groups []GroupSpec `json:"groups,omitempty"`
	// DisconnectLostAfter is every group's disconnect.lost_after (Nomad ≥ 1.8;
	// max_client_disconnect before, ignored since 1.10): when the node misses its
	// heartbeats, it goes disconnected instead of down and the allocations become
	// unknown until the node is back (heartbeat.go). System jobs only. 0: none.
	DisconnectLostAfter time.Duration `json:"disconnect_lost_after,omitempty"`
	// Meta is the job's meta block (Job.Meta), which job list filters see.
	Meta map[string]string `json:"meta,omitempty"`
	// Update: the job has an update block, so each version gets a deployment
	// (deployments.go). Service jobs only.
	Update bool `json:"update,omitempty"`
	// Constraints are the job's constraint blocks (constraints.go).
	Constraints []ConstraintSpec `json:"constraints,omitempty"`
	// Driver is the task driver of every group's task ("raw_exec", "docker");
	// its allocations go only on nodes where it is detected and healthy
	// (constraints.go). "": the task names none the emulator checks.
	Driver string `json:"driver,omitempty"`
}

// GroupSpec is a task group.
type GroupSpec struct {
	Name  string `json:"name"`
	Count int    `json:"count,omitempty"` // ignored for system jobs; default 1
	// MigrateMaxParallel is the group's migrate.max_parallel (default 1, as in
	// nomad/structs DefaultMigrateStrategy).
	MigrateMaxParallel int `json:"migrate_max_parallel,omitempty"`
	// MigrateMinHealthyTime and MigrateHealthyDeadline are the group's
	// migrate.min_healthy_time and migrate.healthy_deadline (0: Config.MinHealthyTime
	// and Config.HealthyDeadline, Nomad's 10s and 5m scaled). JSON: Go duration
	// strings or integer nanoseconds.
	MigrateMinHealthyTime  time.Duration `json:"migrate_min_healthy_time,omitempty"`
	MigrateHealthyDeadline time.Duration `json:"migrate_healthy_deadline,omitempty"`
	// FailHealthChecks: the group's health checks never pass, so its clients mark
	// every allocation unhealthy at its healthy deadline (client/allocrunner/
	// health_hook.go watchHealth).
	FailHealthChecks bool `json:"fail_health_checks,omitempty"`
	// CPU (MHz) and MemoryMB are what each allocation of the group uses (0:
	// Nomad's defaults, DefaultGroupCPU and DefaultGroupMemoryMB; resources.go).
	CPU      int64 `json:"cpu,omitempty"`
	MemoryMB int64 `json:"memory_mb,omitempty"`
	// Constraints are the group's constraint blocks (constraints.go).
	Constraints []ConstraintSpec `json:"constraints,omitempty"`
	// Task is the name of the group's one task (default: the group's name);
	// the task's workload identity names it (workloadid.go).
	Task string `json:"task,omitempty"`
	// IdentityEnv: the task's identity block says env = true, so the task
	// finds its workload identity in NOMAD_TOKEN (TaskIdentities).
	IdentityEnv bool `json:"identity_env,omitempty"`
}

// UnmarshalJSON accepts run_time as a Go duration string ("30s") or integer ns.
func (j *JobSpec) UnmarshalJSON(b []byte) error {
	type plain JobSpec
	aux := struct {
		*plain
		RunTime   json.RawMessage `json:"run_time,omitempty"`
		LostAfter json.RawMessage `json:"disconnect_lost_after,omitempty"`
	}{plain: (*plain)(j)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	d, err := decodeDurationJSON(aux.RunTime)
	if err != nil {
		return fmt.Errorf("run_time: %w", err)
	}
	j.RunTime = d
	if j.DisconnectLostAfter, err = decodeDurationJSON(aux.LostAfter); err != nil {
		return fmt.Errorf("disconnect_lost_after: %w", err)
	}
	return nil
}

// MarshalJSON writes run_time as a Go duration string.
func (j JobSpec) MarshalJSON() ([]byte, error) {
	type plain JobSpec
	aux := struct {
		plain
		RunTime   string `json:"run_time,omitempty"`
		LostAfter string `json:"disconnect_lost_after,omitempty"`
	}{plain: plain(j)}
	if j.RunTime != 0 {
		aux.RunTime = j.RunTime.String()
	}
	if j.DisconnectLostAfter != 0 {
		aux.LostAfter = j.DisconnectLostAfter.String()
	}
	return json.Marshal(aux)
}

// decodeDurationJSON reads a duration written as "50ms" or as integer nanoseconds.
func decodeDurationJSON(raw json.RawMessage) (time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" {
			return 0, nil
		}
		return time.ParseDuration(s)
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, fmt.Errorf("want a duration such as \"50ms\" or integer nanoseconds, got %s", raw)
	}
	return time.Duration(n), nil
}

type jobKey struct{ ns, id string }

type simJob struct {
	spec JobSpec
	job  *api.Job // embedded in every allocation; never changed after AddJob
	// constraints: by group, the constraints its allocations must meet.
	constraints map[string]simfeasible.Set
	// distinct: by group, its distinct_hosts constraints (constraints.go).
	distinct map[string]distinctHosts
	// checksFailingOn: the nodes where its service checks fail in Consul
	// (SetServiceCheckFailing, services.go).
	checksFailingOn map[string]bool
}

func (j *simJob) group(name string) *GroupSpec {
	for i := range j.spec.Groups {
		if j.spec.Groups[i].Name == name {
			return &j.spec.Groups[i]
		}
	}
	return nil
}

// simAlloc is an allocation and the times at which its client moves it on.
type simAlloc struct {
	a *api.Allocation
	// nameIdx is the index in the allocation's name ("job.group[3]"), parsed
	// once (nameIndex); -1 until then.
	nameIdx  int
	job      *simJob
	startAt  time.Time // pending → running
	stopAt   time.Time // desired stop → complete
	finishAt time.Time // batch: running → complete on its own (zero: never)
	taskDead bool      // the task died and waits to be restarted (SetTaskRunning)
	identity string    // its task's signed workload identity, once asked for (workloadid.go)

	// Health (migrate.go): the client marks the allocation healthy at healthAt
	// (running + min_healthy_time) or unhealthy at healthDeadline.
	healthAt       time.Time
	healthDeadline time.Time
	// markRound is the drainer round that marked it for migration (drain.go).
	markRound uint64
}

// Event types for allocations, in addition to those in sim.go.
const (
	// EventAllocPlace: the scheduler placed an allocation (ClientStatus pending).
	EventAllocPlace = "alloc.place"
	// EventAllocStopping: the scheduler set DesiredStatus "stop" (migration, drain
	// deadline, end of drain for system allocs).
	EventAllocStopping = "alloc.stopping"
)

// AddJob registers a job and places its allocations at once.
func (s *Sim) AddJob(spec JobSpec) error {
	if spec.ID == "" {
		return fmt.Errorf("job: id is required")
	}
	if spec.Namespace == "" {
		spec.Namespace = "default"
	}
	switch spec.Type {
	case "":
		spec.Type = api.JobTypeService
	case api.JobTypeService, api.JobTypeBatch, api.JobTypeSystem:
	default:
		return fmt.Errorf("job %s: type %q: want service, batch or system", spec.ID, spec.Type)
	}
	if spec.RunTime < 0 {
		return fmt.Errorf("job %s: run_time must not be negative", spec.ID)
	}
	if spec.DisconnectLostAfter < 0 {
		return fmt.Errorf("job %s: disconnect_lost_after must not be negative", spec.ID)
	}
	if spec.DisconnectLostAfter > 0 && spec.Type != api.JobTypeSystem {
		// Service and batch allocations on a disconnected node would be
		// replaced and reconciled on reconnect (disconnect.replace and
		// reconcile), which the emulator does not model.
		return fmt.Errorf("job %s: disconnect_lost_after is modelled for system jobs only", spec.ID)
	}
	if spec.Update && spec.Type != api.JobTypeService {
		return fmt.Errorf("job %s: update (a deployment) is modelled for service jobs only", spec.ID)
	}
	spec.Meta = maps.Clone(spec.Meta)
	spec.Groups = slices.Clone(spec.Groups)
	if len(spec.Groups) == 0 {
		spec.Groups = []GroupSpec{{Name: spec.ID, Count: 1}}
	}
	seen := map[string]bool{}
	for i := range spec.Groups {
		g := &spec.Groups[i]
		if g.Name == "" {
			return fmt.Errorf("job %s: group %d: name is required", spec.ID, i)
		}
		if seen[g.Name] {
			return fmt.Errorf("job %s: group %q defined twice", spec.ID, g.Name)
		}
		seen[g.Name] = true
		if g.Count < 0 || g.MigrateMaxParallel < 0 || g.MigrateMinHealthyTime < 0 || g.MigrateHealthyDeadline < 0 {
			return fmt.Errorf("job %s: group %s: count, migrate_max_parallel, migrate_min_healthy_time and migrate_healthy_deadline must not be negative", spec.ID, g.Name)
		}
		if g.Count == 0 {
			g.Count = 1
		}
		if spec.Type == api.JobTypeSystem {
			g.Count = 1
		}
		if g.MigrateMaxParallel == 0 {
			g.MigrateMaxParallel = 1
		}
		if err := groupResources(g); err != nil {
			return fmt.Errorf("job %s: %w", spec.ID, err)
		}
		s.migrateDefaults(g)
	}

	jobCons, err := apiConstraints(spec.Constraints)
	if err != nil {
		return fmt.Errorf("job %s: %w", spec.ID, err)
	}
	groupCons := make([][]*api.Constraint, len(spec.Groups))
	for i, g := range spec.Groups {
		if groupCons[i], err = apiConstraints(g.Constraints); err != nil {
			return fmt.Errorf("job %s: group %s: %w", spec.ID, g.Name, err)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	key := jobKey{spec.Namespace, spec.ID}
	if _, ok := s.cluster.jobs[key]; ok {
		return fmt.Errorf("job %s in namespace %s exists", spec.ID, spec.Namespace)
	}
	idx := s.bumpLocked()
	pool := spec.NodePool
	if pool == "" {
		pool = "all"
	}
	job := &api.Job{
		ID:             pointerOf(spec.ID),
		Name:           pointerOf(spec.ID),
		Namespace:      pointerOf(spec.Namespace),
		Region:         pointerOf(s.cfg.Region),
		Type:           pointerOf(spec.Type),
		NodePool:       pointerOf(pool),
		Datacenters:    []string{"*"},
		Priority:       pointerOf(50),
		Status:         pointerOf("running"),
		Version:        pointerOf(uint64(0)),
		Stable:         pointerOf(true),
		CreateIndex:    pointerOf(idx),
		ModifyIndex:    pointerOf(idx),
		JobModifyIndex: pointerOf(idx),
		Meta:           spec.Meta,
		Constraints:    jobCons,
	}
	for i, g := range spec.Groups {
		tg := &api.TaskGroup{Name: pointerOf(g.Name), Count: pointerOf(g.Count), Constraints: groupCons[i]}
		if spec.Driver != "" {
			tg.Tasks = []*api.Task{{Name: g.Name, Driver: spec.Driver}}
		}
		if spec.DisconnectLostAfter > 0 {
			tg.Disconnect = &api.DisconnectStrategy{LostAfter: pointerOf(spec.DisconnectLostAfter)}
			tg.Disconnect.Canonicalize()
		}
		if spec.Type == api.JobTypeService {
			// Only service jobs have a migrate block (structs.TaskGroup Canonicalize).
			tg.Migrate = &api.MigrateStrategy{
				MaxParallel:     pointerOf(g.MigrateMaxParallel),
				HealthCheck:     pointerOf("checks"),
				MinHealthyTime:  pointerOf(g.MigrateMinHealthyTime),
				HealthyDeadline: pointerOf(g.MigrateHealthyDeadline),
			}
		}
		job.TaskGroups = append(job.TaskGroups, tg)
	}
	sj := &simJob{spec: spec, job: job, constraints: groupConstraints(job), distinct: groupDistinct(job)}
	s.cluster.jobs[key] = sj
	s.cluster.jobOrder = append(s.cluster.jobOrder, key)
	s.cluster.wl.registeredLocked(s, sj, idx)
	s.cluster.scheduleLocked(s, time.Now())
	return nil
}

// Jobs returns the specs of the registered jobs, in registration order.
func (s *Sim) Jobs() []JobSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]JobSpec, 0, len(s.cluster.jobOrder))
	for _, k := range s.cluster.jobOrder {
		sp := s.cluster.jobs[k].spec
		sp.Groups = slices.Clone(sp.Groups)
		out = append(out, sp)
	}
	return out
}

func pointerOf[T any](v T) *T { return &v }

// allocClientTerminal is Allocation.ClientTerminalStatus: complete, failed or lost.
func allocClientTerminal(a *api.Allocation) bool {
	switch a.ClientStatus {
	case api.AllocClientStatusComplete, api.AllocClientStatusFailed, api.AllocClientStatusLost:
		return true
	}
	return false
}

// allocTerminal is Allocation.TerminalStatus: desired stop/evict or client-terminal.
func allocTerminal(a *api.Allocation) bool {
	return a.DesiredStatus == api.AllocDesiredStatusStop || a.DesiredStatus == api.AllocDesiredStatusEvict || allocClientTerminal(a)
}

func allocShouldMigrate(a *api.Allocation) bool {
	return a.DesiredTransition.Migrate != nil && *a.DesiredTransition.Migrate
}

// touchAllocLocked records a write to a in the current batch.
func (c *clusterState) touchAllocLocked(s *Sim, a *api.Allocation) uint64 {
	idx := c.writeLocked(s)
	a.ModifyIndex = idx
	a.ModifyTime = time.Now().UnixNano()
	c.allocsIndex = idx
	c.topics.allocWrittenLocked(a)
	return idx
}

func (c *clusterState) allocEventLocked(s *Sim, typ string, a *api.Allocation, details map[string]string) {
	d := map[string]string{
		"alloc_id": a.ID, "job": a.JobID, "namespace": a.Namespace, "group": a.TaskGroup,
		"client_status": a.ClientStatus, "desired_status": a.DesiredStatus,
		"job_type": *a.Job.Type,
	}
	maps.Copy(d, details)
	host := ""
	if sn, ok := c.nodes[a.NodeID]; ok {
		host = sn.host.Name
	}
	s.eventLocked(Event{Type: typ, Host: host, NodeID: a.NodeID, Details: d})
}

// clientUpdatesLocked is the clients' side: each client whose host is up reports
// its allocations' progress (client/allocrunner → Node.UpdateAlloc, batched).
func (c *clusterState) clientUpdatesLocked(s *Sim, now time.Time) {
	defer c.endBatch()
	for _, id := range c.allocOrder {
		sa := c.allocs[id]
		a := sa.a
		if allocClientTerminal(a) {
			continue
		}
		sn, ok := c.nodes[a.NodeID]
		if !ok || !sn.host.Up || sn.node.Status != api.NodeStatusReady {
			continue
		}
		switch {
		case a.DesiredStatus != api.AllocDesiredStatusRun:
			if !now.Before(sa.stopAt) {
				a.ClientStatus = api.AllocClientStatusComplete
				a.ClientDescription = "All tasks have completed"
				c.wl.triggers.allocFreed()
				c.touchAllocLocked(s, a)
				c.allocEventLocked(s, EventAllocStop, a, nil)
			}
		case a.ClientStatus == api.AllocClientStatusPending:
			if !now.Before(sa.startAt) && !sa.taskDead {
				a.ClientStatus = api.AllocClientStatusRunning
				a.ClientDescription = "Tasks are running"
				sa.healthAt = now.Add(sa.minHealthyTime(s))
				if *a.Job.Type == api.JobTypeBatch && sa.job.spec.RunTime > 0 {
					sa.finishAt = now.Add(sa.job.spec.RunTime)
				}
				c.touchAllocLocked(s, a)
				c.allocEventLocked(s, EventAllocStart, a, nil)
			}
		case a.ClientStatus == api.AllocClientStatusRunning && !sa.finishAt.IsZero() && !now.Before(sa.finishAt):
			a.ClientStatus = api.AllocClientStatusComplete
			a.ClientDescription = "All tasks have completed"
			c.wl.triggers.allocFreed()
			c.touchAllocLocked(s, a)
			c.allocEventLocked(s, EventAllocStop, a, map[string]string{"reason": "finished"})
		case a.ClientStatus == api.AllocClientStatusRunning:
			c.allocHealthLocked(s, sa, now)
		}
	}
}

// stopAllocLocked is the scheduler stopping an allocation (DesiredStatus "stop");
// its client reports it complete after MigrateTime.
func (c *clusterState) stopAllocLocked(s *Sim, sa *simAlloc, now time.Time, desc string) {
	a := sa.a
	a.DesiredStatus = api.AllocDesiredStatusStop
	a.DesiredDescription = desc
	sa.stopAt = now.Add(s.cfg.MigrateTime)
	c.touchAllocLocked(s, a)
	c.allocEventLocked(s, EventAllocStopping, a, map[string]string{"reason": desc})
}

// scheduleLocked is the scheduler (scheduler/generic_sched.go for service and
// batch, scheduler/scheduler_system.go for system jobs, reconciled every tick):
//   - allocations marked for migration are stopped and replaced elsewhere
//     (reconciler "migrate");
//   - service and batch groups get allocations until Count are live (a batch
//     allocation that completed on its own counts as done), spread over ready
//     nodes that meet their constraints (constraints.go), least-loaded first;
//   - system groups get one allocation on every node that is Ready()
//     (structs.Node.Ready: status ready, no drain strategy, eligible) and meets
//     their constraints. A node that
//     stays ineligible after a drain therefore gets no system allocation back
//     until it is made eligible (scheduler/util.go readyNodesInDCsAndPool skips
//     ineligible nodes for new placements). A node that meets the constraints
//     but lacks the room is a failed placement, with a blocked evaluation
//     about that node (evals.go, scheduler_system.go computePlacements);
//   - a stopped job gets nothing (StopJob stopped its allocations).
func (c *clusterState) scheduleLocked(s *Sim, now time.Time) {
	defer c.endBatch()
	marked := false // a mark is left for a later round
	defer func() { c.sched = schedInputsOf(c, marked) }()
	// Stop allocations the drainer marked for migration.
	for _, id := range c.allocOrder {
		sa := c.allocs[id]
		// The drainer's mark reaches the scheduler with its evaluation, in a
		// later round (drainer.go drainAllocs commits the transition and the
		// evaluation; a scheduler worker then dequeues it).
		if allocShouldMigrate(sa.a) && sa.a.DesiredStatus == api.AllocDesiredStatusRun && !allocClientTerminal(sa.a) {
			if sa.markRound < c.drainRound {
				c.stopAllocLocked(s, sa, now, "alloc is being migrated")
			} else {
				marked = true
			}
		}
	}
	nodes := c.sortedNodesLocked(s)
	load := map[string]int{}
	for _, a := range c.allocs {
		if !allocTerminal(a.a) {
			load[a.a.NodeID]++
		}
	}
	room := &lazyRoom{c: c} // most rounds place nothing: no need to count every allocation
	// Each group's allocations in creation order, gathered in one walk (a
	// group's placements below add only allocations of that group).
	byGroup := map[groupKey][]*simAlloc{}
	for _, id := range c.allocOrder {
		sa := c.allocs[id]
		k := groupKey{sa.a.Namespace, sa.a.JobID, sa.a.TaskGroup}
		byGroup[k] = append(byGroup[k], sa)
	}
	for _, key := range c.jobOrder {
		j := c.jobs[key]
		if jobStopped(j) {
			continue // every allocation was stopped with it (StopJob)
		}
		var fails []sysFailure // system jobs: each group's first failed placement
		candidates := 0        // system jobs: the ready nodes of its pool
		for gi, g := range j.spec.Groups {
			var live, done []*simAlloc
			var prev []*simAlloc // stopped allocs without a replacement yet
			onNode := map[string]bool{}
			for _, sa := range byGroup[groupKey{j.spec.Namespace, j.spec.ID, g.Name}] {
				a := sa.a
				switch {
				case !allocTerminal(a):
					live = append(live, sa)
					onNode[a.NodeID] = true
				case j.spec.Type == api.JobTypeBatch && a.DesiredStatus == api.AllocDesiredStatusRun && a.ClientStatus == api.AllocClientStatusComplete:
					done = append(done, sa)
				case a.NextAllocation == "":
					prev = append(prev, sa)
				}
			}
			if j.spec.Type == api.JobTypeSystem {
				failed := false // the group's first failed placement is recorded
				for _, sn := range nodes {
					if !nodeReady(sn.node) || !jobInPool(j, sn.node) {
						continue
					}
					if gi == 0 {
						candidates++
					}
					if onNode[sn.node.ID] || !j.feasible(g.Name, sn.node) {
						continue // filtered: no blocked evaluation (evals.go)
					}
					if dim := room.exhausted(sn.node.ID, j, g.Name); dim != "" {
						if !failed {
							fails = append(fails, sysFailure{group: g.Name, node: sn, dimension: dim})
							failed = true
						}
						continue
					}
					var p *simAlloc
					for _, sa := range prev {
						if sa.a.NodeID == sn.node.ID {
							p = sa
						}
					}
					c.placeLocked(s, j, g.Name, 0, sn, p, now)
					load[sn.node.ID]++
					room.take(sn.node.ID, j, g.Name)
				}
				continue
			}
			need := g.Count - len(live) - len(done)
			d := j.distinct[g.Name]
			var distinctOn map[string]bool // the nodes distinct_hosts keeps it off
			if d.any() && need > 0 {
				distinctOn = j.distinctOn(g.Name, d, byGroup)
			}
			used := map[int]bool{}
			for _, sa := range append(slices.Clone(live), done...) {
				used[sa.nameIndex()] = true
			}
			for ; need > 0; need-- {
				var best *simNode
				for _, sn := range nodes {
					if !nodeReady(sn.node) || !jobInPool(j, sn.node) || !j.feasible(g.Name, sn.node) || !room.fits(sn.node.ID, j, g.Name) {
						continue
					}
					if distinctOn[sn.node.ID] {
						continue // distinct_hosts (constraints.go)
					}
					if best == nil || load[sn.node.ID] < load[best.node.ID] {
						best = sn
					}
				}
				if best == nil {
					break // no capacity: Nomad would create a blocked evaluation
				}
				var p *simAlloc
				if len(prev) > 0 {
					p, prev = prev[0], prev[1:]
				}
				n := 0
				if p != nil && !used[p.nameIndex()] {
					n = p.nameIndex()
				} else {
					for used[n] {
						n++
					}
				}
				used[n] = true
				c.placeLocked(s, j, g.Name, n, best, p, now)
				load[best.node.ID]++
				room.take(best.node.ID, j, g.Name)
				if distinctOn != nil {
					distinctOn[best.node.ID] = true
				}
				if len(j.distinct) > 0 { // the job's later groups count it (distinctOn)
					k := groupKey{j.spec.Namespace, j.spec.ID, g.Name}
					byGroup[k] = append(byGroup[k], c.allocs[c.allocOrder[len(c.allocOrder)-1]])
				}
			}
			c.wl.unplacedLocked(s, j, g.Name, need) // evals.go
		}
		if j.spec.Type == api.JobTypeSystem {
			c.wl.systemFailuresLocked(s, j, fails, candidates) // evals.go
		}
	}
}

// schedInputs is what a round of the scheduler decides from: the allocations,
// the nodes and the jobs, by their tables' indexes (every write to them moves
// those, as Nomad's state store moves a table's index: blocking queries rely on
// it), and whether the drainer's marks wait for a later round. A round that
// finds them as the last one left them has nothing to do: it placed every
// allocation it could, stopped every one it should, and would again (Nomad's
// scheduler runs only for an evaluation, which a change to these creates).
type schedInputs struct {
	allocs, nodes uint64
	jobs          int    // jobs registered
	jobsModify    uint64 // the sum of their ModifyIndex
	marked        bool
	valid         bool
}

func schedInputsOf(c *clusterState, marked bool) schedInputs {
	in := schedInputs{allocs: c.allocsIndex, nodes: c.nodesIndex, jobs: len(c.jobOrder), marked: marked, valid: true}
	for _, k := range c.jobOrder {
		if j := c.jobs[k]; j.job.ModifyIndex != nil {
			in.jobsModify += *j.job.ModifyIndex
		}
	}
	return in
}

// scheduleDue reports whether the scheduler's round may change something: its
// inputs changed since the last round, or a mark waits for it.
func (c *clusterState) scheduleDue() bool {
	last := c.sched
	return !last.valid || last.marked || last != schedInputsOf(c, false)
}

func jobInPool(j *simJob, n *api.Node) bool {
	return j.spec.NodePool == "" || j.spec.NodePool == "all" || j.spec.NodePool == n.NodePool
}

// nameIndex is allocIndex of the allocation, parsed once: a name never changes.
func (sa *simAlloc) nameIndex() int {
	if sa.nameIdx < 0 {
		sa.nameIdx = allocIndex(sa.a)
	}
	return sa.nameIdx
}

func allocIndex(a *api.Allocation) int {
	var n int
	for i := len(a.Name) - 1; i >= 0; i-- {
		if a.Name[i] == '[' {
			fmt.Sscanf(a.Name[i:], "[%d]", &n)
			break
		}
	}
	return n
}

// placeLocked creates a pending allocation of group on node sn, replacing prev
// (may be nil).
func (c *clusterState) placeLocked(s *Sim, j *simJob, group string, n int, sn *simNode, prev *simAlloc, now time.Time) {
	idx := c.writeLocked(s)
	a := &api.Allocation{
		ID:               s.uuidLocked(),
		Namespace:        j.spec.Namespace,
		EvalID:           s.uuidLocked(),
		Name:             fmt.Sprintf("%s.%s[%d]", j.spec.ID, group, n),
		NodeID:           sn.node.ID,
		NodeName:         sn.node.Name,
		JobID:            j.spec.ID,
		Job:              j.job,
		TaskGroup:        group,
		DesiredStatus:    api.AllocDesiredStatusRun,
		ClientStatus:     api.AllocClientStatusPending,
		CreateIndex:      idx,
		ModifyIndex:      idx,
		AllocModifyIndex: idx,
		CreateTime:       now.UnixNano(),
		ModifyTime:       now.UnixNano(),
	}
	a.AllocatedResources = allocatedResources(j, group)
	if prev != nil {
		a.PreviousAllocation = prev.a.ID
		prev.a.NextAllocation = a.ID
		c.touchAllocLocked(s, prev.a)
	}
	sa := &simAlloc{a: a, job: j, nameIdx: n, startAt: now.Add(s.cfg.MigrateTime)}
	sa.healthDeadline = now.Add(sa.healthyDeadline(s))
	c.wl.placedLocked(sa) // deployments.go
	c.allocs[a.ID] = sa
	c.allocOrder = append(c.allocOrder, a.ID)
	if c.byNode == nil {
		c.byNode = map[string][]string{}
	}
	c.byNode[a.NodeID] = append(c.byNode[a.NodeID], a.ID)
	c.allocsIndex = idx
	c.topics.allocWrittenLocked(a)
	c.allocEventLocked(s, EventAllocPlace, a, nil)
}

// nodeDownAllocsLocked marks every non-terminal allocation on a node that missed
// its heartbeats as lost (scheduler/reconcile_util.go: allocs on a down node are
// "lost": DesiredStatus stop, ClientStatus lost); the scheduler then replaces
// service and batch allocs on other nodes.
func (c *clusterState) nodeDownAllocsLocked(s *Sim, nodeID string) {
	defer c.endBatch()
	for _, id := range c.byNode[nodeID] {
		sa := c.allocs[id]
		a := sa.a
		if a.NodeID != nodeID || allocClientTerminal(a) {
			continue
		}
		a.DesiredStatus = api.AllocDesiredStatusStop
		a.DesiredDescription = "alloc is lost since its node is down"
		a.ClientStatus = api.AllocClientStatusLost
		a.ClientDescription = "alloc is lost since its node is down"
		c.touchAllocLocked(s, a)
		c.allocEventLocked(s, EventAllocStop, a, map[string]string{"reason": "node down"})
	}
}
