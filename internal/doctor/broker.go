package doctor

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrStreamEnded is a subscription to the event stream that Nomad accepted
// and ended at once: from Nomad 1.11.2, the shape of a broker turned off (or
// of a refusal), since the HTTP handler writes its 200 before the streaming
// RPC runs (command/agent/event_endpoint.go EventStream).
var ErrStreamEnded = errors.New("the event stream ended at once")

const brokerFix = "set enable_event_broker = true (the default) in the server block of every Nomad server's configuration and restart them one at a time"

// checkBroker: the event broker is on. Without it the coordinator follows the
// nodes with blocking queries (docs/architecture.md, "Following the nodes"):
// rollouts work, so it is a warning.
func checkBroker(in BrokerInput) []Finding {
	f := Finding{Check: CheckBroker, Severity: Warning, Fix: brokerFix}
	switch err := in.Err; {
	case in.Skipped:
		return nil
	case err == nil:
		return []Finding{{Check: CheckBroker, What: "the event broker streams node events"}}
	case strings.Contains(err.Error(), "EventBroker not configured"):
		// Up to Nomad 1.11.1: 500 from nomad/state/state_store.go EventBroker.
		f.What = "the event broker is off (500 \"EventBroker not configured\"): the coordinator follows the nodes with blocking queries"
	case errors.Is(err, ErrStreamEnded):
		f.What = "the event stream ends at once: the servers run with enable_event_broker = false (so Nomad 1.11.2 and later answer), or the token lacks node:read"
		f.Fix = brokerFix + "; and give the coordinator's token node:read (deploy/acl/rollboot-coordinator.policy.hcl)"
	case statusOf(err) == http.StatusForbidden:
		f.What = "the token may not subscribe to node events (GET /v1/event/stream?topic=Node refused): it lacks node:read"
		f.Fix = "give the token node:read (deploy/acl/rollboot-coordinator.policy.hcl, rollboot-operator.policy.hcl)"
	default:
		f.What = fmt.Sprintf("cannot subscribe to the event stream: %v", err)
	}
	return []Finding{f}
}
