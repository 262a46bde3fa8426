package deploytest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// ---- (e) docs/deploy.md's token table, call by call, through the ACL API ------------

// The security model of docs/deploy.md has a table of calls with one column per
// token, yes or no. This test reads that table and makes every call with a token
// minted from each shipped policy through the emulator's ACL API, as an operator
// mints them: a yes must succeed, a no must be refused with 403. The table and
// the policies therefore cannot say different things, and a call without a probe
// here (or a probe without a row) fails the test.

// tokenTableMarker precedes the table in docs/deploy.md.
const tokenTableMarker = "<!-- token-table:"

// otherNS is a namespace other than rollboot's state namespace, where a system
// job runs on every client.
const otherNS = "batch"

// tokenRow is one row of the table: the call (the first code span of its first
// cell) and which tokens may make it.
type tokenRow struct {
	call string
	want map[string]bool // by token (policy) name
	line int
}

// tokenTable reads the token table of docs/deploy.md: its token columns, in
// order, and its rows.
func tokenTable(t *testing.T) ([]string, []tokenRow) {
	t.Helper()
	doc := read(t, filepath.Join(root, "docs", "deploy.md"))
	var tokens []string
	var rows []tokenRow
	in := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, tokenTableMarker):
			in = true
		case !in:
		case !strings.HasPrefix(line, "|"):
			if tokens != nil {
				return tokens, rows
			}
		case tokens == nil:
			tokens = tableHeader(t, n, line)
		case strings.HasPrefix(line, "|---"):
		default:
			rows = append(rows, tableRow(t, n, line, tokens))
		}
	}
	if tokens == nil {
		t.Fatalf("docs/deploy.md: no table after %q", tokenTableMarker)
	}
	return tokens, rows
}

// cells splits a markdown table line into its trimmed cells.
func cells(line string) []string {
	parts := strings.Split(strings.Trim(line, "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// tableHeader returns the token names of the header's columns after the
// first: every shipped policy, each once.
func tableHeader(t *testing.T, n int, line string) []string {
	t.Helper()
	var tokens, want []string
	for _, c := range cells(line)[1:] {
		m := codeSpan.FindStringSubmatch(c)
		if m == nil {
			t.Fatalf("docs/deploy.md:%d: column %q does not name a token in backticks", n, c)
		}
		tokens = append(tokens, m[1])
	}
	for role := range policyFiles {
		want = append(want, policyName(role))
	}
	got := slices.Clone(tokens)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("docs/deploy.md:%d: token columns %q, want one per policy of deploy/acl: %q", n, tokens, want)
	}
	return tokens
}

// tableRow parses one row: its call and a yes or no per token.
func tableRow(t *testing.T, n int, line string, tokens []string) tokenRow {
	t.Helper()
	c := cells(line)
	m := codeSpan.FindStringSubmatch(c[0])
	if m == nil || len(c) != len(tokens)+1 {
		t.Fatalf("docs/deploy.md:%d: want a call in backticks and %d yes/no cells: %q", n, len(tokens), line)
	}
	r := tokenRow{call: m[1], want: map[string]bool{}, line: n}
	for i, tok := range tokens {
		switch c[i+1] {
		case "yes":
			r.want[tok] = true
		case "no":
		default:
			t.Fatalf("docs/deploy.md:%d: %s: %q, want yes or no", n, tok, c[i+1])
		}
	}
	return r
}

func TestTokenTableAgainstEmulator(t *testing.T) {
	tokens, rows := tokenTable(t)
	var calls []string
	for _, r := range rows {
		if _, ok := probes[r.call]; !ok {
			t.Errorf("docs/deploy.md:%d: no probe for %q: add it to probes", r.line, r.call)
		}
		calls = append(calls, r.call)
	}
	for call := range probes {
		if !slices.Contains(calls, call) {
			t.Errorf("probe %q has no row in the token table of docs/deploy.md", call)
		}
	}
	if t.Failed() {
		return
	}
	// The management token may make every call: a probe that fails with it
	// would make its "no" cells pass for the wrong reason.
	t.Run("management", func(t *testing.T) {
		w := newTokenWorld(t)
		runProbes(t, w, w.mgmt, "the management token", rows, func(tokenRow) bool { return true })
	})
	for _, tok := range tokens {
		t.Run(tok, func(t *testing.T) {
			w := newTokenWorld(t)
			c := apiClient(t, w.sim.Address(), mintToken(t, w.mgmt, roleOf(t, tok)))
			runProbes(t, w, c, tok, rows, func(r tokenRow) bool { return r.want[tok] })
		})
	}
}

// runProbes makes every row's call with c and compares the outcome with want.
func runProbes(t *testing.T, w *tokenWorld, c *api.Client, who string, rows []tokenRow, want func(tokenRow) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range rows {
		got, err := probes[r.call](ctx, w, c)
		switch {
		case err != nil:
			t.Errorf("docs/deploy.md:%d: %s with %s: %v", r.line, r.call, who, err)
		case got != want(r):
			t.Errorf("docs/deploy.md:%d: %s with %s: allowed = %v, the table says %v", r.line, r.call, who, got, want(r))
		}
	}
}

// roleOf is the role key of policyFiles whose policy is named name.
func roleOf(t *testing.T, name string) string {
	t.Helper()
	for role := range policyFiles {
		if policyName(role) == name {
			return role
		}
	}
	t.Fatalf("no policy file for token %q", name)
	return ""
}

// tokenWorld is what the probes act on: an emulated cluster with ACLs on, the
// shipped policies applied, and rollboot's state seeded with the management
// token.
type tokenWorld struct {
	sim  *nomadsim.Sim
	mgmt *api.Client
	// nodes are the client node IDs: [0] is drained by the drain probe, [1] is
	// read, [2] is made ineligible and gets node metadata.
	nodes    []string
	alloc    *api.Allocation // an allocation of the service job "web"
	follower string          // the Raft ID of a server that does not lead
}

func newTokenWorld(t *testing.T) *tokenWorld {
	t.Helper()
	sim, err := nomadsim.New(nomadsim.Config{ACL: true, Servers: 3, Clients: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	w := &tokenWorld{sim: sim, mgmt: apiClient(t, sim.Address(), sim.ManagementToken())}
	applyPolicies(t, w.mgmt)
	for _, j := range []nomadsim.JobSpec{
		{ID: "web", Type: "service"},
		{ID: "sys", Namespace: otherNS, Type: "system"},
	} {
		if err := sim.AddJob(j); err != nil {
			t.Fatal(err)
		}
	}
	leader, err := w.mgmt.Status().Leader()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range sim.Hosts() {
		if h.NodeID != "" {
			w.nodes = append(w.nodes, h.NodeID)
		}
		if h.Server != nil && h.Server.RaftAddr != leader {
			w.follower = h.Server.ID
		}
	}
	w.waitForAllocs(t)
	seedState(t, w.mgmt)
	return w
}

// waitForAllocs waits until the system job of otherNS has an allocation on
// nodes[1] and the service job one somewhere, and keeps the latter.
func (w *tokenWorld) waitForAllocs(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var webNode, webAlloc string
	err := w.sim.WaitFor(ctx, func(v *nomadsim.View) bool {
		_, sys := v.RunningAlloc(w.nodes[1], "sys")
		for _, n := range w.nodes {
			if id, ok := v.RunningAlloc(n, "web"); ok {
				webNode, webAlloc = n, id
			}
		}
		return sys && webAlloc != ""
	})
	if err != nil {
		t.Fatalf("allocations not placed: %v", err)
	}
	allocs, _, err := w.mgmt.Nodes().Allocations(webNode, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range allocs {
		if a.ID == webAlloc {
			w.alloc = a
		}
	}
	if w.alloc == nil {
		t.Fatalf("allocation %s not on node %s", webAlloc, webNode)
	}
}

// seedState writes, as the coordinator, the operator and the agents would,
// every variable a probe reads or updates.
func seedState(t *testing.T, mgmt *api.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := store.New(mgmt.Variables(), "rollboot", ns)
	var errs []error
	for _, h := range []string{"web-1", "web-2", "web-3"} {
		_, err := st.PutHost(ctx, store.HostRecord{Host: h, BootID: "b1"})
		errs = append(errs, err)
	}
	_, err := st.PutPlan(ctx, store.Plan{Host: "web-1", Phase: store.PhasePending})
	errs = append(errs, err)
	_, err = st.UpdateControl(ctx, func(c *store.Control) error { c.PauseReason = "seed"; return nil })
	errs = append(errs, err)
	_, err = st.PutPolicy(ctx, store.PolicyRecord{PolicyVersion: store.PolicyVersion{Version: 1, Source: "group \"all\" {}\n", Filename: "p.hcl"}}, 0)
	errs = append(errs, err)
	errs = append(errs, st.AppendHistory(ctx, store.HistoryRecord{Host: "web-1", Outcome: "rebooted", Finished: time.Now()}, 10))
	for _, p := range []string{"rollboot/serverlock/nomad-global", "nomad/jobs/rollboot"} {
		_, _, err := mgmt.Variables().Create(&api.Variable{Namespace: ns, Path: p, Items: api.VariableItems{"k": "v"}}, &api.WriteOptions{Namespace: ns})
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("seed rollboot's state: %v", err)
	}
}

// A probe makes one call with c and says whether Nomad allowed it; err is for
// an outcome that is neither (the probe itself is wrong).
type probe func(ctx context.Context, w *tokenWorld, c *api.Client) (allowed bool, err error)

// probes are the calls of the token table, keyed by the call as the table writes
// it. Variables are in rollboot's state namespace unless the call names another.
var probes = map[string]probe{
	"GET /v1/agent/health": func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		h, err := c.Agent().Health()
		if err == nil && h.Client == nil && h.Server == nil {
			return false, fmt.Errorf("the health answer names neither a client nor a server: %+v", h)
		}
		return verdict(err)
	},
	"GET /v1/agent/members": func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		m, err := c.Agent().MembersOpts((&api.QueryOptions{}).WithContext(ctx))
		if err == nil && len(m.Members) == 0 {
			return false, errors.New("no Serf member listed")
		}
		return verdict(err)
	},
	"GET /v1/agent/self": func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		_, err := c.Agent().Self()
		return verdict(err)
	},
	"GET /v1/agent/host?node_id=<id>": func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		_, err := c.Agent().Host("", w.nodes[1], (&api.QueryOptions{}).WithContext(ctx))
		return verdict(err)
	},
	"GET /v1/nodes": func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		q := (&api.QueryOptions{}).WithContext(ctx)
		_, _, err := c.Nodes().List(q)
		list, lerr := verdict(err)
		_, _, err = c.Nodes().Info(w.nodes[1], q)
		one, ierr := verdict(err)
		if list != one {
			return false, fmt.Errorf("GET /v1/nodes allowed %v, GET /v1/node/<id> allowed %v", list, one)
		}
		return list, errors.Join(lerr, ierr)
	},
	"GET /v1/node/<id>/allocations": nodeAllocsProbe,
	"GET /v1/jobs?namespace=*": func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		_, _, err := c.Jobs().List((&api.QueryOptions{Namespace: "*"}).WithContext(ctx))
		return verdict(err)
	},
	"POST /v1/node/<id>/drain": func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		spec := &api.DrainOptions{DrainSpec: &api.DrainSpec{Deadline: time.Hour, IgnoreSystemJobs: true}}
		_, err := c.Nodes().UpdateDrainOpts(w.nodes[0], spec, (&api.WriteOptions{}).WithContext(ctx))
		return verdict(err)
	},
	"POST /v1/node/<id>/eligibility": func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		_, err := c.Nodes().ToggleEligibility(w.nodes[2], false, (&api.WriteOptions{}).WithContext(ctx))
		return verdict(err)
	},
	"POST /v1/client/metadata": func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		v := "x"
		req := &api.NodeMetaApplyRequest{NodeID: w.nodes[2], Meta: map[string]*string{"rollboot_probe": &v}}
		_, err := c.Nodes().Meta().Apply(req, (&api.QueryOptions{}).WithContext(ctx))
		return verdict(err)
	},
	"POST /v1/allocation/<id>/stop": func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		_, err := c.Allocations().Stop(w.alloc, (&api.QueryOptions{}).WithContext(ctx))
		return verdict(err)
	},
	"GET /v1/operator/autopilot/health": func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		_, _, err := c.Operator().AutopilotServerHealth((&api.QueryOptions{}).WithContext(ctx))
		if httpStatus(err) == http.StatusTooManyRequests {
			return true, nil // allowed: the cluster is not healthy yet
		}
		return verdict(err)
	},
	"PUT /v1/operator/raft/transfer-leadership": func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		return verdict(c.Operator().RaftTransferLeadershipByID(w.follower, (&api.WriteOptions{}).WithContext(ctx)))
	},
	"GET rollboot/hosts/<host>":                                readVar(ns, "rollboot/hosts/web-1"),
	"PUT rollboot/hosts/<host>":                                updateVar("rollboot/hosts/web-2"),
	"DELETE rollboot/hosts/<host>":                             deleteVar("rollboot/hosts/web-3"),
	"GET rollboot/plan/<host>":                                 readVar(ns, "rollboot/plan/web-1"),
	"PUT rollboot/plan/<host>":                                 createVar(ns, "rollboot/plan/web-9"),
	"GET rollboot/control":                                     readVar(ns, "rollboot/control"),
	"PUT rollboot/control":                                     updateVar("rollboot/control"),
	"PUT rollboot/requests/<host>":                             createVar(ns, "rollboot/requests/web-1"),
	"PUT rollboot/halts":                                       createVar(ns, "rollboot/halts"),
	"GET /v1/vars?prefix=rollboot/history/":                    historyListProbe,
	"PUT rollboot/history/<id>":                                createVar(ns, "rollboot/history/probe"),
	"PUT rollboot/copies/<n>":                                  createVar(ns, "rollboot/copies/0"),
	"PUT rollboot/leader?lock-acquire":                         lockVar("rollboot/leader"),
	"GET rollboot/serverlock/<product>-<cluster>":              readVar(ns, "rollboot/serverlock/nomad-global"),
	"PUT rollboot/serverlock/<product>-<cluster>?lock-acquire": lockVar("rollboot/serverlock/consul-dc1"),
	"GET rollboot/policy":                                      readVar(ns, "rollboot/policy"),
	"PUT rollboot/policy":                                      updateVar("rollboot/policy"),
	"GET nomad/jobs/rollboot":                                  readVar(ns, "nomad/jobs/rollboot"),
	"PUT rollboot/hosts/<host>?namespace=<other>":              createVar(otherNS, "rollboot/hosts/web-1"),
}

// nodeAllocsProbe: the node's allocations, those of every namespace included
// (Nomad drops silently those of namespaces without read-job).
func nodeAllocsProbe(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
	allocs, _, err := c.Nodes().Allocations(w.nodes[1], (&api.QueryOptions{}).WithContext(ctx))
	if ok, err := verdict(err); !ok || err != nil {
		return ok, err
	}
	for _, a := range allocs {
		if a.Namespace == otherNS {
			return true, nil
		}
	}
	return false, nil
}

// historyListProbe: the history records are listed (Nomad leaves out, without
// an error, the variables the token may not list).
func historyListProbe(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
	list, _, err := c.Variables().PrefixList("rollboot/history/", (&api.QueryOptions{Namespace: ns}).WithContext(ctx))
	if ok, err := verdict(err); !ok || err != nil {
		return ok, err
	}
	return len(list) > 0, nil
}

func readVar(namespace, path string) probe {
	return func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		_, _, err := c.Variables().Read(path, (&api.QueryOptions{Namespace: namespace}).WithContext(ctx))
		return verdict(err)
	}
}

func createVar(namespace, path string) probe {
	return func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		v := &api.Variable{Namespace: namespace, Path: path, Items: api.VariableItems{"probe": "1"}}
		_, _, err := c.Variables().CheckedCreate(v, (&api.WriteOptions{Namespace: namespace}).WithContext(ctx))
		return verdict(err)
	}
}

// updateVar writes the seeded variable at path with check-and-set, as the
// writers of rollboot's state do.
func updateVar(path string) probe {
	return func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		cur, _, err := w.mgmt.Variables().Read(path, (&api.QueryOptions{Namespace: ns}).WithContext(ctx))
		if err != nil {
			return false, fmt.Errorf("read %s with the management token: %w", path, err)
		}
		cur.Items = api.VariableItems{"probe": "1"}
		_, _, err = c.Variables().CheckedUpdate(cur, (&api.WriteOptions{Namespace: ns}).WithContext(ctx))
		return verdict(err)
	}
}

func deleteVar(path string) probe {
	return func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		_, err := c.Variables().Delete(path, (&api.WriteOptions{Namespace: ns}).WithContext(ctx))
		return verdict(err)
	}
}

func lockVar(path string) probe {
	return func(ctx context.Context, w *tokenWorld, c *api.Client) (bool, error) {
		v := &api.Variable{Namespace: ns, Path: path, Lock: &api.VariableLock{TTL: "15s", LockDelay: "15s"}}
		_, _, err := c.Variables().AcquireLock(v, (&api.WriteOptions{Namespace: ns}).WithContext(ctx))
		return verdict(err)
	}
}

// verdict reads a call's outcome: no error is allowed, 403 refused, and any
// other error a probe that did not reach Nomad's ACL check as it should.
func verdict(err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case httpStatus(err) == http.StatusForbidden:
		return false, nil
	}
	return false, err
}

var responseCode = regexp.MustCompile(`Unexpected response code: (\d{3})`)

// httpStatus is the HTTP status of a failed call of the API client (0: none).
func httpStatus(err error) int {
	if err == nil {
		return 0
	}
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) {
		return ure.StatusCode()
	}
	if m := responseCode.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}
