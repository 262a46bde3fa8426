package coordinator

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

// What a pass takes from the mailbox is its own: an allocation watch's write
// after the pass started, to a map left empty by an earlier forget, does not
// show in it (it raced with the pass's reads).
func TestTakenAllocationsAreACopy(t *testing.T) {
	var m mailbox
	m.SetAllocs("n1", []*api.Allocation{{ID: "a1"}})
	m.SetAllocs("n1", nil) // the watch ended: an empty map is left
	taken := m.take()
	m.SetAllocs("n2", []*api.Allocation{{ID: "a2"}})
	if _, ok := taken.allocs["n2"]; ok {
		t.Fatal("a watch's write after the pass took its answers shows in them")
	}
}
