package notify

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nicholas-fedor/shoutrrr/pkg/router"
	"github.com/nicholas-fedor/shoutrrr/pkg/types"
)

// Target is one notification URL: a shoutrrr service (Slack, Teams, Matrix,
// e-mail, a generic webhook, ...). Its URL carries credentials: it is kept only
// inside the service, and every error is redacted of it.
type Target struct {
	// Name says which target this is without its secrets: "<scheme> #<n>", n
	// counting from 1 in notify.urls.
	Name    string
	Service string // the URL's scheme, a bounded label for metrics
	svc     types.Service
	secrets []string
	// busy: a send to this target has not ended (it may outlive its timeout:
	// shoutrrr's services take no context). At most one runs at a time.
	busy atomic.Bool
}

// ErrBusy is returned for a send to a target whose previous send has not
// ended: the goroutines left by a target that never answers stay bounded.
var ErrBusy = errors.New("the previous send to this target has not ended")

// ErrTimeout is returned for a send that did not end within its timeout.
var ErrTimeout = errors.New("timed out")

// NewTargets opens a target for each URL. It returns the targets it could
// open, and an error naming each one it could not; the errors never contain a
// URL or any part of one but the scheme.
func NewTargets(urls []string) ([]*Target, error) {
	var out []*Target
	var errs []error
	for i, raw := range urls {
		name := fmt.Sprintf("%s #%d", scheme(raw), i+1)
		svc, err := open(raw, true)
		if err != nil {
			errs = append(errs, fmt.Errorf("notification URL %s: %w", name, redact(err, secretsOf(raw))))
			continue
		}
		out = append(out, &Target{Name: name, Service: scheme(raw), svc: svc, secrets: secretsOf(raw)})
	}
	return out, errors.Join(errs...)
}

// CheckURL reports what is wrong with a notification URL (an unknown service,
// a malformed URL, a setting the service does not have), redacted of it. It
// does no network I/O: a Matrix URL with a user, whose service logs in when
// it is opened, is checked up to its format only.
func CheckURL(raw string) error {
	if _, err := open(raw, false); err != nil {
		return redact(err, secretsOf(raw))
	}
	return nil
}

// open returns the initialized service of a URL, as shoutrrr's router does
// (custom URLs such as generic+https:// included), but with the service's own
// error (the router replaces it with "failed to initialize service"). Without
// io, a service whose initialization talks to its server (Matrix logs in) is
// not initialized.
func open(raw string, io bool) (types.Service, error) {
	var r router.ServiceRouter
	name, u, err := r.ExtractServiceName(raw)
	if err != nil {
		return nil, err
	}
	svc, err := r.NewService(name)
	if err != nil {
		return nil, err
	}
	if u.Scheme != name {
		custom, ok := svc.(types.CustomURLService)
		if !ok {
			return nil, fmt.Errorf("%s: custom URLs are not supported by this service", name)
		}
		if u, err = custom.GetConfigURLFromCustom(u); err != nil {
			return nil, err
		}
	}
	if !io && name == "matrix" && u.User != nil && u.User.Username() != "" {
		return svc, nil
	}
	if err := svc.Initialize(u, nil); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return svc, nil
}

// Send sends message to the target, giving up after timeout or when ctx ends.
func (t *Target) Send(ctx context.Context, timeout time.Duration, message string) error {
	if !t.busy.CompareAndSwap(false, true) {
		return ErrBusy
	}
	res := make(chan error, 1)
	go func() {
		defer t.busy.Store(false)
		res <- t.svc.Send(message, &types.Params{})
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-res:
		return redact(err, t.secrets)
	case <-timer.C:
		return ErrTimeout
	case <-ctx.Done():
		return ctx.Err()
	}
}

// scheme returns the URL's scheme, or "invalid".
func scheme(raw string) string {
	s, _, ok := strings.Cut(raw, "://")
	if !ok || s == "" || strings.ContainsAny(s, "/@?#") {
		return "invalid"
	}
	return strings.ToLower(s)
}

// secretsOf returns the parts of a URL that an error must not show: the URL
// itself and, since services put tokens anywhere (Slack in the host and path,
// Telegram in the user, generic webhooks in the query), every piece of it but
// the scheme, longest first, also as escaped.
func secretsOf(raw string) []string {
	set := map[string]bool{raw: true}
	rest := raw
	if _, after, ok := strings.Cut(raw, "://"); ok {
		rest = after
	}
	for _, p := range strings.FieldsFunc(rest, func(r rune) bool { return strings.ContainsRune(":/@?&=#,;+", r) }) {
		if len(p) >= 3 {
			set[p] = true
			if u, err := url.QueryUnescape(p); err == nil {
				set[u] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// redact returns err's text with the secrets replaced. The result wraps
// nothing: the original error, which shows them, is not kept.
func redact(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	for _, s := range secrets {
		text = strings.ReplaceAll(text, s, "<redacted>")
	}
	return errors.New(text)
}
