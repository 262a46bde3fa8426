package nomadsim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// newTestSim starts an emulator and an api.Client on its cluster address (with the
// management token when ACLs are on). Both are closed when the test ends.
func newTestSim(t *testing.T, cfg Config) (*Sim, *api.Client) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Close)
	return s, newClient(t, s.Address(), s.clientToken())
}

func (s *Sim) clientToken() string {
	if s.ACLEnabled() {
		return s.ManagementToken()
	}
	return ""
}

func newClient(t *testing.T, addr, token string) *api.Client {
	t.Helper()
	c, err := api.NewClient(&api.Config{Address: addr, SecretID: token})
	if err != nil {
		t.Fatalf("api.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// statusOf returns the HTTP status of an api error (0 if it is not one).
func statusOf(err error) (int, string) {
	var ure api.UnexpectedResponseError
	if errors.As(err, &ure) {
		return ure.StatusCode(), ure.Body()
	}
	return 0, ""
}

func wantStatus(t *testing.T, err error, code int, bodyPart string) {
	t.Helper()
	got, body := statusOf(err)
	if got != code || !strings.Contains(body, bodyPart) {
		t.Fatalf("error = %v; want status %d with body containing %q", err, code, bodyPart)
	}
}

func nodeID(t *testing.T, s *Sim, host string) string {
	t.Helper()
	h, ok := s.Host(host)
	if !ok || h.NodeID == "" {
		t.Fatalf("host %s has no node", host)
	}
	return h.NodeID
}

// rawGet does a plain HTTP GET, for details the api client hides (headers, raw body).
func rawGet(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func newJSONRequest(method, url, body string) (*http.Request, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return req, nil
}

// doRaw sends req and returns the status and the body.
func doRaw(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func names(stubs []*api.NodeListStub) []string {
	var out []string
	for _, n := range stubs {
		out = append(out, n.Name)
	}
	slices.Sort(out)
	return out
}

func TestNodeListFilterPrefixAndPaging(t *testing.T) {
	s, c := newTestSim(t, Config{Servers: 1, Clients: 3, ClientPools: []string{"a", "b"}})
	if err := s.SetNodeMeta("client-2", map[string]string{"reboot": "true"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetNodeClass("client-3", "gpu"); err != nil {
		t.Fatal(err)
	}

	all, meta, err := c.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(all); !slices.Equal(got, []string{"client-1", "client-2", "client-3"}) {
		t.Fatalf("nodes = %v", got)
	}
	if meta.LastIndex == 0 {
		t.Fatal("list index is 0")
	}
	for _, n := range all {
		if n.Address != "127.0.0.1" || n.Version != s.cfg.NomadVersion || n.Drain || n.Attributes != nil ||
			n.Status != api.NodeStatusReady || n.SchedulingEligibility != api.NodeSchedulingEligible {
			t.Fatalf("stub %+v", n)
		}
	}

	for _, tc := range []struct {
		name, filter string
		want         []string
	}{
		{"meta", `Meta.reboot == "true"`, []string{"client-2"}},
		{"hostname attribute", `Attributes["unique.hostname"] == "client-3"`, []string{"client-3"}},
		{"pool", `NodePool == "a"`, []string{"client-1", "client-3"}},
		{"class", `NodeClass == "gpu"`, []string{"client-3"}},
		{"status", `Status == "ready"`, []string{"client-1", "client-2", "client-3"}},
		{"none", `Status == "down"`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := c.Nodes().List(&api.QueryOptions{Filter: tc.filter})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(got), tc.want) {
				t.Fatalf("filter %q = %v; want %v", tc.filter, names(got), tc.want)
			}
		})
	}

	// An empty result is [] on the wire, with an index header.
	resp, body := rawGet(t, s.Address()+`/v1/nodes?filter=Status+%3D%3D+%22down%22`)
	if strings.TrimSpace(body) != "[]" || resp.Header.Get("X-Nomad-Index") == "" {
		t.Fatalf("empty list: body %q, index %q", body, resp.Header.Get("X-Nomad-Index"))
	}

	// Bad filters are 400s.
	_, _, err = c.Nodes().List(&api.QueryOptions{Filter: `Meta.reboot ==`})
	wantStatus(t, err, 400, "failed to create result paginator")
	_, _, err = c.Nodes().List(&api.QueryOptions{Filter: `NoSuchField == "x"`})
	wantStatus(t, err, 400, "failed to read result page")

	// os=true adds only os.name.
	withOS, _, err := c.Nodes().List(&api.QueryOptions{Params: map[string]string{"os": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range withOS {
		if len(n.Attributes) != 1 || n.Attributes["os.name"] == "" {
			t.Fatalf("os=true attributes = %v", n.Attributes)
		}
	}

	// Prefix on the node ID.
	id := nodeID(t, s, "client-1")
	got, _, err := c.Nodes().PrefixList(id[:4])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || !slices.ContainsFunc(got, func(n *api.NodeListStub) bool { return n.ID == id }) {
		t.Fatalf("prefix %s: %v", id[:4], names(got))
	}
	for _, n := range got {
		if !strings.HasPrefix(n.ID, id[:4]) {
			t.Fatalf("prefix %s returned %s", id[:4], n.ID)
		}
	}
	_, _, err = c.Nodes().PrefixList(id[:3])
	wantStatus(t, err, 500, "even length")

	// Paging: ordered by ID, the next token is the first ID of the next page.
	page1, qm, err := c.Nodes().List(&api.QueryOptions{PerPage: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page1) != 2 || qm.NextToken == "" {
		t.Fatalf("page 1: %d nodes, next token %q", len(page1), qm.NextToken)
	}
	page2, qm2, err := c.Nodes().List(&api.QueryOptions{PerPage: 2, NextToken: qm.NextToken})
	if err != nil {
		t.Fatal(err)
	}
	if len(page2) != 1 || qm2.NextToken != "" || page2[0].ID != qm.NextToken {
		t.Fatalf("page 2: %v, next token %q", names(page2), qm2.NextToken)
	}
}

func TestNodeInfoAndUnknownNode(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2})
	h, _ := s.Host("client-1")
	n, meta, err := c.Nodes().Info(h.NodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "client-1" || n.HTTPAddr != h.Addr || n.Datacenter != "dc1" || n.NodePool != "default" ||
		n.Attributes["unique.hostname"] != "client-1" || n.Attributes["nomad.version"] != s.cfg.NomadVersion ||
		n.Attributes["os.name"] == "" || n.Attributes["unique.host_id"] == "" || n.Drain ||
		n.Status != api.NodeStatusReady || n.SchedulingEligibility != api.NodeSchedulingEligible ||
		n.StatusUpdatedAt == 0 || len(n.Drivers) == 0 {
		t.Fatalf("node = %+v", n)
	}
	if meta.LastIndex != n.ModifyIndex {
		t.Fatalf("index %d, ModifyIndex %d", meta.LastIndex, n.ModifyIndex)
	}
	if len(n.Events) != 1 || n.Events[0].Message != "Node registered" {
		t.Fatalf("events = %+v", n.Events)
	}

	unknown := "00000000-0000-4000-8000-000000000000"
	_, _, err = c.Nodes().Info(unknown, nil)
	wantStatus(t, err, 404, "node not found")
	_, err = c.Nodes().UpdateDrain(unknown, &api.DrainSpec{Deadline: time.Hour}, false, nil)
	wantStatus(t, err, 500, "node not found")
	_, err = c.Nodes().ToggleEligibility(unknown, false, nil)
	wantStatus(t, err, 500, "node not found")
	allocs, _, err := c.Nodes().Allocations(unknown, nil)
	if err != nil || len(allocs) != 0 {
		t.Fatalf("allocations of unknown node: %v, %v", allocs, err)
	}
	// Blocking on an unknown node waits like any read, then answers 404.
	start := time.Now()
	_, _, err = c.Nodes().Info(unknown, &api.QueryOptions{WaitIndex: 1 << 40, WaitTime: 100 * time.Millisecond})
	wantStatus(t, err, 404, "node not found")
	if time.Since(start) < 100*time.Millisecond {
		t.Fatalf("blocking read of an unknown node returned after %v", time.Since(start))
	}
	// A prefix is not an ID.
	_, _, err = c.Nodes().Info(h.NodeID[:8], nil)
	wantStatus(t, err, 404, "node not found")
}

func TestNodeBlockingQuery(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2})
	id := nodeID(t, s, "client-1")
	n, meta, err := c.Nodes().Info(id, nil)
	if err != nil {
		t.Fatal(err)
	}

	// index = ModifyIndex - 1: the result is already newer, so it answers at once.
	start := time.Now()
	_, m2, err := c.Nodes().Info(id, &api.QueryOptions{WaitIndex: n.ModifyIndex - 1, WaitTime: 5 * time.Second})
	if err != nil || m2.LastIndex != n.ModifyIndex || time.Since(start) > 2*time.Second {
		t.Fatalf("non-blocking: %v, index %d, took %v", err, m2.LastIndex, time.Since(start))
	}

	// index = ModifyIndex: blocks until wait runs out, then 200 with the same index
	// (even though other writes in the cluster happen meanwhile).
	if err := s.SetNodeMeta("client-2", map[string]string{"x": "y"}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, m3, err := c.Nodes().Info(id, &api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 150 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if m3.LastIndex != meta.LastIndex || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("timeout: index %d (want %d), took %v", m3.LastIndex, meta.LastIndex, time.Since(start))
	}

	// A change to the node wakes the query with a strictly greater index.
	done := make(chan uint64, 1)
	go func() {
		_, m, err := c.Nodes().Info(id, &api.QueryOptions{WaitIndex: meta.LastIndex, WaitTime: 10 * time.Second})
		if err != nil {
			done <- 0
			return
		}
		done <- m.LastIndex
	}()
	if _, err := c.Nodes().ToggleEligibility(id, false, nil); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got <= meta.LastIndex {
		t.Fatalf("woken with index %d; want > %d", got, meta.LastIndex)
	}

	// X-Nomad-Index is always present, also on the list and on a timed-out list.
	for _, path := range []string{"/v1/nodes", "/v1/node/" + id, "/v1/node/" + id + "/allocations", "/v1/nodes?index=999999&wait=20ms"} {
		resp, _ := rawGet(t, s.Address()+path)
		if resp.StatusCode != 200 || resp.Header.Get("X-Nomad-Index") == "" || resp.Header.Get("X-Nomad-Index") == "0" {
			t.Fatalf("%s: status %d, X-Nomad-Index %q", path, resp.StatusCode, resp.Header.Get("X-Nomad-Index"))
		}
	}
	// A list blocking on the current index wakes when a node changes.
	_, lm, err := c.Nodes().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, m, err := c.Nodes().List(&api.QueryOptions{WaitIndex: lm.LastIndex, WaitTime: 10 * time.Second})
		if err != nil {
			done <- 0
			return
		}
		done <- m.LastIndex
	}()
	if _, err := c.Nodes().ToggleEligibility(id, true, nil); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got <= lm.LastIndex {
		t.Fatalf("list woken with index %d; want > %d", got, lm.LastIndex)
	}
}

func TestClientMetadata(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1, HeartbeatTTL: 100 * time.Millisecond})
	h, _ := s.Host("client-1")
	local := newClient(t, "http://"+h.Addr, "")
	ctx := testCtx(t)

	// On the host's own agent node_id may be left out.
	out, err := local.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{Meta: map[string]*string{
		"reboot.pending": pointerOf("true"), "owner": pointerOf("ops"),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Meta["reboot.pending"] != "true" || *out.Dynamic["owner"] != "ops" || len(out.Static) != 0 {
		t.Fatalf("apply = %+v", out)
	}
	// The node's Meta gets it a little later (batched node update).
	waitNode(ctx, t, c, h.NodeID, func(n *api.Node) bool { return n.Meta["reboot.pending"] == "true" })

	// null deletes; a key that is not static leaves Dynamic too.
	out, err = c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: h.NodeID, Meta: map[string]*string{"owner": nil}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Meta["owner"]; ok {
		t.Fatalf("owner not deleted: %+v", out.Meta)
	}
	if _, ok := out.Dynamic["owner"]; ok {
		t.Fatalf("dynamic = %+v", out.Dynamic)
	}
	waitNode(ctx, t, c, h.NodeID, func(n *api.Node) bool { _, ok := n.Meta["owner"]; return !ok })

	read, err := c.Nodes().Meta().Read(h.NodeID, nil)
	if err != nil || read.Meta["reboot.pending"] != "true" {
		t.Fatalf("read = %+v, %v", read, err)
	}

	// Validation and the missing node.
	_, err = c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: h.NodeID, Meta: map[string]*string{"bad key": pointerOf("x")}}, nil)
	wantStatus(t, err, 400, "not a valid identifier")
	_, err = c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: h.NodeID}, nil)
	wantStatus(t, err, 400, "missing required Meta")
	_, err = c.Nodes().Meta().Read("", nil)
	wantStatus(t, err, 400, "No local Node and node_id not provided")

	// No index header.
	resp, _ := rawGet(t, s.Address()+"/v1/client/metadata?node_id="+h.NodeID)
	if resp.StatusCode != 200 || resp.Header.Get("X-Nomad-Index") != "" {
		t.Fatalf("status %d, X-Nomad-Index %q", resp.StatusCode, resp.Header.Get("X-Nomad-Index"))
	}
}

// waitNode follows the node with blocking queries until cond holds.
func waitNode(ctx context.Context, t *testing.T, c *api.Client, id string, cond func(*api.Node) bool) *api.Node {
	t.Helper()
	var idx uint64
	for {
		n, meta, err := c.Nodes().Info(id, (&api.QueryOptions{WaitIndex: idx, WaitTime: time.Second}).WithContext(ctx))
		if err != nil {
			t.Fatalf("waiting on node %s: %v", id, err)
		}
		if cond(n) {
			return n
		}
		idx = meta.LastIndex
	}
}

// waitAllocs follows the node's allocations with blocking queries until cond holds.
func waitAllocs(ctx context.Context, t *testing.T, c *api.Client, id string, cond func([]*api.Allocation) bool) []*api.Allocation {
	t.Helper()
	var idx uint64
	for {
		as, meta, err := c.Nodes().Allocations(id, (&api.QueryOptions{WaitIndex: idx, WaitTime: time.Second}).WithContext(ctx))
		if err != nil {
			t.Fatalf("waiting on allocations of %s: %v", id, err)
		}
		if cond(as) {
			return as
		}
		idx = meta.LastIndex
	}
}

func TestNodeACL(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1, ACL: true})
	id := nodeID(t, s, "client-1")
	if err := s.AddJob(JobSpec{ID: "web", Groups: []GroupSpec{{Name: "web", Count: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.AddJob(JobSpec{ID: "other", Namespace: "team", Groups: []GroupSpec{{Name: "g", Count: 1}}}); err != nil {
		t.Fatal(err)
	}
	policy := func(src string) *Policy {
		p, err := ParsePolicy("test.hcl", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	reader := s.CreateToken("reader", policy(`node { policy = "read" }
namespace "default" { capabilities = ["read-job"] }`))
	rc := newClient(t, s.Address(), reader.SecretID)

	if _, _, err := rc.Nodes().Info(id, nil); err != nil {
		t.Fatalf("node:read info: %v", err)
	}
	_, err := rc.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: time.Hour}, false, nil)
	wantStatus(t, err, 403, "Permission denied")
	_, err = rc.Nodes().ToggleEligibility(id, false, nil)
	wantStatus(t, err, 403, "Permission denied")
	_, err = rc.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: id, Meta: map[string]*string{"a": pointerOf("b")}}, nil)
	wantStatus(t, err, 403, "Permission denied")
	anon := newClient(t, s.Address(), "")
	_, _, err = anon.Nodes().List(nil)
	wantStatus(t, err, 403, "Permission denied")
	// An unknown token fails Authenticate, which the RPC reports as
	// Permission denied (nomad/node_endpoint.go Node.List).
	bogus := newClient(t, s.Address(), "00000000-0000-4000-8000-000000000000")
	_, _, err = bogus.Nodes().List(nil)
	wantStatus(t, err, 403, "Permission denied")

	// Allocations in namespaces without read-job are dropped silently.
	mine, _, err := rc.Nodes().Allocations(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(mine) != 1 || mine[0].Namespace != "default" {
		t.Fatalf("reader sees %d allocs", len(mine))
	}
	all, _, err := c.Nodes().Allocations(id, nil)
	if err != nil || len(all) != 2 {
		t.Fatalf("management sees %d allocs, %v", len(all), err)
	}

	// The drain records who did it.
	writer := s.CreateToken("writer", policy(`node { policy = "write" }`))
	wc := newClient(t, s.Address(), writer.SecretID)
	if _, err := wc.Nodes().UpdateDrain(id, &api.DrainSpec{Deadline: time.Hour}, false, nil); err != nil {
		t.Fatal(err)
	}
	n, _, err := c.Nodes().Info(id, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.LastDrain == nil || n.LastDrain.AccessorID != "token:"+writer.AccessorID {
		t.Fatalf("LastDrain = %+v", n.LastDrain)
	}
}

func TestNodeAllocationsShape(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1})
	id := nodeID(t, s, "client-1")
	for _, j := range []JobSpec{
		{ID: "web", Groups: []GroupSpec{{Name: "web", Count: 1}}},
		{ID: "report", Type: "batch"},
		{ID: "agent", Type: "system"},
	} {
		if err := s.AddJob(j); err != nil {
			t.Fatal(err)
		}
	}
	ctx := testCtx(t)
	as := waitAllocs(ctx, t, c, id, func(as []*api.Allocation) bool {
		return len(as) == 3 && !slices.ContainsFunc(as, func(a *api.Allocation) bool { return a.ClientStatus != "running" })
	})
	types := map[string]string{}
	for _, a := range as {
		if a.Job == nil || a.Job.Type == nil || a.NodeID != id || a.DesiredStatus != "run" || a.CreateIndex == 0 || a.ModifyIndex == 0 {
			t.Fatalf("alloc %+v", a)
		}
		types[a.JobID] = *a.Job.Type
	}
	if types["web"] != "service" || types["report"] != "batch" || types["agent"] != "system" {
		t.Fatalf("types = %v", types)
	}
	// Raw wire: Job.Type present in JSON.
	_, body := rawGet(t, s.Address()+"/v1/node/"+id+"/allocations")
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &raw); err != nil || len(raw) != 3 {
		t.Fatalf("raw allocations: %v", err)
	}
}
