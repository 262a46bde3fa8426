package agent

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/hashicorp/nomad/api"
	vaultapi "github.com/hashicorp/vault/api"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/watch"
)

// Backoffs of the agent's API calls. A transient error (a 5xx such as "No cluster
// leader", a 429, a connection refused while a server restarts) is retried soon;
// a refused token (403) is not going to heal by itself, so it is retried slowly,
// and each refusal is logged as an error for the operator.
const (
	transientBase = time.Second
	transientMax  = 30 * time.Second
	deniedBase    = 30 * time.Second
	deniedMax     = 5 * time.Minute
)

// errKind sorts an API error by what to do about it.
type errKind int

const (
	transient errKind = iota // retry with backoff
	denied                   // 403: the token is unknown, revoked or lacks a right; retry slowly and say so loudly
	permanent                // a request the server will never accept (400): a configuration error
)

var statusInText = regexp.MustCompile(`(?i)response code:? (\d{3})`)

// statusOf returns the HTTP status of an error from the Nomad, Consul or Vault
// client, or 0 when there is none (a transport error).
func statusOf(err error) int {
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) && ure.HasStatusCode() {
		return ure.StatusCode()
	}
	var vre *vaultapi.ResponseError
	if errors.As(err, &vre) {
		return vre.StatusCode
	}
	// The Consul client (and wrapped Nomad errors) say "Unexpected response code: 500 (...)".
	if m := statusInText.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

func classify(err error) errKind {
	switch s := statusOf(err); {
	case s == http.StatusForbidden || s == http.StatusUnauthorized:
		return denied
	case s == http.StatusBadRequest:
		return permanent
	}
	return transient
}

// retry calls fn until it succeeds, ctx ends (ctx.Err() is returned) or fn fails
// with a configuration error (returned). Every other error is retried with
// backoff; what names the call in the logs. Errors from the Nomad, Consul and
// Vault clients never carry the token, so they are logged as they are.
func (a *Agent) retry(ctx context.Context, what string, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var d time.Duration
		switch classify(err) {
		case permanent:
			return err
		case denied:
			d = policy.Backoff(deniedBase, deniedMax, attempt)
			a.log.Error("permission denied: the token is unknown, revoked or lacks a right "+
				"(see deploy/acl for the agent policy); retrying slowly", "op", what, "err", err, "retry_in", d)
		default:
			d = policy.Backoff(transientBase, transientMax, attempt)
			a.log.Warn("failed; retrying", "op", what, "err", err, "attempt", attempt, "retry_in", d)
		}
		if !watch.Sleep(ctx, d) {
			return ctx.Err()
		}
	}
}

// keepTrying calls try until it succeeds, waiting policy.Backoff(base, maxWait, n)
// after the n-th failure in a row; try logs its own errors. It returns false when
// ctx ends first.
func keepTrying(ctx context.Context, base, maxWait time.Duration, try func() error) bool {
	for attempt := 1; ; attempt++ {
		if try() == nil {
			return true
		}
		if !watch.Sleep(ctx, policy.Backoff(base, maxWait, attempt)) {
			return false
		}
	}
}
