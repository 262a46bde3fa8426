package policy

import (
	"reflect"
	"testing"
	"time"
)

func TestFreezesInForce(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	yearEnd := mustFreeze(t, "year-end", "12-20", "01-05", berlin)
	launch := mustFreeze(t, "launch", "2026-03-28", "2026-03-29", time.UTC)
	groups := []Group{
		{Name: "default", Freezes: Freezes{yearEnd}},
		{Name: "web", Freezes: Freezes{yearEnd, launch}},
		{Name: "db"},
	}
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	yearEndSpan := FreezeInForce{Name: "year-end", Groups: []string{"default", "web"},
		Start: time.Date(2026, 12, 20, 0, 0, 0, 0, berlin), End: time.Date(2027, 1, 6, 0, 0, 0, 0, berlin)}
	tests := []struct {
		name string
		now  time.Time
		want []FreezeInForce
		next time.Time
	}{
		{name: "none in force", now: at("2026-06-01T00:00:00Z"), next: yearEndSpan.Start},
		{name: "one-off, one group", now: at("2026-03-28T12:00:00Z"),
			want: []FreezeInForce{{Name: "launch", Groups: []string{"web"}, Start: at("2026-03-28T00:00:00Z"), End: at("2026-03-30T00:00:00Z")}},
			next: at("2026-03-30T00:00:00Z")},
		{name: "yearly over two groups, at its very start", now: yearEndSpan.Start,
			want: []FreezeInForce{yearEndSpan}, next: yearEndSpan.End},
		{name: "yearly, past new year", now: at("2027-01-02T00:00:00Z"),
			want: []FreezeInForce{yearEndSpan}, next: yearEndSpan.End},
		{name: "the end is not in force", now: yearEndSpan.End, next: time.Date(2027, 12, 20, 0, 0, 0, 0, berlin)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := InForce(groups, tt.now)
			if len(got) != len(tt.want) {
				t.Fatalf("InForce = %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i].Name != tt.want[i].Name || !reflect.DeepEqual(got[i].Groups, tt.want[i].Groups) ||
					!got[i].Start.Equal(tt.want[i].Start) || !got[i].End.Equal(tt.want[i].End) {
					t.Errorf("InForce[%d] = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
			if next := NextFreezeChange(groups, tt.now); !next.Equal(tt.next) {
				t.Errorf("NextFreezeChange = %s, want %s", next, tt.next)
			}
		})
	}
	if got := NextFreezeChange([]Group{{Name: "db"}}, at("2026-06-01T00:00:00Z")); !got.IsZero() {
		t.Errorf("NextFreezeChange without freezes = %s, want zero", got)
	}
}
