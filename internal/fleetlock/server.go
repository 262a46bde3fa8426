package fleetlock

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/store"
)

// Endpoints, relative to the base URL (the path prefix).
const (
	PathPreReboot   = "/v1/pre-reboot"
	PathSteadyState = "/v1/steady-state"
	// PathMetrics serves the Prometheus metrics, at the root of the listener,
	// with Options.ServeMetrics.
	PathMetrics = "/metrics"
)

// DefaultMaxBodyBytes is the default limit on a request body.
const DefaultMaxBodyBytes = 64 << 10

// NodesAPI is the part of the Nomad nodes API the server uses; *api.Nodes implements it.
type NodesAPI interface {
	List(q *api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error)
}

// NodeMetaKey is the Nomad node meta key that names a node's FleetLock id.
const NodeMetaKey = "fleetlock_id"

// Options configure a Server.
type Options struct {
	Store *store.Store
	// Nodes finds the Nomad node of an id (node meta fleetlock_id); nil: no lookup.
	Nodes NodesAPI
	// Groups are rollboot's groups, as config.Compile made them: a client may
	// name any of them, and the FleetLock group "default" (Zincati's default)
	// maps to Groups.Default (named "default" when it has no name).
	Groups policy.Policy
	// Policy, when set, gives the groups instead of Groups: those of the stored
	// policy, read for each request. An error (no policy can be used) answers
	// 500, and the client retries.
	Policy func(ctx context.Context) (policy.Policy, error)
	// PathPrefix is the path of the base URL, such as "/fleet_lock" ("" = root).
	PathPrefix   string
	MaxBodyBytes int64 // default DefaultMaxBodyBytes
	// AllowedIDs may hold a slot without a Nomad node (as "fleetlock-<id>").
	AllowedIDs []string
	// MaxNodelessSlots bounds the slots of a group held or asked for by hosts
	// without a node; default DefaultMaxNodelessSlots.
	MaxNodelessSlots int
	// RequestTimeout bounds the handling of one request, below the server's
	// write timeout, so that a slow Nomad yields a 500 internal_error answer;
	// default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// RateLimit is the number of FleetLock requests per second the server
	// answers each client (bursts of twice as many); more get 429
	// rate_limited. A client is its certificate with mutual TLS, else its
	// source address. 0: no limit.
	RateLimit float64
	// RateClients bounds the clients tracked for RateLimit; default
	// DefaultRateClients.
	RateClients int
	// ServeMetrics serves the registry at /metrics on the FleetLock listener;
	// off, the listener answers only FleetLock (404 not_found elsewhere).
	ServeMetrics bool
	// ClientCertID says where a client certificate must name the id it asks
	// for: CertIDSANOrCN, CertIDSAN, CertIDCN, or CertIDNone ("" = none).
	ClientCertID string
	// RecordGrace is how long a record the server wrote may stay without a node
	// or allow-list entry behind it before Collect deletes it; default
	// DefaultRecordGrace.
	RecordGrace time.Duration
	// Registry receives the metrics; nil: a new registry (see Server.Registry).
	Registry *prometheus.Registry
	Log      *slog.Logger
	Now      func() time.Time
}

// Defaults of the Options.
const (
	DefaultMaxNodelessSlots = 1
	DefaultRequestTimeout   = 20 * time.Second
	DefaultRecordGrace      = time.Hour
)

// Where a client certificate must name the id (Options.ClientCertID).
const (
	CertIDSANOrCN = "san_or_cn"
	CertIDSAN     = "san"
	CertIDCN      = "cn"
	CertIDNone    = "none"
)

// Server answers FleetLock requests over rollboot's state.
type Server struct {
	opt      Options
	allowed  map[string]bool
	limiter  *limiters // nil: no rate limit
	noted    onceSet   // the conflicts already logged
	gc       collector
	log      *slog.Logger
	now      func() time.Time
	prefix   string
	groups   map[string]bool
	registry *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	ignored  *prometheus.CounterVec

	// defaultGroup is the group of the FleetLock group "default".
	defaultGroup string
}

// New returns a server.
func New(opt Options) *Server {
	s := &Server{opt: opt, log: opt.Log, now: opt.Now, registry: opt.Registry, groups: map[string]bool{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.opt.MaxBodyBytes <= 0 {
		s.opt.MaxBodyBytes = DefaultMaxBodyBytes
	}
	s.groups, s.defaultGroup = groupNames(opt.Groups)
	s.allowed = map[string]bool{}
	for _, id := range opt.AllowedIDs {
		s.allowed[id] = true
	}
	if s.opt.MaxNodelessSlots <= 0 {
		s.opt.MaxNodelessSlots = DefaultMaxNodelessSlots
	}
	if s.opt.RequestTimeout <= 0 {
		s.opt.RequestTimeout = DefaultRequestTimeout
	}
	if s.opt.RecordGrace <= 0 {
		s.opt.RecordGrace = DefaultRecordGrace
	}
	if s.opt.RateLimit > 0 {
		s.limiter = newLimiters(s.opt.RateLimit, s.opt.RateClients)
	}
	s.prefix = NormalizePrefix(opt.PathPrefix)
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollboot_fleetlock_requests_total",
		Help: "FleetLock requests answered, by endpoint, HTTP status code and error kind (\"none\" on success).",
	}, []string{"endpoint", "code", "kind"})
	s.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rollboot_fleetlock_request_duration_seconds",
		Help:    "Time to answer a FleetLock request, by endpoint.",
		Buckets: prometheus.DefBuckets,
	}, []string{"endpoint"})
	s.ignored = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollboot_fleetlock_ignored_claims_total",
		Help: "Host records found claiming a FleetLock id that is not counted for them, by reason: " +
			ClaimOverridden + " (the node meta or the allow-list names the id elsewhere) or " +
			ClaimUnverified + " (the record does not name the Nomad node of its host).",
	}, []string{"reason"})
	s.registry.MustRegister(s.requests, s.duration, s.ignored)
	return s
}

// Registry is the registry the server's metrics are registered on.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// NormalizePrefix turns a configured path prefix into "" or "/a/b" (no trailing
// slash, empty segments dropped).
func NormalizePrefix(p string) string {
	p = cleanPath(p)
	if p == "/" {
		return ""
	}
	return p
}

// cleanPath collapses repeated slashes and drops a trailing one; Go's ServeMux
// would answer such paths with a redirect, which turns a POST into a GET.
func cleanPath(p string) string {
	parts := strings.Split(p, "/")
	out := parts[:0]
	for _, s := range parts {
		if s != "" {
			out = append(out, s)
		}
	}
	return "/" + strings.Join(out, "/")
}

// Handler serves the two FleetLock endpoints under the prefix and, with
// Options.ServeMetrics, the metrics at /metrics.
func (s *Server) Handler() http.Handler {
	metrics := promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{Registry: s.registry})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := cleanPath(r.URL.Path)
		if s.opt.ServeMetrics && p == PathMetrics {
			metrics.ServeHTTP(w, r)
			return
		}
		rest, ok := strings.CutPrefix(p, s.prefix)
		endpoint := "other"
		switch {
		case ok && rest == PathPreReboot:
			endpoint = "pre-reboot"
		case ok && rest == PathSteadyState:
			endpoint = "steady-state"
		}
		start := s.now()
		code, kind := s.serve(w, r, endpoint)
		if kind == "" {
			kind = "none"
		}
		s.requests.WithLabelValues(endpoint, strconv.Itoa(code), kind).Inc()
		s.duration.WithLabelValues(endpoint).Observe(s.now().Sub(start).Seconds())
	})
}

// answer is a handler's result: 200, or an error kind and its text.
type answer struct {
	kind, value string
}

var ok200 = answer{}

func fail(kind, value string) answer { return answer{kind: kind, value: value} }

func (s *Server) serve(w http.ResponseWriter, r *http.Request, endpoint string) (int, string) {
	a := s.route(w, r, endpoint)
	if a.kind == "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "{}\n")
		return http.StatusOK, ""
	}
	code := kindStatus[a.kind]
	if code == 0 {
		code = http.StatusInternalServerError
	}
	if a.kind == KindMethodNotAllowed {
		w.Header().Set("Allow", http.MethodPost)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(ErrorBody{Kind: a.kind, Value: a.value})
	return code, a.kind
}

func (s *Server) route(w http.ResponseWriter, r *http.Request, endpoint string) answer {
	p, a := s.check(w, r, endpoint)
	if a.kind != "" {
		return a
	}
	// Counted per client, and only once the client may speak for the id: a
	// flood from one client, or of ids its certificate does not name, leaves
	// the other clients' budgets alone. Before any Nomad call.
	if s.limiter != nil && !s.limiter.allow(clientKey(r), s.now()) {
		return fail(KindRateLimited, "too many FleetLock requests from this client: retry later")
	}
	// The deadline ends the request well before the server's write timeout,
	// so that the client gets an answer, not a closed connection.
	ctx, cancel := context.WithTimeout(r.Context(), s.opt.RequestTimeout)
	defer cancel()
	log := s.log.With("endpoint", endpoint, "fleetlock_id", p.ID, "group", p.Group)
	group, a, err := s.mapGroup(ctx, p.Group)
	if err != nil {
		log.Warn("FleetLock request failed: no policy to map its group with", "err", err)
		return fail(KindInternal, "rollboot's stored policy cannot be used now: retry later")
	}
	if a.kind != "" {
		return a
	}
	var res answer
	for attempt := 0; ; attempt++ {
		switch endpoint {
		case "pre-reboot":
			res, err = s.preReboot(ctx, p.ID, group)
		default:
			res, err = s.steadyState(ctx, p.ID, group)
		}
		if errors.Is(err, store.ErrConflict) && attempt < 5 && ctx.Err() == nil {
			continue // someone wrote in between: read again and decide again
		}
		break
	}
	if err != nil {
		log.Warn("FleetLock request failed", "err", err)
		if ctx.Err() != nil && r.Context().Err() == nil {
			return fail(KindInternal, "Nomad did not answer within "+s.opt.RequestTimeout.String()+": retry later")
		}
		return fail(KindInternal, "Nomad or the state store failed: retry later")
	}
	if res.kind == "" {
		log.Debug("FleetLock request granted")
	} else {
		log.Debug("FleetLock request refused", "kind", res.kind, "value", res.value)
	}
	return res
}

// check makes the checks that need no Nomad call: the endpoint, the method, the
// header, the body, and that the client certificate names the id.
func (s *Server) check(w http.ResponseWriter, r *http.Request, endpoint string) (Params, answer) {
	if endpoint == "other" {
		return Params{}, fail(KindNotFound, "not a FleetLock endpoint: use POST "+s.prefix+PathPreReboot+" or POST "+s.prefix+PathSteadyState)
	}
	if r.Method != http.MethodPost {
		return Params{}, fail(KindMethodNotAllowed, "method "+r.Method+" not allowed: FleetLock endpoints take POST")
	}
	if !strings.EqualFold(strings.TrimSpace(r.Header.Get("fleet-lock-protocol")), "true") {
		return Params{}, fail(KindMissingHeader, "missing header fleet-lock-protocol: true")
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opt.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return Params{}, fail(KindBodyTooLarge, "request body larger than "+strconv.FormatInt(s.opt.MaxBodyBytes, 10)+" bytes")
		}
		return Params{}, fail(KindBadRequest, "reading the body: "+err.Error())
	}
	p, err := Decode(body)
	if err != nil {
		return Params{}, fail(KindBadRequest, err.Error())
	}
	if why := CertNamesID(r.TLS, p.ID, s.opt.ClientCertID); why != "" {
		return Params{}, fail(KindForbidden, why)
	}
	return p, ok200
}

// mapGroup maps a FleetLock group to a rollboot group: one of Options.Groups,
// or of the stored policy's groups with Options.Policy.
func (s *Server) mapGroup(ctx context.Context, g string) (string, answer, error) {
	groups, def := s.groups, s.defaultGroup
	if s.opt.Policy != nil {
		p, err := s.opt.Policy(ctx)
		if err != nil {
			return "", answer{}, err
		}
		groups, def = groupNames(p)
	}
	if groups[g] {
		return g, ok200, nil
	}
	if g == "default" {
		return def, ok200, nil
	}
	return "", fail(KindUnknownGroup, "unknown group: use \"default\" or the name of a rollboot group"), nil
}

// groupNames are the names of p's groups, and the name of its default group.
func groupNames(p policy.Policy) (map[string]bool, string) {
	def := cmp.Or(p.Default.Name, policy.DefaultGroupName)
	names := map[string]bool{def: true}
	for _, g := range p.Groups {
		names[g.Name] = true
	}
	return names, def
}
