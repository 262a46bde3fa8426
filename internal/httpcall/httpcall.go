// Package httpcall holds what the clients of the operators' HTTP services
// (Prometheus and Alertmanager for the alert gate, the health gates, the
// Alertmanager silences, the approval webhook) share: how an answer is shown
// (its first line) and how a URL is named in an error (never with its
// credentials), and a request's error with the URL net/http puts in it
// removed.
package httpcall

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// maxLine bounds the part of an answer shown.
const maxLine = 200

// FirstLine is the first line of an answer's body, white space trimmed, cut
// at 200 bytes ("..." then added).
func FirstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if len(s) > maxLine {
		s = s[:maxLine] + "..."
	}
	return s
}

// Redacted is raw without its user information and its query, which may
// hold credentials: the URL as errors and logs name it.
func Redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.RawQuery, u.ForceQuery = nil, "", false
	return u.String()
}

// Unwrapped is a request's error without the *url.Error around it, which
// repeats the whole URL, credentials included.
func Unwrapped(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// NoRedirects is a client with its own transport that does not follow
// redirects: an answer is judged as the URL given answers it.
func NoRedirects() *http.Client {
	return &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
