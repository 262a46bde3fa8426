package demo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/syncbuf"
)

// duplicateKey returns the first key that appears twice in one JSON object of
// line (at any depth), or "" when there is none. encoding/json keeps the last
// of two equal keys without a word, so the tokens are walked by hand.
func duplicateKey(line []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	var walk func() (string, error)
	walk = func() (string, error) {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return "", err
				}
				key := k.(string)
				if seen[key] {
					return key, nil
				}
				seen[key] = true
				if dup, err := walk(); dup != "" || err != nil {
					return dup, err
				}
			}
			_, err = dec.Token() // '}'
			return "", err
		case json.Delim('['):
			for dec.More() {
				if dup, err := walk(); dup != "" || err != nil {
					return dup, err
				}
			}
			_, err = dec.Token() // ']'
			return "", err
		}
		return "", nil
	}
	return walk()
}

func TestDuplicateKey(t *testing.T) {
	for _, tt := range []struct {
		name, line, dup string
	}{
		{name: "flat", line: `{"msg":"x","host":"a","phase":"idle"}`},
		{name: "twice", line: `{"msg":"x","host":"a","host":"b"}`, dup: "host"},
		{name: "nested", line: `{"a":{"b":1,"b":2}}`, dup: "b"},
		{name: "same key at two levels", line: `{"host":"a","x":{"host":"b"}}`},
		{name: "in an array", line: `{"a":[{"k":1},{"k":1,"k":2}]}`, dup: "k"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dup, err := duplicateKey([]byte(tt.line))
			if err != nil || dup != tt.dup {
				t.Errorf("duplicateKey(%s) = %q, %v; want %q", tt.line, dup, err, tt.dup)
			}
		})
	}
}

// checkJSONLog fails the test for any line of r that is not one JSON object,
// carries a key twice, or has a variable part spliced into its message (a
// message is a fixed text; what varies goes in attributes). It returns the
// number of lines.
func checkJSONLog(t *testing.T, r io.Reader) int {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n, dups := 0, 0
	for sc.Scan() {
		n++
		dup, err := duplicateKey(sc.Bytes())
		if err != nil {
			t.Errorf("line %d is not JSON: %v: %s", n, err, sc.Text())
			continue
		}
		if dup != "" {
			dups++
			if dups <= 5 {
				t.Errorf("line %d carries %q twice: %s", n, dup, sc.Text())
			}
		}
		if part := splicedPart(sc.Bytes()); part != "" {
			t.Errorf("line %d: message has %q spliced in: put it in an attribute: %s", n, part, sc.Text())
		}
	}
	if dups > 0 {
		t.Errorf("%d of %d lines carry a key twice", dups, n)
	}
	return n
}

// The demo's JSON logs, every component's together, carry no key twice on any
// line (a logger's With("host", ...) and a host attribute both named "host"
// once made two of every three lines do), and their messages are fixed texts.
func TestDemoJSONLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	var buf syncbuf.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var out bytes.Buffer
	sum, err := Run(t.Context(), Options{Out: &out, Log: log, Timeout: 90 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !sum.OK() {
		t.Fatalf("checks failed: %v %v\n%s", sum.Violations, sum.Problems, out.String())
	}
	n := checkJSONLog(t, bytes.NewReader(buf.Bytes()))
	if n < 20 {
		t.Fatalf("only %d log lines: the demo's logs did not reach the handler", n)
	}
	t.Logf("%d JSON log lines checked", n)
}

// hostName matches the demo's host names.
var hostName = regexp.MustCompile(`(client|server)-[0-9]+`)

// splicedPart returns a variable part found in the line's message: a host name,
// or the value of one of its string attributes that is not a single word (a
// reason, an error, an ID: words such as a phase or a component name may well
// be part of a fixed text). "" when the message is a fixed text.
func splicedPart(line []byte) string {
	var rec map[string]any
	if err := json.Unmarshal(line, &rec); err != nil {
		return ""
	}
	msg, _ := rec[slog.MessageKey].(string)
	if h := hostName.FindString(msg); h != "" {
		return h
	}
	for k, v := range rec {
		s, ok := v.(string)
		if k == slog.MessageKey || k == slog.LevelKey || k == slog.TimeKey || !ok || !strings.ContainsAny(s, " 0123456789/") {
			continue
		}
		if strings.Contains(msg, s) {
			return s
		}
	}
	return ""
}
