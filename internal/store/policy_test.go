package store

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

func testPolicy(version, history int) PolicyRecord {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	rec := PolicyRecord{PolicyVersion: PolicyVersion{Version: version, Source: "group \"all\" {\n  concurrency = 2\n}\n",
		Filename: "policy.hcl", AppliedBy: "token ops", AppliedAt: at}}
	for v := version - 1; v > version-1-history && v > 0; v-- {
		rec.History = append(rec.History, PolicyVersion{Version: v, Source: "# v" + strings.Repeat("x", v), Filename: "p.hcl",
			AppliedBy: "alice@h", AppliedAt: at.Add(-time.Duration(version-v) * time.Hour)})
	}
	return rec
}

func decodePolicyVar(v *api.Variable) (PolicyRecord, error) {
	return decodePolicy(v.Path, v.Items, v.ModifyIndex)
}

func policyItems(r PolicyRecord) map[string]string {
	items, _ := PolicyItems(r)
	return items
}

func TestPolicyRecordRoundTrip(t *testing.T) {
	for _, rec := range []PolicyRecord{testPolicy(1, 0), testPolicy(4, 3)} {
		roundTrip(t, rec, policyItems, decodePolicyVar)
		got, err := decodePolicyVar(&api.Variable{Path: "rollboot/policy", Items: policyItems(rec), ModifyIndex: 7})
		if err != nil {
			t.Fatal(err)
		}
		rec.ModifyIndex = 7
		if got.Version != rec.Version || got.Source != rec.Source || !got.AppliedAt.Equal(rec.AppliedAt) || len(got.History) != len(rec.History) || got.ModifyIndex != 7 {
			t.Errorf("round trip: %+v\nwant %+v", got, rec)
		}
	}
}

func TestPolicyRecordUnreadable(t *testing.T) {
	tests := []struct {
		name  string
		items map[string]string
		want  string
	}{
		{name: "no version", items: map[string]string{"source": "x"}, want: `item "policy_version": missing`},
		{name: "version not a number", items: map[string]string{"policy_version": "two"}, want: `item "policy_version"`},
		{name: "history not JSON", items: map[string]string{"policy_version": "2", "history": "[oops"}, want: `item "history"`},
		{name: "newer schema", items: map[string]string{"policy_version": "2", "version": "9"}, want: "written by a newer rollboot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodePolicy("rollboot/policy", tt.items, 3)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want %q", err, tt.want)
			}
		})
	}
}

// The history is kept to PolicyHistoryKept versions, then trimmed, oldest first,
// to fit in Nomad's variable size limit; a policy too big alone is refused.
func TestPolicyItemsSize(t *testing.T) {
	items, err := PolicyItems(testPolicy(20, 19))
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := decodePolicy("p", items, 1)
	if len(rec.History) != PolicyHistoryKept || rec.History[0].Version != 19 {
		t.Errorf("history kept: %d versions, first %d", len(rec.History), rec.History[0].Version)
	}

	big := testPolicy(5, 4)
	big.Source = strings.Repeat("#", 30000) + "\n"
	for i := range big.History {
		big.History[i].Source = strings.Repeat("#", 15000)
	}
	items, err = PolicyItems(big)
	if err != nil {
		t.Fatal(err)
	}
	if n := itemsSize(items); n > MaxVariableSize {
		t.Errorf("%d bytes stored", n)
	}
	rec, _ = decodePolicy("p", items, 1)
	if len(rec.History) != 2 || rec.History[1].Version != 3 {
		t.Errorf("kept %d versions of history, want the newest 2", len(rec.History))
	}

	big.Source = strings.Repeat("#", MaxVariableSize)
	if _, err := PolicyItems(big); err == nil || !strings.Contains(err.Error(), "more than Nomad's limit of 65536 bytes") {
		t.Errorf("a policy too big: %v", err)
	}
}

func FuzzDecodePolicy(f *testing.F) {
	seeds(f, policyItems(testPolicy(1, 0)), policyItems(testPolicy(3, 2)))
	f.Add("policy_version=1\nhistory=null\n")
	f.Add("policy_version=-1\napplied_at=0000-01-01T00:00:00+01:00\n")
	f.Add("policy_version=2\nhistory=[{\"version\":\"x\"}]\n")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := decodePolicy("rollboot/policy", parseItems(s), 1)
		if err != nil {
			return
		}
		items, err := PolicyItems(r)
		if err != nil {
			return // too big to store: never written
		}
		r2, err := decodePolicy("rollboot/policy", maps.Clone(items), 1)
		if err != nil {
			t.Fatalf("%v does not decode: %v", items, err)
		}
		if items2, _ := PolicyItems(r2); !maps.Equal(items, items2) {
			t.Fatalf("round trip:\n%q\n%q", items, items2)
		}
	})
}
