package coordinator

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// testHost is one host of an admission snapshot.
type testHost struct {
	name   string
	phase  string // "" = no plan
	at     time.Duration
	rec    func(*store.HostRecord) // changes the default record
	noRec  bool                    // the host has no usable record
	node   func(*phase.NodeView)   // changes a ready, eligible node
	noNode bool
}

// admitSnapshot builds the snapshot of a pass at t0 over hosts, each on its own
// node in the default group, requested at t0-1h+at.
func admitSnapshot(hosts []testHost, mod func(*snapshot)) *snapshot {
	s := &snapshot{now: t0, plans: map[string]store.Plan{}, nodes: map[string]*api.NodeListStub{},
		groupOf: map[string]string{}, hosts: map[string]*hostView{}, missing: map[string]string{}}
	for _, h := range hosts {
		hv := &hostView{group: policy.DefaultGroupName}
		nodeID := "node-" + h.name
		if !h.noNode {
			hv.node = &phase.NodeView{ID: nodeID, Status: "ready", Eligible: true}
			if h.node != nil {
				h.node(hv.node)
			}
			elig := "eligible"
			if !hv.node.Eligible {
				elig = "ineligible"
			}
			s.nodes[nodeID] = &api.NodeListStub{ID: nodeID, Name: h.name, Status: hv.node.Status, SchedulingEligibility: elig}
		}
		if !h.noRec {
			hv.rec = &store.HostRecord{Host: h.name, BootID: "b1", Roles: []string{store.RoleNomadClient}}
			if !h.noNode {
				hv.rec.NodeID = nodeID
			}
			if h.rec != nil {
				h.rec(hv.rec)
			}
		}
		if h.phase != "" {
			p := store.Plan{Host: h.name, Phase: h.phase, Group: policy.DefaultGroupName,
				RequestedAt: t0.Add(-time.Hour + h.at)}
			if !h.noNode {
				p.NodeID = nodeID
			}
			s.plans[h.name] = p
		}
		s.hosts[h.name] = hv
	}
	s.names = slices.Sorted(maps.Keys(s.hosts))
	if mod != nil {
		mod(s)
	}
	s.listBusy()
	return s
}

func nomadServer(id string) func(*store.HostRecord) {
	return func(r *store.HostRecord) {
		r.Roles = append(r.Roles, store.RoleNomadServer)
		r.Servers = []store.Server{{Product: "nomad", Cluster: "global", ID: id}}
	}
}

func vaultServer(id string, sealed bool) func(*store.HostRecord) {
	return func(r *store.HostRecord) {
		r.Roles = append(r.Roles, store.RoleVaultServer)
		r.Servers = []store.Server{{Product: "vault", Cluster: "vault", ID: id}}
		r.VaultSealed = sealed
	}
}

// backAt records that host came back (its cycle ended) at t.
func backAt(host string, t time.Time) func(*snapshot) {
	return func(s *snapshot) {
		p := s.plans[host]
		p.Host, p.Phase, p.LastCompleted = host, store.PhaseIdle, t
		s.plans[host] = p
	}
}

func candidate(r *store.HostRecord) { r.Roles = append(r.Roles, store.RoleCandidate) }

// cluster is a healthy cluster of three voters that can lose one.
func cluster(product health.Product, name string, mod func(*health.ClusterHealth)) health.ClusterHealth {
	h := health.ClusterHealth{Product: product, Cluster: name, Healthy: true, FailureTolerance: 1, Leader: "s3"}
	for _, id := range []string{"s1", "s2", "s3"} {
		h.Servers = append(h.Servers, health.ServerHealth{ID: id, Healthy: true, Voter: true, Leader: id == "s3"})
	}
	if mod != nil {
		mod(&h)
	}
	return h
}

func healthyClusters(s *snapshot) {
	s.clusters = map[string]health.ClusterHealth{
		"nomad/global": cluster(health.Nomad, "global", nil),
		"vault/vault":  cluster(health.Vault, "vault", nil),
	}
}

func TestAdmit(t *testing.T) {
	def := func(n int) []policy.Group { return []policy.Group{{Name: policy.DefaultGroupName, Concurrency: n}} }
	tests := []struct {
		name     string
		groups   []policy.Group
		noGates  bool
		hold     phase.WaitReason
		hosts    []testHost
		mod      func(*snapshot)
		admitted []string
		wait     map[string]phase.WaitReason // exact reasons
		waitHas  map[string]string           // a part of the reason's text
	}{
		{
			name:   "a stored policy that cannot be used holds every pending host",
			groups: def(3),
			hold:   phase.WaitFor(phase.WaitPolicyInvalid, "the stored policy cannot be read: x"),
			hosts:  []testHost{{name: "a", phase: store.PhasePending}, {name: "b", phase: store.PhasePending}, {name: "c", phase: store.PhaseDraining}},
			wait: map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitPolicyInvalid, "the stored policy cannot be read: x"),
				"b": phase.WaitFor(phase.WaitPolicyInvalid, "the stored policy cannot be read: x")},
		},
		{
			name:   "a group settles after a host came back",
			groups: []policy.Group{{Name: policy.DefaultGroupName, Concurrency: 2, Settle: 2 * time.Minute}},
			hosts:  []testHost{{name: "a"}, {name: "b", phase: store.PhasePending}},
			mod:    backAt("a", t0.Add(-time.Minute)),
			wait: map[string]phase.WaitReason{"b": phase.WaitFor(phase.WaitSettle,
				`group "default" starts its next host at `+t0.Add(time.Minute).UTC().Format(time.RFC3339)+`, 2m0s after a came back`)},
		},
		{
			name:     "settled: the next host starts",
			groups:   []policy.Group{{Name: policy.DefaultGroupName, Concurrency: 1, Settle: 2 * time.Minute}},
			hosts:    []testHost{{name: "a"}, {name: "b", phase: store.PhasePending}},
			mod:      backAt("a", t0.Add(-2*time.Minute)),
			admitted: []string{"b"},
		},
		{
			name:     "no settle time: the next host starts at once",
			groups:   def(1),
			hosts:    []testHost{{name: "a"}, {name: "b", phase: store.PhasePending}},
			mod:      backAt("a", t0),
			admitted: []string{"b"},
		},
		{
			name:     "first come, first served within the group budget",
			groups:   def(1),
			hosts:    []testHost{{name: "a", phase: store.PhasePending, at: time.Minute}, {name: "b", phase: store.PhasePending}},
			admitted: []string{"b"},
			waitHas:  map[string]string{"a": `waiting for a slot in group "default"`},
		},
		{
			name:   "a node its host's cordon made ineligible is not unavailable: its own drain may start",
			groups: []policy.Group{{Name: policy.DefaultGroupName, Concurrency: 1, MaxUnavailablePct: 50}},
			hosts: []testHost{{name: "a", phase: store.PhasePending, node: func(n *phase.NodeView) { n.Eligible = false }},
				{name: "b"}},
			mod: func(s *snapshot) {
				p := s.plans["a"]
				p.CordonedAt, p.CordonNode = t0.Add(-time.Minute), "node-a"
				s.plans["a"] = p
			},
			admitted: []string{"a"},
		},
		{
			name:   "a host out of service takes a slot",
			groups: def(1),
			hosts:  []testHost{{name: "a", phase: store.PhaseDraining}, {name: "b", phase: store.PhasePending}},
			wait:   map[string]phase.WaitReason{"b": phase.WaitFor(phase.WaitQueued, `"default"`)},
		},
		{
			name:   "paused: every group holds",
			groups: def(2),
			hosts:  []testHost{{name: "a", phase: store.PhasePending}},
			mod:    func(s *snapshot) { s.control.Paused, s.control.PauseReason = true, "freeze" },
			wait:   map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitGroupBudget, "paused: freeze")},
		},
		{
			name: "a closed window holds the group",
			groups: []policy.Group{{Name: policy.DefaultGroupName, Concurrency: 1,
				Schedule: policy.Schedule{{Name: "sat", Days: []time.Weekday{time.Saturday}, Start: 2 * time.Hour, End: 4 * time.Hour}}}},
			hosts: []testHost{{name: "a", phase: store.PhasePending}},
			wait: map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitGroupBudget,
				"outside the maintenance windows (next opens at 2026-12-05T02:00:00Z)")},
		},
		{
			name:     "a missing agent is not queued and waits with why",
			groups:   def(2),
			hosts:    []testHost{{name: "a", phase: store.PhasePending}, {name: "b", phase: store.PhasePending, at: time.Minute}},
			mod:      func(s *snapshot) { s.missing["a"] = "agent missing: its allocation of job rollboot failed" },
			admitted: []string{"b"},
			wait:     map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitAgentMissing, "agent missing: its allocation of job rollboot failed")},
		},
		{
			name:   "hosts the phase machine holds are not queued and take no slot",
			groups: def(1),
			hosts: []testHost{
				{name: "backoff", phase: store.PhasePending},
				{name: "down", phase: store.PhasePending, node: func(n *phase.NodeView) { n.Status = "down" }},
				{name: "foreign", phase: store.PhasePending, node: func(n *phase.NodeView) { n.Draining = true }},
				{name: "norecord", phase: store.PhasePending, noRec: true},
				{name: "idle"},
				{name: "z", phase: store.PhasePending, at: time.Hour},
			},
			mod: func(s *snapshot) {
				p := s.plans["backoff"]
				p.NextTry = t0.Add(time.Minute)
				s.plans["backoff"] = p
			},
			admitted: []string{"z"},
		},
		{
			name:   "our own drain left on the node does not keep the host out of the queue",
			groups: def(1),
			hosts: []testHost{{name: "a", phase: store.PhasePending,
				node: func(n *phase.NodeView) { n.Draining, n.DrainGrant = true, "g0" }}},
			admitted: []string{"a"},
		},
		{
			name:   "the last coordinator candidate in service stays",
			groups: def(2),
			hosts: []testHost{{name: "a", phase: store.PhaseRebooting, rec: candidate},
				{name: "b", phase: store.PhasePending, rec: candidate}},
			wait: map[string]phase.WaitReason{"b": phase.WaitFor(phase.WaitLastCandidate, "")},
		},
		{
			name:   "of two candidates in service one may go, then the other stays",
			groups: def(2),
			hosts: []testHost{{name: "a", phase: store.PhasePending, rec: candidate},
				{name: "b", phase: store.PhasePending, rec: candidate, at: time.Minute}},
			admitted: []string{"a"},
			wait:     map[string]phase.WaitReason{"b": phase.WaitFor(phase.WaitLastCandidate, "")},
		},
		{
			name:   "a candidate whose node is down is not in service",
			groups: def(2),
			hosts: []testHost{{name: "a", rec: candidate, node: func(n *phase.NodeView) { n.Status = "down" }},
				{name: "b", phase: store.PhasePending, rec: candidate}},
			wait: map[string]phase.WaitReason{"b": phase.WaitFor(phase.WaitLastCandidate, "")},
		},
		{
			name:   "a candidate without a node is in service",
			groups: def(2),
			hosts: []testHost{{name: "a", rec: candidate, noNode: true},
				{name: "b", phase: store.PhasePending, rec: candidate}},
			admitted: []string{"b"},
		},
		{
			name:     "a server host passes its gates",
			groups:   def(2),
			hosts:    []testHost{{name: "a", phase: store.PhasePending, rec: nomadServer("s1")}},
			mod:      healthyClusters,
			admitted: []string{"a"},
		},
		{
			name:   "one server per cluster: another is out",
			groups: def(2),
			hosts: []testHost{{name: "a", phase: store.PhaseRejoining, rec: nomadServer("s2")},
				{name: "b", phase: store.PhasePending, rec: nomadServer("s1")}},
			mod:  healthyClusters,
			wait: map[string]phase.WaitReason{"b": phase.WaitFor(phase.WaitServerOut, "nomad server of global on a")},
		},
		{
			name:   "one server per cluster: another is admitted in the same pass",
			groups: def(3),
			hosts: []testHost{{name: "a", phase: store.PhasePending, rec: nomadServer("s2")},
				{name: "b", phase: store.PhasePending, rec: nomadServer("s1"), at: time.Minute},
				{name: "c", phase: store.PhasePending, at: 2 * time.Minute}},
			mod:      healthyClusters,
			admitted: []string{"a", "c"},
			wait:     map[string]phase.WaitReason{"b": phase.WaitFor(phase.WaitServerOut, "nomad server of global on a")},
		},
		{
			// Otherwise a host held for as long as its rule says (its servers'
			// quorum) would keep its group's slots from every host behind it.
			name:   "a host held by a rule of its own gives its slot to the next host in line",
			groups: def(1),
			hosts: []testHost{{name: "a", phase: store.PhasePending, rec: func(r *store.HostRecord) { r.DiscoverError = "EOF" }},
				{name: "b", phase: store.PhasePending, at: time.Minute},
				{name: "c", phase: store.PhasePending, at: 2 * time.Minute}},
			admitted: []string{"b"},
			wait:     map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitRolesUnknown, "EOF")},
			waitHas:  map[string]string{"c": `waiting for a slot in group "default"`},
		},
		{
			name:   "sealed Vault on another host holds a Vault server",
			groups: def(2),
			hosts: []testHost{{name: "a", phase: store.PhasePending, rec: vaultServer("s1", false)},
				{name: "b", rec: vaultServer("s2", true)}},
			mod:  healthyClusters,
			wait: map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitVaultSealed, "b")},
		},
		{
			name:     "its own sealed Vault does not hold a host",
			groups:   def(2),
			hosts:    []testHost{{name: "a", phase: store.PhasePending, rec: vaultServer("s1", true)}},
			mod:      healthyClusters,
			admitted: []string{"a"},
		},
		{
			name:   "a sealed Vault does not hold a Nomad server",
			groups: def(2),
			hosts: []testHost{{name: "a", phase: store.PhasePending, rec: nomadServer("s1")},
				{name: "b", rec: vaultServer("s2", true)}},
			mod:      healthyClusters,
			admitted: []string{"a"},
		},
		{
			name:   "gate hold: the cluster cannot lose a server",
			groups: def(2),
			hosts:  []testHost{{name: "a", phase: store.PhasePending, rec: nomadServer("s1")}},
			mod: func(s *snapshot) {
				s.clusters = map[string]health.ClusterHealth{"nomad/global": cluster(health.Nomad, "global",
					func(h *health.ClusterHealth) { h.FailureTolerance = 0 })}
			},
			wait: map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitPreRebootGate, `nomad "global": failure tolerance 0, cannot lose a server`)},
		},
		{
			name:   "gate hold: the health could not be read",
			groups: def(2),
			hosts:  []testHost{{name: "a", phase: store.PhasePending, rec: nomadServer("s1")}},
			mod: func(s *snapshot) {
				s.clusters = map[string]health.ClusterHealth{"nomad/global": {Product: health.Nomad, Cluster: "global",
					Err: errors.New("connection refused")}}
			},
			waitHas: map[string]string{"a": "quorum gate: nomad \"global\" health unknown: connection refused"},
		},
		{
			name:    "server host without quorum gates",
			groups:  def(2),
			noGates: true,
			hosts:   []testHost{{name: "a", phase: store.PhasePending, rec: nomadServer("s1")}},
			wait:    map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitNoQuorumGates, "")},
		},
		{
			name:   "a server whose Raft ID is unknown",
			groups: def(2),
			hosts: []testHost{{name: "a", phase: store.PhasePending,
				rec: func(r *store.HostRecord) { r.Roles = append(r.Roles, store.RoleConsulServer) }}},
			wait: map[string]phase.WaitReason{"a": phase.WaitFor(phase.WaitRaftIDUnknown, store.RoleConsulServer)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := admitSnapshot(tc.hosts, tc.mod)
			adm := admitSnap(admission.Rules{Groups: tc.groups, DrainDeadline: time.Hour, Gates: !tc.noGates, Hold: tc.hold}, s)
			var got []string
			for _, name := range s.names {
				if adm.Admitted[name] {
					got = append(got, name)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.admitted, ",") {
				t.Errorf("admitted %v, want %v (waiting %v)", got, tc.admitted, adm.Wait)
			}
			for host, want := range tc.wait {
				if adm.Wait[host] != want {
					t.Errorf("%s waits for %+v (%q), want %+v", host, adm.Wait[host], adm.Wait[host], want)
				}
			}
			for host, want := range tc.waitHas {
				if !strings.Contains(adm.Wait[host].String(), want) {
					t.Errorf("%s waits for %q, want ~%q", host, adm.Wait[host], want)
				}
			}
			for host := range adm.Wait {
				if _, ok := tc.wait[host]; !ok && tc.waitHas[host] == "" {
					t.Errorf("%s waits for %q unexpectedly", host, adm.Wait[host])
				}
			}
		})
	}
}

// admitSnap runs admission over s with what s holds read, reading nothing
// more: the tables build the snapshot whole.
func admitSnap(r admission.Rules, s *snapshot) admission.Result {
	res, _ := admission.Admit((&Coordinator{}).withReads(admissionInput(r, s), s))
	return res
}
