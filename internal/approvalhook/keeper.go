package approvalhook

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollboot/rollboot/internal/admission"
	"github.com/rollboot/rollboot/internal/parallel"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/telemetry"
)

// Settings are the policy's approval webhook: its URL, the bound of one
// request, and where its secret comes from.
type Settings struct {
	URL               string
	Timeout           time.Duration
	Header, Env, File string
}

// Asker asks the approval webhook about one host (*Hook).
type Asker interface {
	Ask(ctx context.Context, r Request, now time.Time) admission.WebhookAnswer
}

// Asked is a host's current request, as the webhook is asked about it.
type Asked struct {
	Request
	RequestedAt time.Time
}

// Keeper keeps the webhook's answers while they stand, by host and request:
// an approving one until the host's request is granted (its retries after an
// aborted drain included), one that did not approve until the policy's
// recheck, when admission asks again. They are the leader's memory only: a new
// leader asks again. Used by the coordinator's pass goroutine only.
type Keeper struct {
	asker    Asker
	given    bool     // the asker came with the options, whatever the policy
	settings Settings // what asker was made for (a policy that changes it gets a new one)
	log      *slog.Logger
	requests *prometheus.CounterVec
	answers  map[string]kept
}

type kept struct {
	requestedAt time.Time
	ans         admission.WebhookAnswer
}

// maxAsks bounds the webhook requests in flight at once.
const maxAsks = 8

// NewKeeper returns a keeper asking with asker (nil: over HTTP, as the
// settings Ask is given say), its series registered in reg.
func NewKeeper(asker Asker, reg prometheus.Registerer, log *slog.Logger) *Keeper {
	k := &Keeper{asker: asker, given: asker != nil, log: log, answers: map[string]kept{},
		requests: telemetry.Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollboot_approval_webhook_requests_total",
			Help: "Requests to the approval webhook, by result: approved (2xx) or refused (any other answer, none in time, unreachable)."}, []string{"result"}))}
	k.requests.WithLabelValues("approved")
	k.requests.WithLabelValues("refused")
	return k
}

// Standing returns the answers to the hosts' current requests (requested:
// when each pending host's request was made): a new request is asked anew.
// A nil keeper has none.
func (k *Keeper) Standing(requested map[string]time.Time) map[string]admission.WebhookAnswer {
	out := map[string]admission.WebhookAnswer{}
	if k == nil {
		return out
	}
	for host, a := range k.answers {
		if at, ok := requested[host]; ok && at.Equal(a.requestedAt) {
			out[host] = a.ans
		}
	}
	return out
}

// StandingFor returns the answers standing for the pending hosts of plans,
// by host: those to each host's current request (a new request is asked
// anew).
func (k *Keeper) StandingFor(plans map[string]store.Plan) map[string]admission.WebhookAnswer {
	requested := map[string]time.Time{}
	for host, p := range plans {
		if p.Phase == store.PhasePending {
			requested[host] = p.RequestedAt
		}
	}
	return k.Standing(requested)
}

// ForgetSettled drops the answers no longer standing under plans: the host
// granted (its plan no longer pending on that request; an approving answer
// stands through the backoffs of its retries), or gone.
func (k *Keeper) ForgetSettled(plans map[string]store.Plan) {
	k.Forget(func(host string, requestedAt time.Time, approved bool) bool {
		p, ok := plans[host]
		return ok && p.RequestedAt.Equal(requestedAt) && (p.Phase == store.PhasePending || p.Phase == store.PhaseBackoff && approved)
	})
}

// Ask asks the webhook about each host, side by side, and keeps the answers;
// an answer that changed is logged.
func (k *Keeper) Ask(ctx context.Context, s Settings, hosts []Asked, now time.Time) {
	if !k.given && (k.asker == nil || k.settings != s) {
		k.asker, k.settings = &Hook{URL: s.URL, Timeout: s.Timeout, Header: s.Header, Env: s.Env, File: s.File}, s
	}
	answers := make([]admission.WebhookAnswer, len(hosts))
	parallel.Each(len(hosts), maxAsks, nil, func(i int) {
		answers[i] = k.asker.Ask(ctx, hosts[i].Request, now)
	})
	for i, h := range hosts {
		a := answers[i]
		before, asked := k.answers[h.Host]
		k.answers[h.Host] = kept{requestedAt: h.RequestedAt, ans: a}
		result := "refused"
		if a.Approved {
			result = "approved"
		}
		k.requests.WithLabelValues(result).Inc()
		if !asked || before.ans.Answer != a.Answer || before.ans.Approved != a.Approved {
			// Logged when it changes, not at every recheck.
			k.log.Info("approval webhook answered", "host", h.Host, "group", h.Group, "approved", a.Approved, "answer", a.Answer)
		}
	}
}

// Forget drops the answers that no longer stand: keep says whether the answer
// to the host's request made at requestedAt, approving or not, still does.
// A nil keeper has none.
func (k *Keeper) Forget(keep func(host string, requestedAt time.Time, approved bool) bool) {
	if k == nil {
		return
	}
	for host, a := range k.answers {
		if !keep(host, a.requestedAt, a.ans.Approved) {
			delete(k.answers, host)
		}
	}
}
