package nomadsim

// Nomad Variables (Nomad >= 1.4): the HTTP endpoints of
// command/agent/variable_endpoint.go, the RPCs of nomad/variables_endpoint.go and the
// state store rules of nomad/state/state_store_variables.go. Locks (Nomad >= 1.7) are
// in locks.go; both share the apply path below, as Variables.Apply does in Nomad.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-bexpr"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// varKey identifies a variable: the state store's "id" index is (Namespace, Path).
type varKey struct{ ns, path string }

// simVar is one stored variable (structs.VariableEncrypted, kept in clear text).
type simVar struct {
	ns, path    string
	createIndex uint64
	modifyIndex uint64
	createTime  int64
	modifyTime  int64
	items       map[string]string
	lock        *varLock
	// zero marks the "plausible zero value" conflicts the state store makes up
	// (state_store_variables.go varSetCASTxn zeroVal): they have no KeyID, so
	// Variables.makeVariablesApplyResponse returns only Namespace and Path.
	zero bool
}

// varLock is structs.VariableLock.
type varLock struct {
	id    string
	ttl   time.Duration
	delay time.Duration
}

func (l *varLock) copy() *varLock {
	if l == nil {
		return nil
	}
	c := *l
	return &c
}

func (v *simVar) copy() *simVar {
	c := *v
	c.items = maps.Clone(v.items)
	c.lock = v.lock.copy()
	return &c
}

// varState holds the variables table and the leader's lock TTL timers.
type varState struct {
	vars map[varKey]*simVar
	// tableIndex is the "variables" row of the index table: the index of the last
	// write or delete (state_store_variables.go updates it on both).
	tableIndex uint64
	// timers are the leader's in-memory lock TTL timers, by lock ID (nomad/locks.go).
	timers map[string]*lockTimer
	// epoch changes with every leadership change; timers and delayed releases of an
	// older epoch do nothing (a deposed leader's raft applies fail).
	epoch uint64
	// topics wakes the blocking queries of what a write changes (watch.go).
	topics *topics
	// sorted are the variables in the id index's order, kept in order as they
	// are stored and deleted (put, del): a list finds its prefix by binary
	// search and walks the variables themselves, without sorting every key
	// again after each new variable or looking each one up.
	sorted []*simVar
}

func varCompare(a *simVar, k varKey) int {
	if c := strings.Compare(a.ns, k.ns); c != 0 {
		return c
	}
	return strings.Compare(a.path, k.path)
}

// sortedVars are every variable, sorted by namespace, then path.
func (v *varState) sortedVars() []*simVar { return v.sorted }

// put stores nv as the variable k (new or replacing the stored one).
func (v *varState) put(k varKey, nv *simVar) {
	v.vars[k] = nv
	i, found := slices.BinarySearchFunc(v.sorted, k, varCompare)
	if found {
		v.sorted[i] = nv
	} else {
		v.sorted = slices.Insert(v.sorted, i, nv)
	}
}

// del deletes the variable k, waking the queries of the radix node the delete
// merges away (radixwatch.go); the caller wakes those of its path.
func (v *varState) del(k varKey) {
	if merged, ok := v.mergedByDelete(k); ok && v.topics != nil {
		fire(v.topics.varPfx, merged)
	}
	delete(v.vars, k)
	if i, found := slices.BinarySearchFunc(v.sorted, k, varCompare); found {
		v.sorted = slices.Delete(v.sorted, i, i+1)
	}
}

func (v *varState) init() {
	v.vars = map[varKey]*simVar{}
	v.timers = map[string]*lockTimer{}
}

// start has nothing to run: lock timers are created by lock acquisitions and by
// leadership changes (leaderChangedLocked).
func (v *varState) start(s *Sim) {}

// ---- wire forms ----------------------------------------------------------------

// varJSON is the JSON of structs.VariableDecrypted / VariableMetadata: Lock and Items
// are omitempty there (unlike api.Variable, whose Items would encode as null).
type varJSON struct {
	Namespace   string
	Path        string
	Lock        *lockJSON `json:",omitempty"`
	CreateIndex uint64
	CreateTime  int64
	ModifyIndex uint64
	ModifyTime  int64
	Items       map[string]string `json:",omitempty"`
}

// lockJSON is structs.VariableLock as its MarshalJSON writes it: durations as strings,
// "" when zero.
type lockJSON struct {
	ID        string
	TTL       string
	LockDelay string
}

func durString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

func (l *varLock) json() *lockJSON {
	if l == nil {
		return nil
	}
	return &lockJSON{ID: l.id, TTL: durString(l.ttl), LockDelay: durString(l.delay)}
}

// metaJSON is the variable's metadata (with its lock, if any).
func (v *simVar) metaJSON() *varJSON {
	m := v.meta()
	return &m
}

// meta is metaJSON as a value (a list appends it to its answer as it is).
func (v *simVar) meta() varJSON {
	return varJSON{
		Namespace: v.ns, Path: v.path, Lock: v.lock.json(),
		CreateIndex: v.createIndex, CreateTime: v.createTime,
		ModifyIndex: v.modifyIndex, ModifyTime: v.modifyTime,
	}
}

// inVar is a decoded request body (structs.VariableDecrypted).
type inVar struct {
	Namespace string
	Path      string
	Items     map[string]string
	Lock      *inLock
}

// inLock accepts TTL and LockDelay as a duration string or as integer nanoseconds
// (structs.VariableLock.UnmarshalJSON).
type inLock struct {
	ID        string
	TTL       time.Duration
	LockDelay time.Duration
}

func (l *inLock) UnmarshalJSON(b []byte) error {
	var aux struct {
		ID        string
		TTL       any
		LockDelay any
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	l.ID = aux.ID
	var err error
	if l.TTL, err = jsonDuration(aux.TTL); err != nil {
		return err
	}
	l.LockDelay, err = jsonDuration(aux.LockDelay)
	return err
}

func jsonDuration(v any) (time.Duration, error) {
	switch v := v.(type) {
	case string:
		if v == "" {
			return 0, nil
		}
		return time.ParseDuration(v)
	case float64:
		return time.Duration(v), nil
	}
	return 0, nil
}

func (l *inLock) lock() *varLock {
	if l == nil {
		return nil
	}
	return &varLock{id: l.ID, ttl: l.TTL, delay: l.LockDelay}
}

// decodeVarBody decodes a variable request body like command/agent/http.go
// decodeBody; the variable handlers answer its error as 400 with the bare message.
func decodeVarBody(r *http.Request, v *inVar) error {
	if r.Body == nil || r.Body == http.NoBody {
		return simhttp.Code(http.StatusBadRequest, "Request body is empty")
	}
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		return simhttp.Code(http.StatusBadRequest, "%s", err.Error())
	}
	return nil
}

// ---- validation (nomad/structs/variables.go) -----------------------------------

const (
	// maxVariableSize: structs/variables.go maxVariableSize.
	maxVariableSize = 65536
	// Lock TTL range and defaults: structs/variables.go min/maxVariableLockTTL,
	// defaultLockTTL, defaultLockDelay.
	minVariableLockTTL = 10 * time.Second
	maxVariableLockTTL = 24 * time.Hour
	defaultLockTTL     = 15 * time.Second
	defaultLockDelay   = 15 * time.Second

	// rpcErrPrefix is structs.errRPCCodedErrorPrefix. Variables.Apply wraps the
	// (already coded) errors of canonicalizeAndValidate in NewErrRPCCoded again, and
	// the HTTP layer (command/agent/http.go wrap, CodeFromRPCCodedErr) strips only one
	// "RPC Error:: <code>," — so Nomad really answers e.g.
	// `RPC Error:: 400,variables are limited to 64KiB in total size`.
	rpcErrPrefix = "RPC Error:: 400,"
)

// validVariablePath: structs/variables.go validVariablePath.
var validVariablePath = regexp.MustCompile("^[a-zA-Z0-9-_~/]{1,128}$")

// multiError formats errors like go-multierror's ListFormatFunc.
func multiError(errs ...string) string {
	if len(errs) == 1 {
		return fmt.Sprintf("1 error occurred:\n\t* %s\n\n", errs[0])
	}
	points := make([]string, len(errs))
	for i, e := range errs {
		points[i] = "* " + e
	}
	return fmt.Sprintf("%d errors occurred:\n\t%s\n\n", len(errs), strings.Join(points, "\n\t"))
}

// validateVarPath is structs.ValidatePath: the path regexp and the reserved "nomad/"
// tree (only nomad/jobs..., nomad/sentinel... and nomad/job-templates/<name>).
func validateVarPath(p string) string {
	if p == "" {
		return "variable requires path"
	}
	if !validVariablePath.MatchString(p) {
		return fmt.Sprintf("invalid path %q", p)
	}
	parts := strings.Split(p, "/")
	if parts[0] != "nomad" {
		return ""
	}
	switch {
	case len(parts) == 1:
		return `"nomad" is a reserved top-level directory path, but you may write variables to "nomad/jobs", "nomad/job-templates", "nomad/sentinel", or below`
	case parts[1] == "jobs" || parts[1] == "sentinel":
		return ""
	case parts[1] == "job-templates" && len(parts) == 3:
		return ""
	case parts[1] == "job-templates":
		return `"nomad/job-templates" is a reserved directory path, but you may write variables at the level below it, for example, "nomad/job-templates/template-name"`
	}
	return `only paths at "nomad/jobs" or "nomad/job-templates" and below are valid paths under the top-level "nomad" directory`
}

func itemsSize(items map[string]string) int {
	n := 0
	for k, v := range items {
		n += len(k) + len(v)
	}
	return n
}

// canonicalize is structs.VariableLock.Canonicalize: a new UUID when no ID was given,
// 15s defaults for a zero TTL or LockDelay.
func (l *varLock) canonicalize(s *Sim) {
	if l.id == "" {
		l.id = s.uuidLocked()
	}
	if l.delay == 0 {
		l.delay = defaultLockDelay
	}
	if l.ttl == 0 {
		l.ttl = defaultLockTTL
	}
}

// validate is structs.VariableLock.Validate (a multierror). With
// Config.AllowShortLockTTL any positive TTL up to 24h is accepted.
func (l *varLock) validate(s *Sim) string {
	var errs []string
	if l.delay < 0 || l.ttl < 0 {
		errs = append(errs, "Lock delay and TTL must be positive")
	}
	minTTL := minVariableLockTTL
	if s.cfg.AllowShortLockTTL {
		minTTL = time.Nanosecond
	}
	if l.ttl > maxVariableLockTTL || l.ttl < minTTL {
		errs = append(errs, "TTL must be between 10 seconds and 24 hours")
	}
	if len(errs) == 0 {
		return ""
	}
	return multiError(errs...)
}

// validateVar is structs.VariableDecrypted.Validate.
func validateVar(s *Sim, ns, p string, items map[string]string, lock *varLock) string {
	if ns == "*" {
		return `can not target wildcard ("*")namespace`
	}
	if len(items) == 0 {
		return "empty variables are invalid"
	}
	if itemsSize(items) > maxVariableSize {
		return "variables are limited to 64KiB in total size"
	}
	if msg := validateVarPath(p); msg != "" {
		return msg
	}
	if lock != nil {
		return lock.validate(s)
	}
	return ""
}

// ---- routes --------------------------------------------------------------------

func (s *Sim) registerVarRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/vars", s.handleVarList)
	mux.HandleFunc("/v1/var/", s.handleVar)
}

// requestNamespace is command/agent/http.go parseNamespace: ?namespace=, else "default".
func requestNamespace(r *http.Request) string {
	if ns := r.URL.Query().Get("namespace"); ns != "" {
		return ns
	}
	return "default"
}

// checkLeaderForRead is the RPC forwarding step of a read (nomad/rpc.go forward): a
// read that does not allow stale results needs a leader, before any ACL check.
func (s *Sim) checkLeaderForRead(w http.ResponseWriter, r *http.Request) bool {
	qp, err := parseQuery(r)
	if err != nil {
		simhttp.WriteErr(w, err)
		return false
	}
	s.mu.Lock()
	ok := qp.stale || s.servers.leaderLocked() != ""
	s.mu.Unlock()
	if !ok {
		simhttp.WriteErr(w, errNoLeader)
	}
	return ok
}

// handleVarList answers GET /v1/vars (command/agent/variable_endpoint.go
// VariablesListRequest; nomad/variables_endpoint.go List and listAllVariables): the
// variables of ?namespace= (every namespace for "*") whose path starts with ?prefix=,
// filtered by what the token may `list`, with go-bexpr ?filter= and pagination. The
// index is the variables table index; Lock is stripped unless management.
func (s *Sim) handleVarList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		simhttp.WriteError(w, http.StatusMethodNotAllowed, "Invalid method")
		return
	}
	if !s.checkLeaderForRead(w, r) {
		return
	}
	tok := s.authorize(w, r, nil)
	if tok == nil {
		return
	}
	q := r.URL.Query()
	ns := requestNamespace(r)
	prefix := q.Get("prefix")
	nextToken := q.Get("next_token")
	reverse := q.Get("reverse") == "true"
	perPage, _ := strconv.ParseInt(q.Get("per_page"), 10, 32)
	var eval *bexpr.Evaluator
	if f := q.Get("filter"); f != "" {
		var err error
		if eval, err = bexpr.CreateEvaluator(f); err != nil {
			simhttp.WriteError(w, http.StatusBadRequest, fmt.Sprintf(
				"failed to create result paginator: failed to read filter expression: %v", err))
			return
		}
	}
	s.blockingReadWatch(w, r, new(s.watchVarPrefix(ns, prefix)), func() (any, uint64, error) {
		// The state store iterates its id index from the prefix
		// (GetVariablesByNamespaceAndPrefix): sorted by namespace, then path.
		vars := s.vars.sortedVars()
		if ns != "*" {
			from, _ := slices.BinarySearchFunc(vars, varKey{ns, prefix}, varCompare)
			vars = vars[from:]
		}
		out := []varJSON{}
		next := ""
		found := nextToken == ""
		for _, v := range vars {
			if ns != "*" && (v.ns != ns || !strings.HasPrefix(v.path, prefix)) {
				break // past the prefix in the index
			}
			if !strings.HasPrefix(v.path, prefix) {
				continue
			}
			// paginator.NamespaceIDTokenizer: "<namespace>.<path>" (made only
			// for a paged list: the token is compared or returned).
			var token string
			if !found || perPage > 0 {
				token = v.ns + "." + v.path
			}
			if !found {
				cmp := strings.Compare(token, nextToken)
				if (!reverse && cmp < 0) || (reverse && cmp > 0) {
					continue
				}
			}
			if eval != nil {
				ok, err := eval.Evaluate(v.filterView())
				if err != nil {
					return nil, 0, simhttp.Code(http.StatusBadRequest, "failed to read result page: %v", err)
				}
				if !ok {
					continue
				}
			}
			if !tok.Management && !tok.AllowVariable(v.ns, v.path, "list") {
				continue
			}
			found = true
			if perPage > 0 && len(out) >= int(perPage) {
				next = token
				break
			}
			out = append(out, v.meta())
			if !tok.Management {
				out[len(out)-1].Lock = nil
			}
		}
		if next != "" {
			w.Header().Set("X-Nomad-NextToken", next)
		} else {
			w.Header().Del("X-Nomad-NextToken")
		}
		return out, s.vars.tableIndex, nil
	})
}

// varFilterView is what a list ?filter= sees (the state store's VariableEncrypted,
// without the encrypted data).
type varFilterView struct {
	Namespace   string
	Path        string
	Lock        *lockJSON
	CreateIndex uint64
	CreateTime  int64
	ModifyIndex uint64
	ModifyTime  int64
}

func (v *simVar) filterView() *varFilterView {
	return &varFilterView{
		Namespace: v.ns, Path: v.path, Lock: v.lock.json(),
		CreateIndex: v.createIndex, CreateTime: v.createTime,
		ModifyIndex: v.modifyIndex, ModifyTime: v.modifyTime,
	}
}

// handleVar dispatches /v1/var/<path> (command/agent/variable_endpoint.go
// VariableSpecificRequest). Unknown methods get 400 "Invalid method" here, not 405.
func (s *Sim) handleVar(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimPrefix(r.URL.Path, "/v1/var/")
	if p == "" {
		simhttp.WriteError(w, http.StatusBadRequest, "missing variable path")
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.varRead(w, r, p)
	case http.MethodPut, http.MethodPost:
		q := r.URL.Query()
		op, err := lockOperation(q)
		if err != nil {
			simhttp.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		if q.Get("cas") != "" && op != "" {
			simhttp.WriteError(w, http.StatusBadRequest, "CAS can't be used with lock operations")
			return
		}
		switch op {
		case "":
			s.varUpsert(w, r, p)
		case opLockRenew:
			s.varLockRenew(w, r, p)
		default:
			s.varLockOperation(w, r, p, op)
		}
	case http.MethodDelete:
		s.varDelete(w, r, p)
	default:
		simhttp.WriteError(w, http.StatusBadRequest, "Invalid method")
	}
}

// varRead answers GET /v1/var/<path> (Variables.Read): read capability on the path,
// then a blocking query whose index is the variable's ModifyIndex, or the variables
// table index while it does not exist (then 404 "variable not found", with the query
// meta set). Lock is stripped for non-management tokens.
func (s *Sim) varRead(w http.ResponseWriter, r *http.Request, p string) {
	if !s.checkLeaderForRead(w, r) {
		return
	}
	ns := requestNamespace(r)
	tok := s.authorize(w, r, func(t *Token) bool { return t.AllowVariable(ns, p, "read") })
	if tok == nil {
		return
	}
	s.blockingReadWatch(w, r, new(s.watchVar(ns, p)), func() (any, uint64, error) {
		v, ok := s.vars.vars[varKey{ns, p}]
		if !ok {
			return nil, 0, &indexedError{
				err:   simhttp.Code(http.StatusNotFound, "variable not found"),
				index: s.vars.tableIndex,
			}
		}
		out := v.metaJSON()
		out.Items = maps.Clone(v.items)
		if !tok.Management {
			out.Lock = nil
		}
		return out, v.modifyIndex, nil
	})
}

// ---- writes (Variables.Apply) --------------------------------------------------

// Variable operations (structs.VarOp).
const (
	opSet         = "set"
	opCAS         = "cas"
	opDelete      = "delete"
	opDeleteCAS   = "delete-cas"
	opLockAcquire = "lock-acquire"
	opLockRelease = "lock-release"
	opLockRenew   = "lock-renew"
)

// varResult is a computed answer, written after s.mu is released.
type varResult struct {
	code  int
	index *uint64 // X-Nomad-Index; nil: no header
	body  any     // JSON body; nil: none
	err   error
}

func indexPtr(i uint64) *uint64 { return &i }

func (res varResult) write(w http.ResponseWriter) {
	if res.index != nil {
		// Written as is: Nomad sends "0" for zero-value conflicts and errors.
		w.Header().Set("X-Nomad-Index", strconv.FormatUint(*res.index, 10))
	}
	switch {
	case res.err != nil:
		simhttp.WriteErr(w, res.err)
	case res.body != nil:
		writeJSON(w, res.code, res.body)
	default:
		w.WriteHeader(res.code)
	}
}

// errResult is an error answer of a write handler: Nomad's handlers call
// setIndex(resp, out.WriteMeta.Index) before returning the error, and the index is
// 0 when the apply failed, so the header is "X-Nomad-Index: 0".
func errResult(err error) varResult { return varResult{err: err, index: indexPtr(0)} }

// parseCAS is command/agent/variable_endpoint.go parseCAS.
func parseCAS(r *http.Request) (bool, uint64, error) {
	cq := r.URL.Query().Get("cas")
	if cq == "" {
		return false, 0, nil
	}
	ci, err := strconv.ParseUint(cq, 10, 64)
	if err != nil {
		return true, 0, simhttp.Code(http.StatusBadRequest, "can not parse cas: %v", err)
	}
	return true, ci, nil
}

// varUpsert answers PUT|POST /v1/var/<path>[?cas=N] (variableUpsert).
func (s *Sim) varUpsert(w http.ResponseWriter, r *http.Request, p string) {
	var in inVar
	if err := decodeVarBody(r, &in); err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	if len(in.Items) == 0 {
		simhttp.WriteError(w, http.StatusBadRequest, "variable missing required Items object")
		return
	}
	in.Path = p
	isCAS, cas, err := parseCAS(r)
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	op := opSet
	if isCAS {
		op = opCAS
	}
	s.varApply(r, op, &in, cas).write(w)
}

// varDelete answers DELETE /v1/var/<path>[?cas=N] (variableDelete): 204 without a
// body, also when the variable does not exist. The request carries no lock ID, so
// a locked variable cannot be deleted (409).
func (s *Sim) varDelete(w http.ResponseWriter, r *http.Request, p string) {
	isCAS, cas, err := parseCAS(r)
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	op := opDelete
	if isCAS {
		op = opDeleteCAS
	}
	res := s.varApply(r, op, &inVar{Path: p}, cas)
	if res.err == nil && res.code == http.StatusOK {
		res.code = http.StatusNoContent
		res.body = nil
	}
	res.write(w)
}

// varApply is Variables.Apply for every operation but renew: leader (forward), ACL
// (hasOperationPermissions), canonicalizeAndValidate, one Raft apply (the index moves
// even when the state store answers with a conflict or an error), and the response
// of makeVariablesApplyResponse. For conflicts of set/CAS/delete the index header is
// the conflict's ModifyIndex; lock operations send no header on a conflict because
// variableLockOperation writes the 409 before its deferred setIndex.
func (s *Sim) varApply(r *http.Request, op string, in *inVar, cas uint64) varResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.servers.leaderLocked() == "" {
		return errResult(errNoLeader)
	}
	tok, err := s.tokenLocked(r)
	if err != nil {
		return errResult(err)
	}
	ns := in.Namespace
	if ns == "" {
		ns = requestNamespace(r)
	}
	k := varKey{ns, in.Path}
	capability := "write"
	if op == opDelete || op == opDeleteCAS {
		capability = "destroy"
	}
	if !tok.AllowVariable(ns, in.Path, capability) {
		return errResult(errPermissionDenied)
	}

	// canonicalizeAndValidate (nomad/variables_endpoint.go).
	reqLock := in.Lock.lock()
	bad := func(msg string) varResult { return errResult(simhttp.Code(http.StatusBadRequest, "%s", msg)) }
	switch op {
	case opLockAcquire:
		if reqLock == nil {
			reqLock = &varLock{}
		}
		reqLock.canonicalize(s)
		if msg := validateForLock(s, ns, in.Path, in.Items, reqLock); msg != "" {
			return bad(rpcErrPrefix + msg)
		}
	case opSet, opCAS:
		if reqLock != nil && (reqLock.delay != 0 || reqLock.ttl != 0) {
			return bad(rpcErrPrefix + rpcErrPrefix + "variable should not contain lock definition")
		}
		if reqLock != nil {
			reqLock.canonicalize(s)
		}
		if msg := validateVar(s, ns, in.Path, in.Items, reqLock); msg != "" {
			return bad(rpcErrPrefix + msg)
		}
	case opLockRelease:
		if reqLock == nil || reqLock.id == "" {
			return bad(rpcErrPrefix + "missing lock information")
		}
		if in.Items != nil {
			return bad(rpcErrPrefix + "lock release operation doesn't take variable items")
		}
		if msg := validateVarPath(in.Path); msg != "" {
			return bad(msg)
		}
	}

	now := time.Now().UnixNano()
	idx := s.bumpLocked() // the Raft apply
	var written, conflict *simVar
	deleted := false
	switch op {
	case opSet:
		written, conflict = s.vars.setTxn(k, in.Items, reqLock, idx, now)
	case opCAS:
		written, conflict = s.vars.setCASTxn(k, in.Items, reqLock, cas, idx, now)
	case opDelete:
		deleted, conflict = s.vars.deleteTxn(k, idx)
	case opDeleteCAS:
		deleted, conflict = s.vars.deleteCASTxn(k, cas, idx)
	case opLockAcquire:
		written, conflict = s.vars.lockAcquireTxn(k, in.Items, reqLock, idx, now)
	case opLockRelease:
		written, conflict, err = s.vars.lockReleaseTxn(k, reqLock, idx)
		if err != nil {
			// The state store's errors are plain errors (state_store_variables.go
			// errVarNotFound, errLockNotFound), so Nomad answers 500.
			return errResult(err)
		}
	}

	if conflict != nil {
		res := varResult{code: http.StatusConflict, body: conflictJSON(tok, conflict)}
		if op != opLockAcquire && op != opLockRelease {
			res.index = indexPtr(conflict.modifyIndex)
		}
		return res
	}

	if written != nil || deleted {
		s.varEventLocked(op, k, written, reqLock)
	}
	if op == opLockAcquire {
		s.vars.createTimerLocked(s, written)
	}
	if op == opLockRelease {
		s.vars.removeTimerLocked(reqLock.id)
	}
	res := varResult{code: http.StatusOK, index: indexPtr(idx)}
	if written != nil {
		out := written.metaJSON()
		// The writer reads its own write: the request's Items (may be empty).
		out.Items = maps.Clone(in.Items)
		if len(out.Items) == 0 {
			out.Items = nil
		}
		// isCallerOwner || management, else the lock is hidden.
		if !(reqLock != nil && written.lock != nil && reqLock.id == written.lock.id) && !tok.Management {
			out.Lock = nil
		}
		res.body = out
	}
	return res
}

// conflictJSON is the 409 body (makeVariablesApplyResponse): without read capability
// only the metadata (Lock included); made-up zero values only Namespace and Path;
// otherwise the whole current variable.
func conflictJSON(tok *Token, c *simVar) *varJSON {
	if !tok.AllowVariable(c.ns, c.path, "read") {
		return c.metaJSON()
	}
	if c.zero {
		return &varJSON{Namespace: c.ns, Path: c.path}
	}
	out := c.metaJSON()
	out.Items = maps.Clone(c.items)
	return out
}

func (s *Sim) varEventLocked(op string, k varKey, written *simVar, reqLock *varLock) {
	d := map[string]string{"namespace": k.ns, "path": k.path, "index": strconv.FormatUint(s.index, 10)}
	switch op {
	case opSet, opCAS:
		s.eventLocked(Event{Type: EventVarWrite, Details: d})
	case opDelete, opDeleteCAS:
		s.eventLocked(Event{Type: EventVarDelete, Details: d})
	case opLockAcquire:
		d["lock_id"] = written.lock.id
		d["ttl"] = written.lock.ttl.String()
		d["lock_delay"] = written.lock.delay.String()
		s.eventLocked(Event{Type: EventLockAcquire, Details: d})
	case opLockRelease:
		d["lock_id"] = reqLock.id
		d["reason"] = "released"
		s.eventLocked(Event{Type: EventLockRelease, Details: d})
	}
}

// ---- state store (nomad/state/state_store_variables.go) ------------------------

func zeroConflict(k varKey) *simVar { return &simVar{ns: k.ns, path: k.path, zero: true} }

// isLocked: a locked variable can only be changed by a request carrying its lock ID.
func isLocked(lock, req *varLock) bool {
	return lock != nil && (req == nil || req.id != lock.id)
}

// setTxn is varSetTxn: keeps CreateIndex/CreateTime, stores the request's lock
// (canonicalized), refuses a locked variable without its lock ID.
func (v *varState) setTxn(k varKey, items map[string]string, lock *varLock, idx uint64, now int64) (*simVar, *simVar) {
	nv := &simVar{ns: k.ns, path: k.path, createIndex: idx, createTime: now,
		modifyIndex: idx, modifyTime: now, items: maps.Clone(items), lock: lock.copy()}
	if ex := v.vars[k]; ex != nil {
		if isLocked(ex.lock, lock) {
			return nil, zeroConflict(k)
		}
		nv.createIndex, nv.createTime = ex.createIndex, ex.createTime
	}
	if nv.items == nil {
		nv.items = map[string]string{}
	}
	v.put(k, nv)
	v.tableIndex = idx
	v.topics.varWrittenLocked(k)
	return nv.copy(), nil
}

// setCASTxn is varSetCASTxn: cas=0 creates only if absent; cas!=0 on a missing
// variable conflicts with a zero value; a different ModifyIndex conflicts with the
// current variable.
func (v *varState) setCASTxn(k varKey, items map[string]string, lock *varLock, cas, idx uint64, now int64) (*simVar, *simVar) {
	ex := v.vars[k]
	switch {
	case cas == 0 && ex != nil:
		return nil, ex.copy()
	case cas != 0 && ex == nil:
		return nil, zeroConflict(k)
	case ex != nil && cas != ex.modifyIndex:
		return nil, ex.copy()
	}
	return v.setTxn(k, items, lock, idx, now)
}

// deleteTxn is svDeleteTxn: deleting a missing variable succeeds without a change;
// a locked one conflicts (the HTTP delete never carries a lock ID).
func (v *varState) deleteTxn(k varKey, idx uint64) (deleted bool, conflict *simVar) {
	ex := v.vars[k]
	if ex == nil {
		return false, nil
	}
	if ex.lock != nil {
		return false, zeroConflict(k)
	}
	v.del(k)
	v.tableIndex = idx
	v.topics.varWrittenLocked(k)
	return true, nil
}

// deleteCASTxn is svDeleteCASTxn.
func (v *varState) deleteCASTxn(k varKey, cas, idx uint64) (deleted bool, conflict *simVar) {
	ex := v.vars[k]
	switch {
	case cas == 0 && ex == nil:
		return false, nil
	case cas != 0 && ex == nil:
		return false, zeroConflict(k)
	case cas == 0 || cas != ex.modifyIndex:
		return false, ex.copy()
	}
	return v.deleteTxn(k, idx)
}

var (
	errVarNotFoundState  = errors.New("variable doesn't exist")
	errLockNotFoundState = errors.New("variable doesn't hold a lock")
)
