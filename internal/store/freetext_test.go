package store

import (
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/nomad/api"
	"pgregory.net/rapid"
)

func TestCleanText(t *testing.T) {
	long := strings.Repeat("a", 300)
	wide := strings.Repeat("é", 200) // 400 bytes, 2 per character
	tests := []struct {
		name, in, want string
	}{
		{"clean", "sentinel file /var/run/reboot-required", "sentinel file /var/run/reboot-required"},
		{"empty", "", ""},
		{"ordinary spaces kept", "  a  b ", "  a  b "},
		{"not ASCII, clean", "Grüße, 世界", "Grüße, 世界"},
		{"newlines", "line 1\nline 2\r\nline 3", "line 1 line 2 line 3"},
		{"tab and other breaks", "a\tb\u2028c\u0085d", "a b c d"},
		{"a run of breaks is one space", "a\n\x01\n\r\nb", "a b"},
		{"ANSI colours", "\x1b[31;1mred\x1b[0m alert", "red alert"},
		{"cursor and screen", "\x1b[2J\x1b[Hcleared\x1b7\x1b(B", "cleared"},
		{"hyperlink (OSC 8)", "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x07", "click"},
		{"terminal title", "\x1b]0;pwned\x07ok", "ok"},
		{"C1 CSI", "a\u009b31mb", "ab"},
		{"C1 controls", "a\u0080\u0085b\u009fc", "a b"},
		{"C0 controls and DEL", "a\x00b\x07c\x08d\x7fe", "abcde"},
		{"bidirectional controls", "abc\u202edcba\u202c\u2066x\u2069", "abcdcbax"},
		{"invalid UTF-8", "a\xffb\xc3", "a\uFFFDb\uFFFD"},
		{"ESC at the end", "a\x1b", "a"},
		{"ESC before a letter", "a\x1bMb", "ab"},
		{"ESC before a break", "a\x1b\nb", "a b"},
		{"controls alone stay non-empty", "\x1b[0m\x01", "\uFFFD"},
		{"a break alone is a space", "\n", " "},
		{"long", long, long[:MaxTextBytes-len(CutMarker)] + CutMarker},
		{"exactly the cap", long[:MaxTextBytes], long[:MaxTextBytes]},
		{"long, cut on a character", wide, wide[:MaxTextBytes-len(CutMarker)-1] + CutMarker},
		{"long after cleaning only", strings.Repeat("\x1b[0m", 100) + "ok", "ok"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CleanText(tt.in); got != tt.want {
				t.Errorf("CleanText(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

// Whatever it is given, CleanText returns valid UTF-8 of at most MaxTextBytes
// with no control character, empty only for an empty text, the same for a
// clean text, and nothing more to clean.
func TestCleanTextProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		alphabet := rapid.SampledFrom([]string{"a", " ", "é", "世", "\n", "\r", "\t", "\x1b", "[", "]", "3", "m", "\x07",
			"\\", "\x00", "\x7f", "\u0085", "\u009b", "\u009d", "\u009c", "\u202e", "\xff", "\xc3", "…"})
		s := strings.Join(rapid.SliceOfN(alphabet, 0, 400).Draw(t, "parts"), "")
		got := CleanText(s)
		switch {
		case !utf8.ValidString(got):
			t.Fatalf("CleanText(%q) = %q: not UTF-8", s, got)
		case len(got) > MaxTextBytes:
			t.Fatalf("CleanText(%q) is %d bytes", s, len(got))
		case (got == "") != (s == ""):
			t.Fatalf("CleanText(%q) = %q", s, got)
		case CleanText(got) != got:
			t.Fatalf("CleanText(%q) = %q, cleaned again %q", s, got, CleanText(got))
		case !isClean(got):
			t.Fatalf("CleanText(%q) = %q: not clean", s, got)
		}
		for _, r := range got {
			if isControl(r) || isBreak(r) && r != ' ' {
				t.Fatalf("CleanText(%q) = %q: holds %U", s, got, r)
			}
		}
		if isClean(s) && got != s {
			t.Fatalf("clean %q changed to %q", s, got)
		}
	})
}

// Every string of a host record is either free text, cleaned as it is read and
// written, or an identifier, kept as it is. A string field added later fails
// this test until it is put in one list (and, if free text, in cleanText).
func TestHostFreeTextFields(t *testing.T) {
	freeText := map[string]bool{"Reason": true, "Fingerprint": true, "DetectError": true, "DiscoverError": true, "HoldReason": true,
		"AgentVersion": true, "AgentJob": true, "Failure.Step": true, "Failure.Message": true}
	identifiers := map[string]bool{"Host": true, "NodeID": true, "Hostname": true, "BootID": true, "RebootingGrant": true,
		"RebootedGrant": true, "FleetLockID": true, "Group": true, "Failure.Grant": true}
	const dirty = "x\ny"
	check := func(name string, set func(r *HostRecord) *string) {
		t.Run(name, func(t *testing.T) {
			if freeText[name] == identifiers[name] {
				t.Fatalf("field %s: put it in freeText (and cleanText) or in identifiers", name)
			}
			r := fullHostRecord()
			f := *r.Failure
			r.Failure = &f
			*set(&r) = dirty
			got, err := decodeHost(&api.Variable{Path: "rollboot/hosts/web-1", Items: r.items()})
			if err != nil {
				t.Fatal(err)
			}
			want := dirty
			if freeText[name] {
				want = "x y"
			}
			if v := *set(&got); v != want {
				t.Errorf("%s read back as %q, want %q", name, v, want)
			}
		})
	}
	forStrings(reflect.TypeOf(HostRecord{}), func(i int, name string) {
		check(name, func(r *HostRecord) *string { return reflect.ValueOf(r).Elem().Field(i).Addr().Interface().(*string) })
	})
	forStrings(reflect.TypeOf(RebootFailure{}), func(i int, name string) {
		check("Failure."+name, func(r *HostRecord) *string {
			return reflect.ValueOf(r.Failure).Elem().Field(i).Addr().Interface().(*string)
		})
	})
}

func forStrings(typ reflect.Type, f func(i int, name string)) {
	for i := range typ.NumField() {
		if typ.Field(i).Type.Kind() == reflect.String {
			f(i, typ.Field(i).Name)
		}
	}
}

// A record is cleaned as it is decoded, whatever the host wrote; one that an
// agent writes with text to clean is stored clean, reads back Equal (so the
// agent neither rewrites it nor takes it for someone else's), and the caller's
// record is left as it was.
func TestHostRecordTextCleaned(t *testing.T) {
	long := strings.Repeat("x", 60000)
	items := map[string]string{"host": "web-1", "reboot_required": "true", "reason": long,
		"detect_error": "boom\n\x1b[31mred", "discover_error": "\x01", "hold_reason": "a\u202eb",
		"failed_step": "reboot command", "failed_message": "exit\r\nstatus", "failed_exit_status": "1"}
	r, err := decodeHost(&api.Variable{Path: "rollboot/hosts/web-1", Items: items})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Reason) != MaxTextBytes || !strings.HasSuffix(r.Reason, CutMarker) {
		t.Errorf("reason of %d bytes read as %d bytes %q...", len(long), len(r.Reason), r.Reason[:10])
	}
	if r.DetectError != "boom red" || r.DiscoverError != "\uFFFD" || r.HoldReason != "ab" || r.Failure.Message != "exit status" {
		t.Errorf("read %q %q %q %q", r.DetectError, r.DiscoverError, r.HoldReason, r.Failure.Message)
	}

	mine := HostRecord{Host: "web-1", RebootRequired: true, Reason: long, DetectError: "a\nb",
		Failure: &RebootFailure{Grant: "g1", Step: StepReboot, ExitStatus: 1, Message: "m\x1b[0m"}}
	stored := mine.items()
	if stored["reason"] != CleanText(long) || stored["detect_error"] != "a b" || stored["failed_message"] != "m" {
		t.Errorf("stored %q", stored)
	}
	back, err := decodeHost(&api.Variable{Path: "rollboot/hosts/web-1", Items: maps.Clone(stored)})
	if err != nil {
		t.Fatal(err)
	}
	if !mine.Equal(back) || !back.Equal(mine) {
		t.Errorf("a record is not Equal to what it reads back as")
	}
	if mine.Reason != long || mine.DetectError != "a\nb" || mine.Failure.Message != "m\x1b[0m" {
		t.Errorf("encoding changed the caller's record: %q %q", mine.DetectError, mine.Failure.Message)
	}
}

// A clean record is read and written as it is, sharing its strings: cleaning
// costs a clean record no copy.
func TestCleanRecordUnchanged(t *testing.T) {
	r := fullHostRecord()
	r.Reason = "sentinel file /var/run/reboot-required; Grüße"
	got := r
	got.cleanText()
	if !reflect.DeepEqual(got, r) || got.Failure != r.Failure {
		t.Errorf("cleanText changed a clean record: %+v", got)
	}
	if n := testing.AllocsPerRun(100, func() { got.cleanText() }); n != 0 {
		t.Errorf("cleanText of a clean record allocates %v times", n)
	}
}

// An item that cannot be read is reported with a short, clean text (a parse
// error quotes the item, whose writer chose it), still wrapping the error.
func TestUnreadableItemReportedClean(t *testing.T) {
	huge := strings.Repeat("9", 60000)
	_, err := decodeHost(&api.Variable{Path: "rollboot/hosts/web-1", Items: map[string]string{"host": "web-1", "requested_at": huge}})
	var pe *time.ParseError
	if err == nil || len(err.Error()) > 2*MaxTextBytes || !errors.As(err, &pe) {
		t.Errorf("error of %d bytes: %.100q (a *time.ParseError: %v)", len(err.Error()), err, errors.As(err, &pe))
	}
	_, err = decodeHost(&api.Variable{Path: "rollboot/hosts/web-1", Items: map[string]string{"host": "web-1", "version": huge}})
	if !errors.Is(err, ErrUnknownVersion) || len(err.Error()) > 2*MaxTextBytes {
		t.Errorf("error of %d bytes: %.100q", len(err.Error()), err)
	}
}
