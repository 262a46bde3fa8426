package config

import (
	"strings"
	"testing"
	"time"
)

func TestCalendarBlocks(t *testing.T) {
	src := `group "web" {
  filter = "NodePool == \"web\""
}
window "patch" {
  monthly     = ["mon#2"]
  offset_days = 1
  start       = "22:00"
  end         = "04:00"
}
freeze "year-end" {
  from      = "12-20"
  to        = "01-05"
  time_zone = "Europe/Berlin"
}
freeze "launch" {
  from   = "2027-03-01"
  to     = "2027-03-03"
  groups = ["web"]
}
`
	p, err := ParsePolicy([]byte(src), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r, err := CompilePolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	pol := r.Policy()
	web, def := pol.Groups[0], pol.Default
	if len(web.Freezes) != 2 || len(def.Freezes) != 1 || def.Freezes[0].Name != "year-end" {
		t.Fatalf("freezes: web %v, default %v; want both on web, year-end alone on default", web.Freezes, def.Freezes)
	}
	if w := web.Schedule[0]; len(w.Monthly) != 1 || w.Monthly[0].String() != "mon#2" || w.OffsetDays != 1 {
		t.Fatalf("window: %+v", w)
	}
	// 2026-12-24 is in the year-end freeze.
	if ok, why, _ := def.Calendar().CanStartDrain(time.Date(2026, 12, 24, 12, 0, 0, 0, time.UTC), time.Hour); ok || !strings.Contains(why, "year-end") {
		t.Fatalf("default group on Dec 24: %v %q", ok, why)
	}
	// The policy renders and reads back the same.
	again, err := ParsePolicy([]byte(r.String()), "printed.hcl")
	if err == nil {
		_, err = CompilePolicy(again)
	}
	if err != nil {
		t.Fatalf("printed policy: %v\n%s", err, r.String())
	}
}

func TestCalendarBlockErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{name: "bad monthly", src: "window \"w\" {\n  monthly = [\"tue3\"]\n  start = \"01:00\"\n  end = \"02:00\"\n}\n",
			want: `p.hcl:2:14: window "w".monthly: "tue3" is not a day of the month: use "mon#2"`},
		{name: "fifth week out of range", src: "window \"w\" {\n  monthly = [\"mon#6\"]\n  start = \"01:00\"\n  end = \"02:00\"\n}\n",
			want: `p.hcl:2:14: window "w".monthly: "mon#6": the week must be 1 to 5 or last`},
		{name: "offset without monthly", src: "window \"w\" {\n  offset_days = 1\n  start = \"01:00\"\n  end = \"02:00\"\n}\n",
			want: `p.hcl:2:17: window "w".offset_days: moves the days of monthly, which is empty`},
		{name: "freeze bad date", src: "freeze \"f\" {\n  from = \"20-12\"\n  to = \"01-05\"\n}\n",
			want: `p.hcl:2:10: freeze "f".from: "20-12" is not a day of the calendar: use "MM-DD"`},
		{name: "freeze mixed forms", src: "freeze \"f\" {\n  from = \"12-20\"\n  to = \"2027-01-05\"\n}\n",
			want: `p.hcl:3:8: freeze "f".to: from "12-20" and to "2027-01-05" must both be`},
		{name: "freeze unknown group", src: "freeze \"f\" {\n  from = \"12-20\"\n  to = \"01-05\"\n  groups = [\"nope\"]\n}\n",
			want: `p.hcl:4:13: freeze "f".groups: unknown group "nope": defined groups are "default"`},
		{name: "freeze without to", src: "freeze \"f\" {\n  from = \"12-20\"\n}\n",
			want: `p.hcl:1:1: freeze "f".to: is required, for example to = "01-05"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicy([]byte(tt.src), "p.hcl")
			if err == nil {
				_, err = CompilePolicy(p)
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v\nwant %s", err, tt.want)
			}
		})
	}
}
