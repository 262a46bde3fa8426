package httpcall

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestFirstLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"  denied\nmore\n", "denied"},
		{"", ""},
		{strings.Repeat("x", 300), strings.Repeat("x", 200) + "..."},
	} {
		if got := FirstLine([]byte(tc.in)); got != tc.want {
			t.Errorf("FirstLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestRedacted(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://user:secret@hook.example/approve?token=abc", "https://hook.example/approve"},
		{"http://hook:8080/x", "http://hook:8080/x"},
		{"http://[::1:bad", "(invalid URL)"},
	} {
		if got := Redacted(tc.in); got != tc.want {
			t.Errorf("Redacted(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestUnwrapped(t *testing.T) {
	inner := errors.New("connection refused")
	err := &url.Error{Op: "Post", URL: "https://user:secret@hook/", Err: inner}
	if got := Unwrapped(err); got != inner || strings.Contains(got.Error(), "secret") {
		t.Errorf("Unwrapped = %v", got)
	}
}
