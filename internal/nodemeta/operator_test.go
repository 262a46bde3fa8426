package nodemeta

import (
	"maps"
	"testing"
	"time"
)

func str(s string) *string { return &s }

// same reports whether a and b say the same: the same keys, each removed
// (nil) or set to the same value.
func same(a, b map[string]*string) bool {
	return maps.EqualFunc(a, b, func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) })
}

func TestOperatorKeys(t *testing.T) {
	before := map[string]string{"maintenance": "true", "drained_by": "rollboot"}
	after := map[string]string{"maintenance": "", "patched": "yes"}
	tests := []struct {
		name     string
		before   map[string]string
		after    map[string]string
		phase    string
		rebooted bool
		want     map[string]*string
	}{
		{name: "none named", phase: "draining"},
		{name: "idle, never rebooted: every key removed", before: before, after: after, phase: "idle",
			want: map[string]*string{"maintenance": nil, "drained_by": nil, "patched": nil}},
		{name: "pending after a reboot: after's keys", before: before, after: after, phase: "pending", rebooted: true,
			want: map[string]*string{"maintenance": nil, "drained_by": nil, "patched": str("yes")}},
		{name: "draining: before's keys win over after's", before: before, after: after, phase: "draining", rebooted: true,
			want: map[string]*string{"maintenance": str("true"), "drained_by": str("rollboot"), "patched": str("yes")}},
		{name: "stuck keeps before's", before: before, phase: "stuck",
			want: map[string]*string{"maintenance": str("true"), "drained_by": str("rollboot")}},
		{name: "backoff: the cycle ended", before: before, phase: "backoff",
			want: map[string]*string{"maintenance": nil, "drained_by": nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := OperatorKeys(tc.before, tc.after, tc.phase, tc.rebooted)
			if !same(got, tc.want) {
				t.Fatalf("keys %v, want %v", decodeKeys(EncodeKeys(got)), decodeKeys(EncodeKeys(tc.want)))
			}
			if enc := EncodeKeys(got); !same(decodeKeys(enc), got) || enc != EncodeKeys(OperatorKeys(tc.before, tc.after, tc.phase, tc.rebooted)) {
				t.Fatalf("encoded %q does not read back the same, or differs between calls", enc)
			}
		})
	}
}

func TestItemsSteeringAndOperatorKeys(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	base := map[string]*string{KeyPhase: str("pending"), KeyRebootRequired: str("true"), KeyLastReboot: str("2026-12-06T10:00:00Z"), KeyNext: nil, KeyCordoned: nil}
	with := func(extra map[string]*string) map[string]*string {
		out := maps.Clone(base)
		maps.Copy(out, extra)
		return out
	}
	tests := []struct {
		name string
		m    Meta
		want map[string]*string
	}{
		{name: "steering off: rollboot_next removed", m: Meta{Phase: "pending", RebootRequired: true, LastReboot: at}, want: base},
		{name: "next in line", m: Meta{Phase: "pending", RebootRequired: true, LastReboot: at, Steering: true, Next: true},
			want: with(map[string]*string{KeyNext: str("true")})},
		{name: "not next", m: Meta{Phase: "pending", RebootRequired: true, LastReboot: at, Steering: true},
			want: with(map[string]*string{KeyNext: str("false")})},
		{name: "cordoned", m: Meta{Phase: "pending", RebootRequired: true, LastReboot: at, Cordoning: true, Cordoned: true},
			want: with(map[string]*string{KeyCordoned: str("true")})},
		{name: "not cordoned", m: Meta{Phase: "pending", RebootRequired: true, LastReboot: at, Cordoning: true},
			want: with(map[string]*string{KeyCordoned: str("false")})},
		{name: "operator keys", m: Meta{Phase: "pending", RebootRequired: true, LastReboot: at,
			Operator: EncodeKeys(map[string]*string{"patched": str("yes"), "maintenance": nil})},
			want: with(map[string]*string{"patched": str("yes"), "maintenance": nil})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.m.Items(); !same(got, tc.want) {
				t.Fatalf("items %v, want %v", decodeKeys(EncodeKeys(got)), decodeKeys(EncodeKeys(tc.want)))
			}
		})
	}
}
