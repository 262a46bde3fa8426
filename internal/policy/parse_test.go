package policy

import (
	"slices"
	"strings"
	"testing"
)

func TestParsePercent(t *testing.T) {
	tests := []struct {
		name, in string
		want     int
		wantErr  string
	}{
		{name: "unset", in: "", want: 0},
		{name: "lowest", in: "1%", want: 1},
		{name: "quarter", in: "25%", want: 25},
		{name: "all", in: "100%", want: 100},
		{name: "leading zero", in: "050%", want: 50},
		{name: "no sign", in: "25", wantErr: `invalid percentage "25": use a whole number of percent from "1%" to "100%", or "" for no limit`},
		{name: "fraction", in: "2.5%", wantErr: `invalid percentage "2.5%"`},
		{name: "negative", in: "-5%", wantErr: `invalid percentage "-5%"`},
		{name: "space", in: " 5%", wantErr: `invalid percentage " 5%"`},
		{name: "zero", in: "0%", wantErr: `percentage "0%" out of range: use "1%" to "100%", or "" for no limit`},
		{name: "above 100", in: "101%", wantErr: `percentage "101%" out of range`},
		{name: "overflow", in: "99999999999999999999%", wantErr: "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePercent(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParsePercent(%q) = %d, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParsePercent(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseTimeZone(t *testing.T) {
	tests := []struct {
		name, in string
		wantErr  string
	}{
		{name: "UTC", in: "UTC"},
		{name: "Berlin", in: "Europe/Berlin"},
		{name: "empty", in: "", wantErr: `must name an IANA time zone such as "UTC" or "Europe/Berlin"`},
		{name: "Local depends on the machine", in: "Local", wantErr: `"Local" depends on the machine`},
		{name: "unknown", in: "Mars/Olympus", wantErr: `unknown time zone "Mars/Olympus"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc, err := ParseTimeZone(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTimeZone(%q) = %v, %v; want an error containing %q", tt.in, loc, err, tt.wantErr)
				}
				return
			}
			if err != nil || loc.String() != tt.in {
				t.Fatalf("ParseTimeZone(%q) = %v, %v", tt.in, loc, err)
			}
		})
	}
}

func TestPolicyNamesAndFilterExpression(t *testing.T) {
	a := mustFilterGroup(t, "a", `NodePool == "a"`)
	p := Policy{Groups: []Group{a, {Name: "b"}}, Default: Group{Name: DefaultGroupName, Concurrency: 1}}
	if got := p.Names(); !slices.Equal(got, []string{"a", "b", "default"}) {
		t.Errorf("Names() = %v", got)
	}
	if got := (Policy{Default: Group{Name: DefaultGroupName}}).Names(); !slices.Equal(got, []string{"default"}) {
		t.Errorf("Names() with no configured group = %v", got)
	}
	if got := a.FilterExpression(); got != `NodePool == "a"` {
		t.Errorf("FilterExpression() = %q", got)
	}
	if got := p.Groups[1].FilterExpression(); got != "" {
		t.Errorf("FilterExpression() of a group without filter = %q", got)
	}
}
