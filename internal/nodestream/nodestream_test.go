package nodestream

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/nomad/api"
)

func TestApply(t *testing.T) {
	stub := func(id string, idx uint64) *api.NodeListStub { return &api.NodeListStub{ID: id, ModifyIndex: idx} }
	base := []*api.NodeListStub{stub("a", 1), stub("c", 1), stub("e", 1)}
	cases := []struct {
		name    string
		changed []*api.NodeListStub
		gone    []string
		want    []string // id@index
	}{
		{"one changed", []*api.NodeListStub{stub("c", 5)}, nil, []string{"a@1", "c@5", "e@1"}},
		{"the last write of a node wins", []*api.NodeListStub{stub("c", 5), stub("c", 6)}, nil, []string{"a@1", "c@6", "e@1"}},
		{"a new node in ID order", []*api.NodeListStub{stub("d", 7), stub("0", 8)}, nil, []string{"0@8", "a@1", "c@1", "d@7", "e@1"}},
		{"one gone", nil, []string{"a"}, []string{"c@1", "e@1"}},
		{"gone after a write", []*api.NodeListStub{stub("e", 9)}, []string{"e"}, []string{"a@1", "c@1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Apply(base, tc.changed, tc.gone)
			var got []string
			for _, n := range out {
				got = append(got, fmt.Sprintf("%s@%d", n.ID, n.ModifyIndex))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if base[0].ID != "a" || base[1].ModifyIndex != 1 || len(base) != 3 {
				t.Errorf("the list given was modified: %v", base)
			}
		})
	}
}

// Changes takes the node written from each node event, as the node list shows
// it, the ID of a node deregistered, and skips the events of other topics.
func TestChanges(t *testing.T) {
	node := map[string]any{"ID": "a", "Name": "client-1", "HTTPAddr": "10.0.0.1:4646", "Status": "ready",
		"SchedulingEligibility": "eligible", "Attributes": map[string]any{"nomad.version": "1.10.0"},
		"DrainStrategy": map[string]any{}, "ModifyIndex": 7}
	evs := &api.Events{Index: 7, Events: []api.Event{
		{Topic: api.TopicNode, Type: "NodeDrain", Key: "a", Index: 7, Payload: map[string]any{"Node": node}},
		{Topic: api.TopicJob, Type: "JobRegistered", Key: "web", Index: 7},
		{Topic: api.TopicNode, Type: "NodeDeregistration", Key: "b", Index: 7},
	}}
	changed, gone, err := Changes(evs)
	if err != nil {
		t.Fatal(err)
	}
	want := &api.NodeListStub{ID: "a", Name: "client-1", Address: "10.0.0.1", Status: "ready", SchedulingEligibility: "eligible",
		Version: "1.10.0", Drain: true, ModifyIndex: 7}
	if len(changed) != 1 || !reflect.DeepEqual(changed[0], want) {
		t.Errorf("changed: got %+v, want %+v", changed, want)
	}
	if !slices.Equal(gone, []string{"b"}) {
		t.Errorf("gone: got %v, want [b]", gone)
	}
	if _, _, err := Changes(&api.Events{Index: 8, Events: []api.Event{{Topic: api.TopicNode, Type: "NodeDrain", Key: "a", Index: 8}}}); err == nil {
		t.Error("a node event without its node: no error")
	}
}
