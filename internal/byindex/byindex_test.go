package byindex

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

// A value is had back only at the index it was put at; Retain and Prune
// forget the nodes they drop and keep the others.
func TestCache(t *testing.T) {
	var c Cache[string]
	if _, ok := c.Get("a", 1); ok {
		t.Fatal("the zero Cache has something")
	}
	c.Put("a", 1, "a1")
	c.Put("b", 1, "b1")
	c.Put("c", 1, "c1")
	tests := []struct {
		name  string
		id    string
		index uint64
		want  string
		found bool
	}{
		{name: "same index", id: "a", index: 1, want: "a1", found: true},
		{name: "index moved", id: "a", index: 2},
		{name: "never put", id: "z", index: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := c.Get(tt.id, tt.index); got != tt.want || ok != tt.found {
				t.Errorf("Get(%s, %d) = %q, %t; want %q, %t", tt.id, tt.index, got, ok, tt.want, tt.found)
			}
		})
	}
	c.Put("a", 2, "a2")
	if got, ok := c.Get("a", 1); ok {
		t.Errorf("the value of an older index after a new Put: %q", got)
	}
	c.Retain(func(id string) bool { return id != "b" })
	c.Prune(map[string]*api.NodeListStub{"a": {ID: "a"}, "b": {ID: "b"}})
	if _, ok := c.Get("a", 2); !ok || c.Len() != 1 {
		t.Errorf("%d kept, a kept: %t; want a alone (b not retained, c pruned)", c.Len(), ok)
	}
}

// PutAll takes every value of the other cache at its index, replacing what
// was kept of the same node, and keeps the rest.
func TestPutAll(t *testing.T) {
	var c, o Cache[string]
	c.Put("a", 1, "a1")
	c.Put("b", 1, "b1")
	o.Put("b", 2, "b2")
	o.Put("c", 3, "c3")
	c.PutAll(o)
	for _, tc := range []struct {
		id    string
		index uint64
		want  string
	}{{"a", 1, "a1"}, {"b", 2, "b2"}, {"c", 3, "c3"}} {
		if got, ok := c.Get(tc.id, tc.index); !ok || got != tc.want {
			t.Errorf("Get(%s, %d) = %q, %v; want %q", tc.id, tc.index, got, ok, tc.want)
		}
	}
	if _, ok := c.Get("b", 1); ok || c.Len() != 3 {
		t.Errorf("b at 1 still kept, or %d nodes kept, want 3", c.Len())
	}
}
