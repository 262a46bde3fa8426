package store

import (
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// The items below were written by rollboot before records carried a schema
// version (version 1). Variables written then must decode to the same records,
// and records must encode to the same items (plus the version item, when there
// is one), so that an upgrade reads and writes every stored variable as before.

var goldenAt = time.Date(2026, 12, 2, 10, 0, 0, 123456789, time.UTC)

type golden[R any] struct {
	name   string
	items  map[string]string
	rec    R
	encode func(R) map[string]string
	decode func(*api.Variable) (R, error)
}

func (g golden[R]) run(t *testing.T) {
	t.Helper()
	t.Run(g.name, func(t *testing.T) {
		got, err := g.decode(&api.Variable{Path: "rollboot/x/" + g.name, Items: maps.Clone(g.items), ModifyIndex: 7})
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(got, g.rec) {
			t.Errorf("decode:\n got %+v\nwant %+v", got, g.rec)
		}
		items := g.encode(g.rec)
		if v, ok := items["version"]; ok && v != "1" {
			t.Errorf("version item = %q, want 1", v)
		}
		delete(items, "version")
		if !maps.Equal(items, g.items) {
			t.Errorf("encode:\n got %q\nwant %q", items, g.items)
		}
	})
}

func TestGoldenHostRecords(t *testing.T) {
	for _, g := range goldenHosts() {
		g.run(t)
	}
}

func goldenHosts() []golden[HostRecord] {
	at := goldenAt
	gs := []golden[HostRecord]{{
		name: "full",
		items: map[string]string{
			"agent_job":          "default/rollboot",
			"agent_version":      "1.2.3",
			"boot_id":            "b1",
			"detect_error":       "de",
			"discover_error":     "dis",
			"failed_at":          "2026-12-02T10:00:00.123456789Z",
			"failed_exit_status": "0",
			"failed_grant":       "g1",
			"failed_message":     "m",
			"failed_step":        "reboot command",
			"fleetlock_id":       "abc",
			"group":              "web",
			"hold_reason":        "hold",
			"host":               "web-1.example.com",
			"hostname":           "web-1",
			"node_id":            "n1",
			"reason":             "sentinel",
			"reboot_required":    "true",
			"rebooting_grant":    "g1",
			"requested_at":       "2026-12-02T10:00:00.123456789Z",
			"roles":              "nomad-client,nomad-server",
			"servers":            "[{\"product\":\"nomad\",\"cluster\":\"global\",\"id\":\"s1\"}]",
			"vault_sealed":       "true",
		},
		rec: HostRecord{Host: "web-1.example.com", NodeID: "n1", Hostname: "web-1", Roles: []string{"nomad-client", "nomad-server"},
			BootID: "b1", RebootRequired: true, Reason: "sentinel", RequestedAt: at, RebootingGrant: "g1", FleetLockID: "abc",
			Servers: []Server{{Product: "nomad", Cluster: "global", ID: "s1"}}, VaultSealed: true, Group: "web", AgentVersion: "1.2.3",
			DetectError: "de", DiscoverError: "dis", AgentJob: "default/rollboot", HoldReason: "hold",
			Failure: &RebootFailure{Grant: "g1", Step: StepReboot, ExitStatus: 0, Message: "m", At: at}, ModifyIndex: 7},
	}, {
		name:  "minimal",
		items: map[string]string{"host": "a", "reboot_required": "false"},
		rec:   HostRecord{Host: "a", ModifyIndex: 7},
	}}
	for i := range gs {
		gs[i].encode, gs[i].decode = HostRecord.items, decodeHost
	}
	return gs
}

func TestGoldenPlans(t *testing.T) {
	for _, g := range goldenPlans() {
		g.run(t)
	}
}

func goldenPlans() []golden[Plan] {
	at := goldenAt
	gs := []golden[Plan]{{
		name: "full",
		items: map[string]string{
			"attempt":            "2",
			"boot_id_at_grant":   "b0",
			"drained_index":      "42",
			"eligible_before":    "true",
			"forced":             "true",
			"gone_boot_id":       "b-1",
			"grant_id":           "g1",
			"group":              "web",
			"held":               "true",
			"host":               "web-1.example.com",
			"last_after_boot_id": "b2",
			"last_completed":     "2026-12-02T10:00:00.123456789Z",
			"last_unhealthy":     "web[0] unhealthy",
			"last_error":         "le",
			"last_need_at":       "2026-12-02T10:00:00.123456789Z",
			"loop_count":         "3",
			"next_try":           "2026-12-02T10:00:00.123456789Z",
			"node_id":            "n1",
			"phase":              "rejoining",
			"phase_since":        "2026-12-02T10:00:00.123456789Z",
			"reason":             "r",
			"requested_at":       "2026-12-02T10:00:00.123456789Z",
			"system_jobs":        "default/b,default/a",
			"timeline":           "{\"draining\":\"2026-12-02T10:00:01.123456789Z\",\"pending\":\"2026-12-02T10:00:00.123456789Z\"}",
			"waiting":            "w",
		},
		rec: Plan{Host: "web-1.example.com", Phase: PhaseRejoining, PhaseSince: at, Group: "web", Reason: "r", RequestedAt: at,
			GrantID: "g1", Attempt: 2, EligibleBefore: true, BootIDAtGrant: "b0", NodeID: "n1", SystemJobs: []string{"default/b", "default/a"},
			NextTry: at, LastError: "le", Waiting: "w", Timeline: map[string]time.Time{PhasePending: at, PhaseDraining: at.Add(time.Second)},
			Forced: true, DrainedIndex: 42, GoneBootID: "b-1", Held: true, LastAfterBootID: "b2", LastCompleted: at, LastUnhealthy: "web[0] unhealthy", LoopCount: 3, LastNeedAt: at,
			ModifyIndex: 7},
	}, {
		name:  "minimal",
		items: map[string]string{"eligible_before": "false", "host": "a", "phase": "idle"},
		rec:   Plan{Host: "a", Phase: PhaseIdle, ModifyIndex: 7},
	}}
	for i := range gs {
		gs[i].encode, gs[i].decode = Plan.items, decodePlan
	}
	return gs
}

func TestGoldenHistory(t *testing.T) {
	goldenHistory().run(t)
}

func goldenHistory() golden[HistoryRecord] {
	at := goldenAt
	return golden[HistoryRecord]{
		name: "full",
		items: map[string]string{
			"boot_id_after":  "b1",
			"boot_id_before": "b0",
			"error":          "e",
			"finished":       "2026-12-02T10:00:00.123456789Z",
			"forced":         "true",
			"grant_id":       "g1",
			"group":          "web",
			"host":           "web-1",
			"outcome":        "failed",
			"reason":         "r",
			"timeline":       "{\"pending\":\"2026-12-02T10:00:00.123456789Z\"}",
		},
		rec: HistoryRecord{Host: "web-1", Group: "web", GrantID: "g1", Outcome: "failed", Reason: "r", BootIDBefore: "b0", BootIDAfter: "b1",
			Forced: true, Error: "e", Timeline: map[string]time.Time{PhasePending: at}, Finished: at},
		encode: HistoryRecord.items,
		decode: decodeHistory,
	}
}

func TestGoldenHostControl(t *testing.T) {
	for _, g := range goldenHostControls() {
		g.decode = func(v *api.Variable) (HostControl, error) {
			h, problems := decodeHostControl(v)
			if len(problems) > 0 {
				t.Errorf("problems: %q", problems)
			}
			return h, nil
		}
		g.run(t)
	}
}

func goldenHostControls() []golden[HostControl] {
	at := goldenAt
	gs := []golden[HostControl]{{
		name: "full",
		items: map[string]string{
			"cancel_at":      "2026-12-02T10:00:00.123456789Z",
			"host":           "web-1",
			"release_at":     "2026-12-02T10:00:00.123456789Z",
			"request_reason": "why",
			"requested_at":   "2026-12-02T10:00:00.123456789Z",
			"requested_by":   "alice",
		},
		rec: HostControl{Host: "web-1", Request: &Request{At: at, By: "alice", Reason: "why"}, CancelAt: at, ReleaseAt: at, ModifyIndex: 7},
	}, {
		name:  "zero request",
		items: map[string]string{"host": "a", "requested_at": "0001-01-01T00:00:00Z"},
		rec:   HostControl{Host: "a", Request: &Request{}, ModifyIndex: 7},
	}}
	for i := range gs {
		gs[i].encode = HostControl.items
	}
	return gs
}

func goldenItems[R any](gs ...golden[R]) []map[string]string {
	out := make([]map[string]string, 0, len(gs))
	for _, g := range gs {
		out = append(out, g.items)
	}
	return out
}
