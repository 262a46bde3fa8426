package watched

import "testing"

// A kept read holds while its watch is live at the same generation: an answer
// that saw a change, a failure (or a new term) and a forget each end it; an
// answer that saw none does not.
func TestKeptHoldsWhileNothingChanged(t *testing.T) {
	tests := []struct {
		name  string
		after func(w *Value[int], k *Kept[string])
		holds bool
	}{
		{"nothing since", func(*Value[int], *Kept[string]) {}, true},
		{"an answer with no change", func(w *Value[int], _ *Kept[string]) { w.Answered(5, 2, false) }, true},
		{"an answer with a change", func(w *Value[int], _ *Kept[string]) { w.Answered(6, 2, true) }, false},
		{"a failure", func(w *Value[int], _ *Kept[string]) { w.Failed() }, false},
		{"a failure, then an answer", func(w *Value[int], _ *Kept[string]) { w.Failed(); w.Answered(5, 1, false) }, false},
		{"forgotten", func(_ *Value[int], k *Kept[string]) { k.Forget() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w Value[int]
			var k Kept[string]
			if _, ok := k.Get(w.Gen, w.Live); ok {
				t.Fatal("nothing kept yet, but a read holds")
			}
			w.Answered(5, 1, true)
			k.Keep(w.Gen, "read")
			tt.after(&w, &k)
			got, ok := k.Get(w.Gen, w.Live)
			if ok != tt.holds || ok && got != "read" {
				t.Errorf("Get = %q, %v; want holds %v", got, ok, tt.holds)
			}
		})
	}
}

// A failure forgets the value and leaves the watch not live.
func TestFailedForgetsTheValue(t *testing.T) {
	var w Value[[]int]
	w.Answered(3, []int{1}, true)
	w.Failed()
	if w.Live || w.Val != nil || w.Gen != 2 {
		t.Errorf("after a failure: %+v, want not live, no value, generation 2", w)
	}
}
