package notify

import (
	"fmt"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// A host's shard is part of the ledger's format: it must not change from one
// build to the next, or a new leader would look for a host's marks in the
// wrong variable and send its events again.
func TestShardOf(t *testing.T) {
	tests := []struct {
		name, host, want string
	}{
		// FNV-1a of "a" is 0xe40c292c: 0x2c is 44.
		{name: "one letter", host: "a", want: "44"},
		{name: "short", host: "h1", want: "18"},
		{name: "dashed", host: "web-1", want: "31"},
		{name: "with dots", host: "web-1.dc1.example.com", want: "22"},
		{name: "numbered", host: "db-0042", want: "40"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ShardOf(tt.host); got != tt.want {
				t.Errorf("ShardOf(%q) = %s, want %s", tt.host, got, tt.want)
			}
		})
	}
}

// 5,000 hosts named as fleets name them fill every shard, none with more than
// twice its share.
func TestShardsSpreadHosts(t *testing.T) {
	count := map[string]int{}
	for i := range 5000 {
		count[ShardOf(fmt.Sprintf("web-%04d.dc1.example.com", i))]++
	}
	if len(count) != LedgerShards {
		t.Fatalf("%d shards used, want %d", len(count), LedgerShards)
	}
	for shard, n := range count {
		if i, err := strconv.Atoi(shard); err != nil || i < 0 || i >= LedgerShards {
			t.Errorf("shard %q out of range", shard)
		}
		if n > 2*5000/LedgerShards {
			t.Errorf("shard %s holds %d hosts, more than twice its share", shard, n)
		}
	}
}

func TestLedgerParts(t *testing.T) {
	tests := []struct {
		name   string
		ledger Ledger
		want   map[string]map[string]string
	}{
		{name: "empty: the pause part alone, with the version",
			want: map[string]map[string]string{PausePart: {"version": "2"}}},
		{name: "paused and resumed", ledger: Ledger{Pause: PauseSent{At: t0, Paused: true, Resumed: true}},
			want: map[string]map[string]string{PausePart: {"version": "2", "pause": nanos(t0) + ",pr"}}},
		{name: "hosts in their shards, kinds sorted",
			ledger: Ledger{Hosts: map[string]HostSent{
				"h1":    {Grant: "g1", Kinds: []Kind{Rebooting, DrainStarted}},
				"web-1": {Back: t0},
			}},
			want: map[string]map[string]string{
				PausePart: {"version": "2"},
				"18":      {"version": "2", "host/h1": "g1,drain_started+rebooting,0"},
				"31":      {"version": "2", "host/web-1": ",," + nanos(t0)},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.ledger.Parts()
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("parts\n%v\nwant\n%v", got, tt.want)
			}
			back, problems, err := DecodeLedger(got)
			if err != nil || len(problems) > 0 {
				t.Fatalf("decode: %v %v", err, problems)
			}
			if !reflect.DeepEqual(back.Parts(), got) {
				t.Errorf("round trip\n%v\nwant\n%v", back.Parts(), got)
			}
		})
	}
}

func TestDecodeLedger(t *testing.T) {
	t1 := t0.Add(time.Hour)
	tests := []struct {
		name     string
		parts    map[string]map[string]string
		want     Ledger
		problems []string
		err      string
	}{
		{name: "nothing", want: Ledger{}},
		{name: "entries that cannot be read are named and left out",
			parts: map[string]map[string]string{
				PausePart: {"version": "2", "pause": "x,p"},
				"3":       {"version": "2", "host/a": "g1,drain_started+bogus,0", "host/b": "nonsense", "host/c": "g3,rebooting," + nanos(t0)},
			},
			want: Ledger{Hosts: map[string]HostSent{
				"a": {Grant: "g1", Kinds: []Kind{DrainStarted}},
				"c": {Grant: "g3", Kinds: []Kind{Rebooting}, Back: t0},
			}},
			problems: []string{"host/a: unknown event \"bogus\"", "host/b: malformed", "pause: malformed"}},
		{name: "version 1 alone: the starting point of an upgrade",
			parts: map[string]map[string]string{LegacyPart: {"version": "1", "pause": nanos(t0) + ",p", "host/a": "g1,drain_started,0"}},
			want:  Ledger{Hosts: map[string]HostSent{"a": {Grant: "g1", Kinds: []Kind{DrainStarted}}}, Pause: PauseSent{At: t0, Paused: true}}},
		{name: "version 1 written by an older leader since: put on the parts",
			parts: map[string]map[string]string{
				PausePart:    {"version": "2", "pause": nanos(t0) + ",p"},
				ShardOf("a"): {"version": "2", "host/a": "g1,drain_started,0"},
				ShardOf("b"): {"version": "2", "host/b": "g2,drain_started,0"},
				LegacyPart:   {"version": "1", "pause": nanos(t0) + ",pr", "host/a": "g1,drain_started+rebooting,0", "host/b": "g3,drain_started," + nanos(t1)},
			},
			want: Ledger{Hosts: map[string]HostSent{
				"a": {Grant: "g1", Kinds: []Kind{DrainStarted, Rebooting}},
				"b": {Grant: "g3", Kinds: []Kind{DrainStarted}, Back: t1},
			}, Pause: PauseSent{At: t0, Paused: true, Resumed: true}}},
		{name: "a part of a newer version is refused",
			parts: map[string]map[string]string{PausePart: {"version": "2"}, "7": {"version": "3", "host/a": "g1,,0"}},
			err:   `notification ledger part "7": version "3": this rollboot reads version 2`},
		{name: "a part without a version is refused",
			parts: map[string]map[string]string{PausePart: {"pause": "0,p"}},
			err:   `notification ledger part "pause": version "": this rollboot reads version 2`},
		{name: "the single variable of another version is refused",
			parts: map[string]map[string]string{LegacyPart: {"version": "2"}},
			err:   `notification ledger of one variable: version "2": this rollboot reads version 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems, err := DecodeLedger(tt.parts)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(problems, tt.problems) {
				t.Errorf("problems %q, want %q", problems, tt.problems)
			}
			if !reflect.DeepEqual(got.Parts(), tt.want.Parts()) {
				t.Errorf("ledger\n%v\nwant\n%v", got.Parts(), tt.want.Parts())
			}
		})
	}
}

// legacyItems encodes l as the single variable of version 1 did.
func legacyItems(l Ledger) map[string]string {
	items := map[string]string{}
	for _, part := range l.Parts() {
		for k, v := range part {
			items[k] = v
		}
	}
	items["version"] = "1"
	return items
}

// A halt is sent once per scope and time: the ledger keeps each scope's last
// halt notified in its pause part, across a new leader's read.
func TestLedgerHalts(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	web := Event{Kind: Halted, Group: "web", Error: "group web halted", At: at}
	rollout := Event{Kind: Halted, Error: "the rollout halted", At: at}
	var l Ledger
	if l.Sent(web) {
		t.Fatal("a halt sent before it was marked")
	}
	l.Mark(web)
	decoded, problems, err := DecodeLedger(l.Parts())
	if err != nil || len(problems) > 0 {
		t.Fatal(err, problems)
	}
	if !decoded.Sent(web) || decoded.Sent(rollout) {
		t.Errorf("after a read: web sent %v, rollout sent %v", decoded.Sent(web), decoded.Sent(rollout))
	}
	if later := (Event{Kind: Halted, Group: "web", At: at.Add(time.Hour)}); decoded.Sent(later) {
		t.Error("a later halt of the same group counts as sent")
	}
	evs := Derive(nil, Pause{}, Ledger{})
	if len(evs) != 0 {
		t.Errorf("events without halts: %v", evs)
	}
	if got := haltEvents([]Halt{{Scope: "web", Since: at, Text: "x"}}); len(got) != 1 || got[0] != (Event{Kind: Halted, Group: "web", Error: "x", At: at}) {
		t.Errorf("haltEvents = %+v", got)
	}
}
