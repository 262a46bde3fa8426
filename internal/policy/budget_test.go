package policy

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestSlots(t *testing.T) {
	tests := []struct {
		name  string
		conc  int
		pct   int
		size  int
		slots int
	}{
		{name: "concurrency only", conc: 2, size: 10, slots: 2},
		{name: "concurrency only, empty group", conc: 3, size: 0, slots: 3},
		{name: "percentage limits", conc: 5, pct: 25, size: 10, slots: 2},
		{name: "percentage floors", conc: 5, pct: 25, size: 11, slots: 2},
		{name: "percentage at least one", conc: 5, pct: 10, size: 5, slots: 1},
		{name: "concurrency limits", conc: 1, pct: 50, size: 10, slots: 1},
		{name: "hundred percent", conc: 20, pct: 100, size: 7, slots: 7},
		{name: "percentage on empty group", conc: 1, pct: 100, size: 0, slots: 0},
		{name: "zero concurrency admits nobody", conc: 0, size: 10, slots: 0},
		{name: "negative concurrency admits nobody", conc: -1, size: 10, slots: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := Group{Name: "g", Concurrency: tt.conc, MaxUnavailablePct: tt.pct}
			if got := Slots(g, tt.size); got != tt.slots {
				t.Errorf("Slots = %d, want %d", got, tt.slots)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	t0 := time.Date(2025, 1, 6, 22, 0, 0, 0, time.UTC)
	req := func(host, group string, minutes int) Request {
		return Request{Host: host, Group: group, RequestedAt: t0.Add(time.Duration(minutes) * time.Minute)}
	}
	grp := func(name string, conc, pct int) Group {
		return Group{Name: name, Concurrency: conc, MaxUnavailablePct: pct}
	}

	tests := []struct {
		name    string
		groups  []GroupStatus
		queue   []Request
		admit   []string          // hosts, in order
		reasons map[string]string // host -> substring of its reason
	}{
		{
			name:   "first come first served",
			groups: []GroupStatus{{Group: grp("web", 1, 0), Size: 5}},
			queue:  []Request{req("b", "web", 2), req("a", "web", 1), req("c", "web", 3)},
			admit:  []string{"a"},
			reasons: map[string]string{
				"b": `group "web" is full: 1 of 1 slots in use`,
				"c": `behind b in group "web"`,
			},
		},
		{
			name:   "host name breaks ties",
			groups: []GroupStatus{{Group: grp("web", 2, 0), Size: 5}},
			queue:  []Request{req("z", "web", 1), req("y", "web", 1), req("x", "web", 1)},
			admit:  []string{"x", "y"},
		},
		{
			name:    "active hosts use slots",
			groups:  []GroupStatus{{Group: grp("web", 2, 0), Size: 5, Active: 1}},
			queue:   []Request{req("a", "web", 1), req("b", "web", 2)},
			admit:   []string{"a"},
			reasons: map[string]string{"b": "2 of 2 slots in use"},
		},
		{
			name:    "more active than slots admits nobody",
			groups:  []GroupStatus{{Group: grp("web", 1, 0), Size: 5, Active: 3}},
			queue:   []Request{req("a", "web", 1)},
			reasons: map[string]string{"a": "3 of 1 slots"},
		},
		{
			name: "a full group does not block other groups",
			groups: []GroupStatus{
				{Group: grp("web", 1, 0), Size: 5, Active: 1},
				{Group: grp("batch", 1, 0), Size: 5},
			},
			queue: []Request{req("w1", "web", 1), req("b1", "batch", 2), req("w2", "web", 3), req("b2", "batch", 4)},
			admit: []string{"b1"},
			reasons: map[string]string{
				"w1": `group "web" is full`,
				"w2": "behind w1",
				"b2": `group "batch" is full`,
			},
		},
		{
			name:   "max_unavailable limits below concurrency",
			groups: []GroupStatus{{Group: grp("web", 5, 20), Size: 10}},
			queue:  []Request{req("a", "web", 1), req("b", "web", 2), req("c", "web", 3)},
			admit:  []string{"a", "b"},
		},
		{
			name:    "other unavailable nodes count against max_unavailable",
			groups:  []GroupStatus{{Group: grp("web", 5, 30), Size: 10, Unavailable: 2}},
			queue:   []Request{req("a", "web", 1), req("b", "web", 2)},
			admit:   []string{"a"},
			reasons: map[string]string{"b": "3 of 10 nodes unavailable, max_unavailable 30% allows 3"},
		},
		{
			name:    "unavailable nodes fill max_unavailable",
			groups:  []GroupStatus{{Group: grp("web", 5, 20), Size: 10, Active: 1, Unavailable: 1}},
			queue:   []Request{req("a", "web", 1)},
			reasons: map[string]string{"a": "2 of 10 nodes unavailable"},
		},
		{
			name:   "unavailable nodes do not use concurrency slots",
			groups: []GroupStatus{{Group: grp("web", 2, 0), Size: 10, Unavailable: 5}},
			queue:  []Request{req("a", "web", 1), req("b", "web", 2)},
			admit:  []string{"a", "b"},
		},
		{
			name:    "small group still gets one slot",
			groups:  []GroupStatus{{Group: grp("db", 3, 10), Size: 3}},
			queue:   []Request{req("a", "db", 1), req("b", "db", 2)},
			admit:   []string{"a"},
			reasons: map[string]string{"b": "is full: 1 of 1"},
		},
		{
			name:    "hold blocks the group",
			groups:  []GroupStatus{{Group: grp("web", 2, 0), Size: 5, Hold: "outside the maintenance windows"}, {Group: grp("batch", 1, 0), Size: 2}},
			queue:   []Request{req("a", "web", 1), req("b", "web", 2), req("c", "batch", 3)},
			admit:   []string{"c"},
			reasons: map[string]string{"a": "outside the maintenance windows", "b": "behind a"},
		},
		{
			name:    "unknown group waits",
			groups:  []GroupStatus{{Group: grp("web", 2, 0), Size: 5}},
			queue:   []Request{req("a", "gone", 1), req("b", "web", 2)},
			admit:   []string{"b"},
			reasons: map[string]string{"a": `unknown group "gone"`},
		},
		{
			name:    "duplicate host counts once",
			groups:  []GroupStatus{{Group: grp("web", 3, 0), Size: 5}},
			queue:   []Request{req("a", "web", 2), req("a", "web", 1)},
			admit:   []string{"a"},
			reasons: map[string]string{"a": "duplicate"},
		},
		{
			name:   "empty queue",
			groups: []GroupStatus{{Group: grp("web", 3, 0), Size: 5}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			queue := slices.Clone(tt.queue)
			got := Admit(tt.groups, queue)
			if !slices.Equal(queue, tt.queue) {
				t.Errorf("Admit modified the queue")
			}
			var hosts []string
			for _, r := range got.Admitted {
				hosts = append(hosts, r.Host)
			}
			if !slices.Equal(hosts, tt.admit) {
				t.Errorf("admitted %v, want %v", hosts, tt.admit)
			}
			if len(got.Admitted)+len(got.Waiting) != len(tt.queue) {
				t.Errorf("%d admitted + %d waiting, want %d in all", len(got.Admitted), len(got.Waiting), len(tt.queue))
			}
			for host, want := range tt.reasons {
				found := false
				for _, w := range got.Waiting {
					if w.Host == host && strings.Contains(w.Reason, want) {
						found = true
					}
				}
				if !found {
					t.Errorf("no waiting entry for %s with a reason containing %q; waiting: %+v", host, want, got.Waiting)
				}
			}
		})
	}
}

// TestAdmitProperties checks, for random groups and queues, that Admit never
// exceeds a group's slots or its max_unavailable, that within a group it
// admits a prefix of the first-come-first-served order, and that it admits
// as much of that prefix as the bounds allow.
func TestAdmitProperties(t *testing.T) {
	t0 := time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		nGroups := rapid.IntRange(1, 4).Draw(t, "groups")
		var groups []GroupStatus
		var names []string
		for i := range nGroups {
			name := fmt.Sprintf("g%d", i)
			names = append(names, name)
			size := rapid.IntRange(0, 12).Draw(t, name+".size")
			active := rapid.IntRange(0, size+2).Draw(t, name+".active") // may exceed the budget after a config change
			unavail := rapid.IntRange(0, max(size-active, 0)).Draw(t, name+".unavailable")
			pct := 0
			if rapid.Bool().Draw(t, name+".has_pct") {
				pct = rapid.IntRange(1, 100).Draw(t, name+".pct")
			}
			hold := ""
			if rapid.IntRange(0, 5).Draw(t, name+".hold") == 0 {
				hold = "held"
			}
			groups = append(groups, GroupStatus{
				Group:       Group{Name: name, Concurrency: rapid.IntRange(0, 4).Draw(t, name+".concurrency"), MaxUnavailablePct: pct},
				Size:        size,
				Active:      active,
				Unavailable: unavail,
				Hold:        hold,
			})
		}
		groupName := rapid.SampledFrom(append(slices.Clone(names), "unknown"))
		queue := rapid.SliceOfN(rapid.Custom(func(t *rapid.T) Request {
			return Request{
				Host:        fmt.Sprintf("h%d", rapid.IntRange(0, 15).Draw(t, "host")),
				Group:       groupName.Draw(t, "group"),
				RequestedAt: t0.Add(time.Duration(rapid.IntRange(0, 10).Draw(t, "minute")) * time.Minute),
			}
		}), 0, 20).Draw(t, "queue")

		before := slices.Clone(queue)
		got := Admit(groups, queue)
		if !slices.Equal(queue, before) {
			t.Fatalf("Admit changed its queue: %v, was %v", queue, before)
		}
		// A queue already in order (as a caller that admits several times
		// keeps it) is admitted the same, and left as it is.
		sorted := InQueueOrder(queue)
		sortedBefore := slices.Clone(sorted)
		if again := Admit(groups, sorted); !reflect.DeepEqual(again, got) {
			t.Fatalf("in queue order: %+v, want %+v", again, got)
		}
		if !slices.Equal(sorted, sortedBefore) {
			t.Fatalf("Admit changed a sorted queue: %v, was %v", sorted, sortedBefore)
		}

		if len(got.Admitted)+len(got.Waiting) != len(queue) {
			t.Fatalf("%d admitted + %d waiting != %d requests", len(got.Admitted), len(got.Waiting), len(queue))
		}
		seen := map[string]bool{}
		for _, r := range got.Admitted {
			if seen[r.Host] {
				t.Fatalf("host %s admitted twice", r.Host)
			}
			seen[r.Host] = true
		}

		// Reference FIFO order: by time then host, first request per host.
		fifo := slices.Clone(queue)
		slices.SortStableFunc(fifo, func(a, b Request) int {
			if c := a.RequestedAt.Compare(b.RequestedAt); c != 0 {
				return c
			}
			return strings.Compare(a.Host, b.Host)
		})
		first := map[string]bool{}
		perGroup := map[string][]Request{}
		for _, r := range fifo {
			if first[r.Host] {
				continue
			}
			first[r.Host] = true
			perGroup[r.Group] = append(perGroup[r.Group], r)
		}
		admitted := map[string][]Request{}
		for _, r := range got.Admitted {
			admitted[r.Group] = append(admitted[r.Group], r)
		}
		if len(admitted["unknown"]) > 0 {
			t.Fatalf("admitted hosts of an unknown group: %v", admitted["unknown"])
		}

		for _, g := range groups {
			name := g.Group.Name
			a := admitted[name]
			n := len(a)
			slots := Slots(g.Group, g.Size)
			if n > 0 && g.Active+n > slots {
				t.Fatalf("group %s: %d active + %d admitted > %d slots", name, g.Active, n, slots)
			}
			limit, hasLimit := MaxUnavailable(g.Group, g.Size)
			if hasLimit && n > 0 && g.Active+g.Unavailable+n > limit {
				t.Fatalf("group %s: %d active + %d unavailable + %d admitted > max_unavailable %d", name, g.Active, g.Unavailable, n, limit)
			}
			if hasLimit && limit > g.Size {
				t.Fatalf("group %s: max_unavailable %d > size %d", name, limit, g.Size)
			}
			if g.Hold != "" && n > 0 {
				t.Fatalf("group %s is held but admitted %d", name, n)
			}
			order := perGroup[name]
			if n > len(order) || !slices.Equal(a, order[:n]) {
				t.Fatalf("group %s: admitted %v is not a prefix of the FIFO order %v", name, a, order)
			}
			// Maximality: the first host left behind could not have been admitted.
			if n < len(order) && g.Hold == "" {
				fitsSlots := g.Active+n+1 <= slots
				fitsLimit := !hasLimit || g.Active+g.Unavailable+n+1 <= limit
				if fitsSlots && fitsLimit {
					t.Fatalf("group %s: %s was left waiting though it fits (active %d, admitted %d, slots %d)", name, order[n].Host, g.Active, n, slots)
				}
			}
		}
	})
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		name    string
		base    time.Duration
		max     time.Duration
		attempt int
		want    time.Duration
	}{
		{name: "attempt 0 is base", base: time.Minute, max: time.Hour, attempt: 0, want: time.Minute},
		{name: "first failure is base", base: time.Minute, max: time.Hour, attempt: 1, want: time.Minute},
		{name: "doubles", base: time.Minute, max: time.Hour, attempt: 2, want: 2 * time.Minute},
		{name: "doubles again", base: time.Minute, max: time.Hour, attempt: 4, want: 8 * time.Minute},
		{name: "capped", base: time.Minute, max: time.Hour, attempt: 7, want: time.Hour},
		{name: "exactly the cap", base: 15 * time.Minute, max: time.Hour, attempt: 3, want: time.Hour},
		{name: "huge attempt", base: time.Minute, max: time.Hour, attempt: math.MaxInt, want: time.Hour},
		{name: "negative attempt", base: time.Minute, max: time.Hour, attempt: -5, want: time.Minute},
		{name: "base above max", base: 2 * time.Hour, max: time.Hour, attempt: 1, want: time.Hour},
		{name: "no cap does not overflow", base: 3 * time.Hour, max: 0, attempt: 200, want: math.MaxInt64},
		{name: "no cap doubles", base: time.Second, max: 0, attempt: 11, want: 1024 * time.Second},
		{name: "zero base", base: 0, max: time.Hour, attempt: 3, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Backoff(tt.base, tt.max, tt.attempt); got != tt.want {
				t.Errorf("Backoff(%v, %v, %d) = %v, want %v", tt.base, tt.max, tt.attempt, got, tt.want)
			}
		})
	}
}

// TestAdmitWith: a host the check refuses takes no slot and holds back nobody;
// the check sees hosts in the order they would be admitted, and never a host
// the budgets or a hold keep waiting.
func TestAdmitWith(t *testing.T) {
	t0 := time.Date(2025, 1, 6, 22, 0, 0, 0, time.UTC)
	req := func(host, group string, minutes int) Request {
		return Request{Host: host, Group: group, RequestedAt: t0.Add(time.Duration(minutes) * time.Minute)}
	}
	tests := []struct {
		name    string
		groups  []GroupStatus
		queue   []Request
		refuse  map[string]bool
		offered []string // hosts the check saw, in order
		admit   []string
		refused []string
	}{
		{
			name:    "the slot goes to the next host in line",
			groups:  []GroupStatus{{Group: Group{Name: "g", Concurrency: 1}, Size: 5}},
			queue:   []Request{req("c", "g", 3), req("a", "g", 1), req("b", "g", 2)},
			refuse:  map[string]bool{"a": true},
			offered: []string{"a", "b"},
			admit:   []string{"b"},
			refused: []string{"a"},
		},
		{
			name:    "every host refused: the group admits nobody and stays open",
			groups:  []GroupStatus{{Group: Group{Name: "g", Concurrency: 2}, Size: 5}},
			queue:   []Request{req("a", "g", 1), req("b", "g", 2)},
			refuse:  map[string]bool{"a": true, "b": true},
			offered: []string{"a", "b"},
			refused: []string{"a", "b"},
		},
		{
			name:    "a held group offers nothing",
			groups:  []GroupStatus{{Group: Group{Name: "g", Concurrency: 2}, Size: 5, Hold: "paused"}},
			queue:   []Request{req("a", "g", 1)},
			offered: nil,
		},
		{
			name: "a refusal in one group does not touch another",
			groups: []GroupStatus{{Group: Group{Name: "g", Concurrency: 1}, Size: 5},
				{Group: Group{Name: "h", Concurrency: 1}, Size: 5}},
			queue:   []Request{req("a", "g", 1), req("x", "h", 2), req("b", "g", 3), req("y", "h", 4)},
			refuse:  map[string]bool{"x": true},
			offered: []string{"a", "x", "y"},
			admit:   []string{"a", "y"},
			refused: []string{"x"},
		},
	}
	names := func(rs []Request) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Host)
		}
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var offered []string
			got := AdmitWith(tt.groups, tt.queue, func(r Request) bool {
				offered = append(offered, r.Host)
				return !tt.refuse[r.Host]
			})
			if !slices.Equal(offered, tt.offered) {
				t.Errorf("offered %v, want %v", offered, tt.offered)
			}
			if a := names(got.Admitted); !slices.Equal(a, tt.admit) {
				t.Errorf("admitted %v, want %v", a, tt.admit)
			}
			if r := names(got.Refused); !slices.Equal(r, tt.refused) {
				t.Errorf("refused %v, want %v", r, tt.refused)
			}
		})
	}
}

// Free counts the hosts that could start now: the slots left, as the group's
// unavailability allows; none while the group is held.
func TestGroupStatusFree(t *testing.T) {
	for _, tt := range []struct {
		name                      string
		conc, pct                 int
		size, active, unavailable int
		hold                      string
		want                      int
	}{
		{name: "every slot free", conc: 5, size: 100, want: 5},
		{name: "two out", conc: 5, size: 100, active: 2, want: 3},
		{name: "full", conc: 5, size: 100, active: 5, want: 0},
		{name: "unavailability allows fewer", conc: 5, pct: 10, size: 40, active: 1, unavailable: 1, want: 2},
		{name: "held", conc: 5, size: 100, hold: "window closed", want: 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := GroupStatus{Group: Group{Name: "g", Concurrency: tt.conc, MaxUnavailablePct: tt.pct}, Size: tt.size,
				Active: tt.active, Unavailable: tt.unavailable, Hold: tt.hold}
			if got := g.Free(); got != tt.want {
				t.Errorf("Free() = %d, want %d", got, tt.want)
			}
		})
	}
}
