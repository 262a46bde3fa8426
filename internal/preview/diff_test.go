package preview

import (
	"testing"
	"time"
)

func TestDiff(t *testing.T) {
	plan := func(finish time.Time, hosts ...Host) Plan {
		return Plan{Now: now, Finish: finish, Groups: []Group{{Name: "web", Hosts: hosts}}}
	}
	h := func(name, group string, pos int, start time.Duration) Host {
		return Host{Host: name, Group: group, Position: pos, Start: at(start), Finish: at(start + 5*m)}
	}
	tests := []struct {
		name          string
		before, after Plan
		changed       []string
		finishMoved   bool
	}{
		{"same plan", plan(at(10*m), h("a", "web", 1, 0)), plan(at(10*m), h("a", "web", 1, 0)), nil, false},
		{"estimates within the tolerance", plan(at(10*m), h("a", "web", 1, 0)),
			plan(at(10*m+time.Second/2), h("a", "web", 1, time.Second/2)), nil, false},
		{"start moved", plan(at(10*m), h("a", "web", 1, 0), h("b", "web", 2, 5*m)),
			plan(at(5*m), h("a", "web", 1, 0), h("b", "web", 2, 0)), []string{"b"}, true},
		{"group and order", plan(at(10*m), h("a", "web", 1, 0), h("b", "web", 2, 5*m)),
			plan(at(10*m), h("b", "db", 1, 5*m), h("a", "web", 1, 0)), []string{"b"}, false},
		{"a host only in one plan", plan(at(10*m), h("a", "web", 1, 0)),
			plan(at(10*m), h("a", "web", 1, 0), h("c", "web", 2, 0)), []string{"c"}, false},
		{"an estimate lost", plan(at(10*m), h("a", "web", 1, 0)),
			plan(time.Time{}, Host{Host: "a", Group: "web", Position: 1}), []string{"a"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := Diff(tc.before, tc.after)
			var got []string
			for _, c := range d.Changes {
				got = append(got, c.Host)
			}
			if len(got) != len(tc.changed) {
				t.Fatalf("changed %v, want %v", got, tc.changed)
			}
			for i := range got {
				if got[i] != tc.changed[i] {
					t.Fatalf("changed %v, want %v", got, tc.changed)
				}
			}
			if d.FinishMoved() != tc.finishMoved {
				t.Errorf("finish moved %v, want %v", d.FinishMoved(), tc.finishMoved)
			}
		})
	}
}
