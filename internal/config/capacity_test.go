package config

import (
	"strings"
	"testing"
)

func TestCapacity(t *testing.T) {
	tests := []struct {
		name, src string
		want      CapacityConfig
		pct       int
		err       string // the error, with its position
	}{
		{name: "default", src: "", want: CapacityConfig{Enabled: true, Headroom: "0%"}},
		{name: "off", src: "capacity {\n  enabled = false\n}\n", want: CapacityConfig{Enabled: false, Headroom: "0%"}},
		{name: "headroom", src: "capacity {\n  headroom = \"15%\"\n}\n", want: CapacityConfig{Enabled: true, Headroom: "15%"}, pct: 15},
		{name: "headroom 100%", src: "capacity {\n  headroom = \"100%\"\n}\n", err: `p.hcl:2:14: capacity.headroom: invalid percentage "100%": use a whole number of percent from "0%" to "99%"`},
		{name: "headroom without %", src: "capacity {\n  headroom = \"10\"\n}\n", err: `p.hcl:2:14: capacity.headroom: invalid percentage "10"`},
		{name: "not a bool", src: "capacity {\n  enabled = \"maybe\"\n}\n", err: "p.hcl:2:13: "},
		{name: "unknown attribute", src: "capacity {\n  spread = true\n}\n", err: "p.hcl:2:3: Unsupported argument"},
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
			got := DefaultRules().cc.With(r).Capacity
			if got != tt.want || got.HeadroomPercent() != tt.pct {
				t.Errorf("capacity = %+v (%d%%), want %+v (%d%%)", got, got.HeadroomPercent(), tt.want, tt.pct)
			}
			if !strings.Contains(r.String(), "capacity {\n  enabled  = "+map[bool]string{true: "true", false: "false"}[tt.want.Enabled]+"\n  headroom = \""+tt.want.Headroom+"\"\n}") {
				t.Errorf("rendered policy lacks the capacity block:\n%s", r.String())
			}
		})
	}
}

func TestCapacityInALocalFile(t *testing.T) {
	_, err := LoadBytes([]byte("capacity {\n  enabled = false\n}\n"), "t.hcl")
	if err == nil || !strings.Contains(err.Error(), "t.hcl:1:1: capacity block is a rollout policy setting") {
		t.Fatalf("error = %v", err)
	}
}
