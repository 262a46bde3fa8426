package main

import (
	"strings"
	"testing"
	"time"
)

func TestPauseEnd(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		until string
		dur   time.Duration
		want  time.Time
		err   string
	}{
		{name: "neither: until resumed"},
		{name: "for", dur: 2 * time.Hour, want: now.Add(2 * time.Hour)},
		{name: "until with a zone", until: "2026-12-02T12:00:00+01:00", want: now.Add(time.Hour)},
		{name: "both", until: "2026-12-02T12:00:00Z", dur: time.Hour, err: "not both"},
		{name: "negative for", dur: -time.Hour, err: "must be positive"},
		{name: "until not RFC 3339", until: "tomorrow", err: "use RFC 3339, for example"},
		{name: "until in the past", until: "2026-12-02T09:00:00Z", err: "has passed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pauseEnd(tc.until, tc.dur, now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !got.Equal(tc.want) {
				t.Fatalf("pauseEnd = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestPauseScope(t *testing.T) {
	tests := []struct {
		name      string
		scope     pauseScope
		args      []string
		host, err string
	}{
		{name: "argument", args: []string{"web-1"}, host: "web-1"},
		{name: "flag", scope: pauseScope{host: "web-1"}, host: "web-1"},
		{name: "both the same", scope: pauseScope{host: "web-1"}, args: []string{"web-1"}, host: "web-1"},
		{name: "two hosts", scope: pauseScope{host: "web-2"}, args: []string{"web-1"}, err: "given twice"},
		{name: "host and group", scope: pauseScope{group: "web"}, args: []string{"web-1"}, err: "not both"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.scope
			err := s.resolve("pause", tc.args)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || s.host != tc.host {
				t.Fatalf("resolve: host %q, %v; want %q", s.host, err, tc.host)
			}
		})
	}
}
