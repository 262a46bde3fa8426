// Package watched holds what the coordinator keeps of a blocking-query watch:
// its newest answer (Value) and a read kept while the watch saw no change
// (Kept).
package watched

// Value is the newest answer of one blocking-query watch: the value it read
// and the index it answered at, whether it is live (it answered since its last
// failure, in this term) and its generation, which counts its answers that saw
// a change, its failures and the terms. What a pass read of what the watch
// follows holds while the watch is live and its generation has not moved
// (Kept).
type Value[T any] struct {
	Val   T
	Index uint64
	Gen   uint64
	Live  bool
}

// Answered records an answer at index with v; changed: its index moved.
func (w *Value[T]) Answered(index uint64, v T, changed bool) {
	w.Live = true
	if changed {
		w.Gen++
	}
	w.Val, w.Index = v, index
}

// Failed records a failure of the watch, or the start of a term: the value is
// forgotten, and nothing read before counts any more.
func (w *Value[T]) Failed() {
	var zero T
	w.Live, w.Val = false, zero
	w.Gen++
}

// Kept is what a pass read of what a watch follows, kept with the watch's
// generation as the pass took it: it holds for a later pass while the watch is
// live and its generation has not moved. A change during the read moves it
// (the watch answers after the write), so the next pass reads again.
type Kept[T any] struct {
	val T
	gen uint64
	ok  bool
}

// Get returns the kept value if it holds at the watch's generation gen.
func (k *Kept[T]) Get(gen uint64, live bool) (T, bool) {
	if !live || !k.ok || k.gen != gen {
		var zero T
		return zero, false
	}
	return k.val, true
}

// Keep keeps v, read at the watch's generation gen.
func (k *Kept[T]) Keep(gen uint64, v T) { k.val, k.gen, k.ok = v, gen, true }

// Forget drops the kept value: the next pass reads again.
func (k *Kept[T]) Forget() { *k = Kept[T]{} }
