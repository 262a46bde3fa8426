package sideoutput

import (
	"reflect"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nodemeta"
)

// The silence keeper is handed the plans again only when they or the policy
// changed, and everything again after a new term (forget).
func TestSilenceDue(t *testing.T) {
	var o Outputs
	for i, tc := range []struct {
		gen     uint64
		version int
		forget  bool
		due     bool
	}{
		{gen: 1, version: 1, due: true},
		{gen: 1, version: 1},
		{gen: 2, version: 1, due: true},
		{gen: 2, version: 2, due: true},
		{gen: 2, version: 2},
		{gen: 2, version: 2, forget: true, due: true},
	} {
		if tc.forget {
			o.Forget()
		}
		if got := o.last.silenceDue(tc.gen, tc.version); got != tc.due {
			t.Errorf("step %d: due %v, want %v", i, got, tc.due)
		}
	}
}

// sameMeta tells apart two metadata that differ in any one field: a field it
// forgets is never handed to the publisher when only it changes (a node
// cordoned again, with the same phase as when it was last written).
func TestSameMetaSeesEveryField(t *testing.T) {
	typ := reflect.TypeFor[nodemeta.Meta]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var m nodemeta.Meta
		v := reflect.ValueOf(&m).Elem().Field(i)
		switch f.Type.Kind() {
		case reflect.Bool:
			v.SetBool(true)
		case reflect.String:
			v.SetString("x")
		default:
			if f.Type != reflect.TypeFor[time.Time]() {
				t.Fatalf("field %s of a kind this test does not set: add it", f.Name)
			}
			v.Set(reflect.ValueOf(time.Unix(1, 0)))
		}
		if sameMeta(nodemeta.Meta{}, m) {
			t.Errorf("sameMeta does not see field %s", f.Name)
		}
	}
}
