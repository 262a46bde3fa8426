package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestNodeMeta(t *testing.T) {
	tests := []struct {
		name, src string
		want      NodeMetaConfig
		err       string // the error, with its position
	}{
		{name: "default", src: ""},
		{name: "steering and keys", src: "node_meta {\n  next_in_line = 2\n  before_drain = { maintenance = \"true\", \"team.owner\" = \"ops\" }\n  after_rejoin = { maintenance = \"\" }\n}\n",
			want: NodeMetaConfig{NextInLine: 2, BeforeDrain: map[string]string{"maintenance": "true", "team.owner": "ops"},
				AfterRejoin: map[string]string{"maintenance": ""}}},
		{name: "negative", src: "node_meta {\n  next_in_line = -1\n}\n", err: "p.hcl:2:18: node_meta.next_in_line: must be at least 0, got -1"},
		{name: "not a key", src: "node_meta {\n  before_drain = { \"a b\" = \"x\" }\n}\n",
			err: `p.hcl:2:18: node_meta.before_drain: key "a b" is not a node metadata key`},
		{name: "rollboot's own key", src: "node_meta {\n  after_rejoin = { rollboot_phase = \"x\" }\n}\n",
			err: `p.hcl:2:18: node_meta.after_rejoin: key "rollboot_phase": rollboot_* keys are rollboot's own`},
		{name: "cordon", src: "node_meta {\n  cordon_next = 1\n}\n", want: NodeMetaConfig{CordonNext: 1}},
		{name: "cordon without the capacity gate", src: "capacity {\n  enabled = false\n}\nnode_meta {\n  cordon_next = 1\n}\n",
			err: "p.hcl:5:17: node_meta.cordon_next: a node is cordoned only while the capacity gate says the other nodes can spare it"},
		{name: "cordon off without the capacity gate", src: "capacity {\n  enabled = false\n}\nnode_meta {\n  cordon_next = 0\n}\n"},
		{name: "negative cordon", src: "node_meta {\n  cordon_next = -2\n}\n", err: "p.hcl:2:17: node_meta.cordon_next: must be at least 0, got -2"},
		{name: "not a map", src: "node_meta {\n  before_drain = [\"x\"]\n}\n", err: "p.hcl:2:18: node_meta.before_drain: must be a map of strings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tt.src), "p.hcl")
			if err != nil {
				t.Fatal(err)
			}
			r, err := CompilePolicy(p)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error = %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := DefaultRules().cc.With(r).NodeMeta
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("node_meta = %+v, want %+v", got, tt.want)
			}
			// The rendered policy reads back the same.
			p2, err := ParsePolicy([]byte(r.String()), "rendered.hcl")
			if err != nil {
				t.Fatal(err)
			}
			r2, err := CompilePolicy(p2)
			if err != nil {
				t.Fatalf("rendered policy:\n%s\n%v", r.String(), err)
			}
			if again := DefaultRules().cc.With(r2).NodeMeta; !reflect.DeepEqual(again, tt.want) {
				t.Errorf("rendered and read again: %+v, want %+v\n%s", again, tt.want, r.String())
			}
		})
	}
}

func TestNodeMetaInALocalFile(t *testing.T) {
	_, err := LoadBytes([]byte("node_meta {\n  next_in_line = 1\n}\n"), "t.hcl")
	if err == nil || !strings.Contains(err.Error(), "t.hcl:1:1: node_meta block is a rollout policy setting") {
		t.Fatalf("error = %v", err)
	}
}
