package store

import (
	"maps"
	"reflect"
	"testing"
	"time"
)

func fullHostRecord() HostRecord {
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	return HostRecord{Host: "web-1", NodeID: "n1", Hostname: "web-1.example", Roles: []string{"nomad-client"}, BootID: "b1",
		RebootRequired: true, Reason: "sentinel", RequestedAt: at, RebootingGrant: "g1", RebootedGrant: "g0", FleetLockID: "f1",
		Servers: []Server{{Product: "consul", Cluster: "dc1", ID: "s1"}}, VaultSealed: true, Group: "web", AgentVersion: "v1",
		DetectError: "d", DiscoverError: "e", AgentJob: "default/rollboot", HoldReason: "h",
		Failure: &RebootFailure{Grant: "g1", Step: StepReboot, ExitStatus: 1, Message: "m", At: at}, ModifyIndex: 7}
}

// identical compares every field but ModifyIndex: a change to any one field,
// made through reflection so that a field added later is covered too, makes
// two records not identical, and Equal then still tells them apart.
func TestHostIdenticalComparesEveryField(t *testing.T) {
	base := fullHostRecord()
	typ := reflect.TypeOf(base)
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			other := fullHostRecord()
			v := reflect.ValueOf(&other).Elem().Field(i)
			switch x := v.Interface().(type) {
			case string:
				v.SetString(x + "-changed")
			case bool:
				v.SetBool(!x)
			case time.Time:
				v.Set(reflect.ValueOf(x.Add(time.Second)))
			case []string:
				v.Set(reflect.ValueOf(append(x, "extra")))
			case []Server:
				v.Set(reflect.ValueOf(append(x, Server{Product: "vault"})))
			case *RebootFailure:
				c := *x
				c.Message += "-changed"
				v.Set(reflect.ValueOf(&c))
			case uint64:
				if f.Name != "ModifyIndex" {
					t.Fatalf("field %s: a number the test does not know", f.Name)
				}
				v.SetUint(x + 1)
				if !base.identical(other) || !base.Equal(other) {
					t.Errorf("records that differ only in ModifyIndex are not the same")
				}
				return
			default:
				t.Fatalf("field %s of type %s: teach this test (and identical) about it", f.Name, f.Type)
			}
			if base.identical(other) {
				t.Errorf("identical despite a different %s", f.Name)
			}
			if base.Equal(other) {
				t.Errorf("Equal despite a different %s", f.Name)
			}
		})
	}
}

// Identical records are Equal without encoding either (no allocation), and
// records that are the same only once encoded are still Equal.
func TestHostEqualFastPath(t *testing.T) {
	a, b := fullHostRecord(), fullHostRecord()
	if !a.identical(b) || !maps.Equal(a.items(), b.items()) {
		t.Fatalf("two copies: identical %t, same items %t", a.identical(b), maps.Equal(a.items(), b.items()))
	}
	if n := testing.AllocsPerRun(100, func() { _ = a.Equal(b) }); n != 0 {
		t.Errorf("Equal of identical records allocates %v times, want 0", n)
	}
	b.Roles = []string{}
	a.Roles = nil
	b.RequestedAt = a.RequestedAt.In(time.FixedZone("X", 3600))
	if a.identical(b) {
		t.Errorf("identical with nil and empty roles and another zone")
	}
	if got, want := a.Equal(b), maps.Equal(a.items(), b.items()); got != want {
		t.Errorf("Equal = %t, but the items say %t", got, want)
	}
}
