package store

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

func TestHostRecordEqual(t *testing.T) {
	at := goldenAt
	base := HostRecord{Host: "web-1", NodeID: "n1", Roles: []string{RoleNomadClient, RoleCandidate}, BootID: "b1",
		RebootRequired: true, RequestedAt: at, Servers: []Server{{Product: "nomad", Cluster: "global", ID: "s1"}},
		Failure: &RebootFailure{Grant: "g1", Step: StepReboot, ExitStatus: -1, Message: "m", At: at}, ModifyIndex: 3}
	tests := []struct {
		name  string
		mod   func(*HostRecord)
		equal bool
	}{
		{"same", func(*HostRecord) {}, true},
		{"another ModifyIndex", func(r *HostRecord) { r.ModifyIndex = 9 }, true},
		{"roles in another order", func(r *HostRecord) { r.Roles = []string{RoleCandidate, RoleNomadClient} }, true},
		{"same instant in another zone", func(r *HostRecord) { r.RequestedAt = at.In(time.FixedZone("x", 3600)) }, true},
		{"an equal failure", func(r *HostRecord) { f := *r.Failure; r.Failure = &f }, true},
		{"no servers vs an empty list", func(r *HostRecord) { r.Servers = nil }, false},
		{"another group", func(r *HostRecord) { r.Group = "db" }, false},
		{"another boot", func(r *HostRecord) { r.BootID = "b2" }, false},
		{"rebooted for a grant", func(r *HostRecord) { r.RebootedGrant = "g1" }, false},
		{"another failure", func(r *HostRecord) { f := *r.Failure; f.ExitStatus = 0; r.Failure = &f }, false},
		{"no failure", func(r *HostRecord) { r.Failure = nil }, false},
		{"another role", func(r *HostRecord) { r.Roles = []string{RoleNomadClient} }, false},
		{"vault sealed", func(r *HostRecord) { r.VaultSealed = true }, false},
		{"a hold", func(r *HostRecord) { r.HoldReason = "quorum" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base
			o.Roles = append([]string(nil), base.Roles...)
			tt.mod(&o)
			if got := base.Equal(o); got != tt.equal {
				t.Errorf("Equal = %v, want %v", got, tt.equal)
			}
			if got := o.Equal(base); got != tt.equal {
				t.Errorf("Equal (reversed) = %v, want %v", got, tt.equal)
			}
		})
	}
}

// ---- fuzzing: decoding any items never panics and round-trips -----------------

// itemsText writes items as the fuzzers take them: one "key=value" per line.
func itemsText(items map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(items)) {
		b.WriteString(k + "=" + items[k] + "\n")
	}
	return b.String()
}

func parseItems(s string) map[string]string {
	items := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			items[k] = v
		}
	}
	return items
}

// seeds adds the golden items and some that do not decode.
func seeds(f *testing.F, golden ...map[string]string) {
	for _, g := range golden {
		f.Add(itemsText(g))
		bad := maps.Clone(g)
		bad["version"] = "2"
		f.Add(itemsText(bad))
	}
	f.Add("")
	f.Add("host=a\nversion=x\n")
	f.Add("host=a\nreboot_required=maybe\nrequested_at=yesterday\n")
	f.Add("host=a\nroles=b,,a\nservers=null\ntimeline={}\nattempt=+3\nfailed_step=x\nfailed_exit_status=-1\n")
	f.Add("host=a\nservers=[{\"product\":1}]\ntimeline={\"a\":\"nope\"}\ndrained_index=-1\n")
	f.Add("host=a\nrequested_at=0000-01-01T00:00:00+01:00\nphase_since=9999-12-31T23:00:00-01:00\nfinished=0000-01-01T00:00:00+01:00\n")
	f.Add("host=a\ncancel_at=\nrequested_at=\n")
	// Free text to clean: controls, an escape sequence, a control alone, too long.
	f.Add("host=a\nreason=\x1b[31mred\r\x00\nfailed_step=\x01\nfailed_grant=g\nhold_reason=\u202e\xff\ndetect_error=" +
		strings.Repeat("é", 200) + "\n")
}

// roundTrip checks encode→decode→encode: what a record encodes to decodes
// without error and encodes the same.
func roundTrip[R any](t *testing.T, r R, encode func(R) map[string]string, decode func(*api.Variable) (R, error)) {
	t.Helper()
	items := encode(r)
	r2, err := decode(&api.Variable{Path: "rollboot/x/web-1", Items: maps.Clone(items)})
	if err != nil {
		t.Fatalf("%v does not decode: %v", items, err)
	}
	if items2 := encode(r2); !maps.Equal(items, items2) {
		t.Fatalf("round trip:\n%q\n%q", items, items2)
	}
}

func FuzzDecodeHost(f *testing.F) {
	seeds(f, goldenItems(goldenHosts()...)...)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := decodeHost(&api.Variable{Path: "rollboot/hosts/web-1", Items: parseItems(s)})
		if err != nil {
			return
		}
		roundTrip(t, r, HostRecord.items, decodeHost)
		if r2, _ := decodeHost(&api.Variable{Items: r.items()}); !r.Equal(r2) {
			t.Fatalf("not Equal after a round trip: %+v %+v", r, r2)
		}
	})
}

func FuzzDecodePlan(f *testing.F) {
	seeds(f, goldenItems(goldenPlans()...)...)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := decodePlan(&api.Variable{Path: "rollboot/plan/web-1", Items: parseItems(s)})
		if err != nil {
			return
		}
		roundTrip(t, p, Plan.items, decodePlan)
	})
}

func FuzzDecodeHistory(f *testing.F) {
	seeds(f, goldenItems(goldenHistory())...)
	f.Fuzz(func(t *testing.T, s string) {
		h, err := decodeHistory(&api.Variable{Path: "rollboot/history/1-web-1-g1", Items: parseItems(s)})
		if err != nil {
			return
		}
		roundTrip(t, h, HistoryRecord.items, decodeHistory)
	})
}

// Per-host control variables are read leniently: any items give a HostControl,
// which round-trips with no problem.
func FuzzDecodeHostControl(f *testing.F) {
	seeds(f, goldenItems(goldenHostControls()...)...)
	f.Fuzz(func(t *testing.T, s string) {
		h, _ := decodeHostControl(&api.Variable{Path: "rollboot/requests/web-1", Items: parseItems(s), ModifyTime: 1})
		if h.Host == "" {
			t.Fatal("no host")
		}
		roundTrip(t, h, HostControl.items, func(v *api.Variable) (HostControl, error) {
			h, problems := decodeHostControl(v)
			if len(problems) > 0 {
				t.Fatalf("problems: %q", problems)
			}
			return h, nil
		})
	})
}

// The control variable is read leniently too: its pause flag round-trips.
func FuzzDecodeControl(f *testing.F) {
	f.Add("paused=true\npause_reason=maintenance\npaused_at=2026-12-02T10:00:00Z\n")
	f.Add("paused=maybe\nrequests={\"a\":{\"at\":7}}\ncancels=x\n")
	f.Add("paused=false\nversion=2\n")
	f.Fuzz(func(t *testing.T, s string) {
		c := decodeControlLenient(&api.Variable{Path: "rollboot/control", Items: parseItems(s), ModifyTime: 1})
		roundTrip(t, c, controlCodec.encode, func(v *api.Variable) (Control, error) {
			c := decodeControlLenient(v)
			if len(c.Problems) > 0 {
				t.Fatalf("problems: %q", c.Problems)
			}
			return c, nil
		})
	})
}
