package nomadsim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// vtSim starts an emulator for a test and closes it at the end.
func vtSim(t *testing.T, cfg Config) *Sim {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// vtClient is a real nomad/api client for addr (the cluster address when "") with
// the given token.
func vtClient(t *testing.T, s *Sim, addr, token string) *api.Client {
	t.Helper()
	if addr == "" {
		addr = s.Address()
	}
	c, err := api.NewClient(&api.Config{Address: addr, SecretID: token})
	if err != nil {
		t.Fatalf("api.NewClient: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// vtResp is a raw HTTP answer.
type vtResp struct {
	code   int
	header http.Header
	body   string
}

// vtDo sends a raw request, for details the api client hides (status codes, headers,
// exact bodies).
func vtDo(t *testing.T, s *Sim, method, path, token, body string) vtResp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.Address()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("X-Nomad-Token", token)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return vtResp{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

func vtParsePolicy(t *testing.T, src string) *Policy {
	t.Helper()
	p, err := ParsePolicy("test.hcl", []byte(src))
	if err != nil {
		t.Fatalf("ParsePolicy: %v", err)
	}
	return p
}

func vtStatus(t *testing.T, err error) (int, string) {
	t.Helper()
	var ue api.UnexpectedResponseError
	if !errors.As(err, &ue) {
		t.Fatalf("want UnexpectedResponseError, got %T %v", err, err)
	}
	return ue.StatusCode(), ue.Body()
}

func TestVariablesCRUDAndCAS(t *testing.T) {
	s := vtSim(t, Config{})
	c := vtClient(t, s, "", "")
	vars := c.Variables()

	v, wm, err := vars.CheckedCreate(&api.Variable{Path: "rollboot/control", Items: api.VariableItems{"paused": "false"}}, nil)
	if err != nil {
		t.Fatalf("CheckedCreate: %v", err)
	}
	if v.Namespace != "default" || v.CreateIndex == 0 || v.ModifyIndex != v.CreateIndex || wm.LastIndex != v.ModifyIndex {
		t.Fatalf("created %+v, write index %d", v, wm.LastIndex)
	}
	if v.CreateTime == 0 || v.ModifyTime == 0 {
		t.Fatalf("times not set: %+v", v)
	}
	created := v.ModifyIndex

	// Create-if-absent on an existing variable: conflict with the current one.
	_, _, err = vars.CheckedCreate(&api.Variable{Path: "rollboot/control", Items: api.VariableItems{"paused": "true"}}, nil)
	var cas api.ErrCASConflict
	if !errors.As(err, &cas) {
		t.Fatalf("want ErrCASConflict, got %v", err)
	}
	if cas.CheckIndex != 0 || cas.Conflict.ModifyIndex != created || cas.Conflict.Items["paused"] != "false" {
		t.Fatalf("conflict %+v / %+v", cas, cas.Conflict)
	}

	// Update with the right index, then with the stale one.
	v.Items["paused"] = "true"
	v2, _, err := vars.CheckedUpdate(v, nil)
	if err != nil {
		t.Fatalf("CheckedUpdate: %v", err)
	}
	if v2.ModifyIndex <= created || v2.CreateIndex != created {
		t.Fatalf("updated indexes %d/%d after %d", v2.CreateIndex, v2.ModifyIndex, created)
	}
	v.ModifyIndex = created
	_, _, err = vars.CheckedUpdate(v, nil)
	if !errors.As(err, &cas) || cas.CheckIndex != created || cas.Conflict.ModifyIndex != v2.ModifyIndex {
		t.Fatalf("stale update: %v", err)
	}
	if err.Error() != "cas conflict: expected ModifyIndex "+itoa(created)+"; found "+itoa(v2.ModifyIndex) {
		t.Fatalf("message %q", err)
	}

	// Plain Create/Update never conflict on indexes.
	if _, _, err := vars.Update(&api.Variable{Path: "rollboot/control", Items: api.VariableItems{"paused": "false"}}, nil); err != nil {
		t.Fatalf("Update: %v", err)
	}
	got, _, err := vars.Read("rollboot/control", nil)
	if err != nil || got.Items["paused"] != "false" {
		t.Fatalf("Read: %+v %v", got, err)
	}

	// Delete with a stale index, then the right one.
	if _, err := vars.CheckedDelete("rollboot/control", created, nil); !errors.As(err, &cas) || cas.Conflict.ModifyIndex != got.ModifyIndex {
		t.Fatalf("stale delete: %v", err)
	}
	if _, err := vars.CheckedDelete("rollboot/control", got.ModifyIndex, nil); err != nil {
		t.Fatalf("CheckedDelete: %v", err)
	}
	if _, _, err := vars.Read("rollboot/control", nil); !errors.Is(err, api.ErrVariablePathNotFound) {
		t.Fatalf("Read after delete: %v", err)
	}
	if pv, _, err := vars.Peek("rollboot/control", nil); pv != nil || err != nil {
		t.Fatalf("Peek after delete: %v %v", pv, err)
	}
	// A checked delete of a missing variable with an index conflicts with a zero value.
	if _, err := vars.CheckedDelete("rollboot/control", 5, nil); !errors.As(err, &cas) || cas.Conflict.ModifyIndex != 0 || cas.Conflict.Path != "rollboot/control" {
		t.Fatalf("delete missing with cas: %v", err)
	}
	// ... and without an index (cas=0) it succeeds.
	if _, err := vars.CheckedDelete("rollboot/control", 0, nil); err != nil {
		t.Fatalf("delete-if-absent: %v", err)
	}
	if _, err := vars.Delete("never/existed", nil); err != nil {
		t.Fatalf("Delete missing: %v", err)
	}

	var writes, deletes int
	for _, e := range s.Events(0) {
		switch e.Type {
		case EventVarWrite:
			writes++
		case EventVarDelete:
			deletes++
		}
	}
	if writes != 3 || deletes != 1 {
		t.Fatalf("events: %d writes, %d deletes", writes, deletes)
	}
}

func itoa(i uint64) string { return strconv.FormatUint(i, 10) }

func TestVariablesWireDetails(t *testing.T) {
	s := vtSim(t, Config{ACL: true})
	mgmt := s.ManagementToken()
	ro := s.CreateToken("ro", vtParsePolicy(t, `
namespace "default" {
  variables {
    path "app/*" { capabilities = ["write", "list"] }
  }
}`))

	r := vtDo(t, s, "PUT", "/v1/var/app/x", mgmt, `{"Items":{"k":"v"}}`)
	if r.code != 200 {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	var cur map[string]any
	if err := json.Unmarshal([]byte(r.body), &cur); err != nil {
		t.Fatal(err)
	}
	if _, ok := cur["Lock"]; ok {
		t.Fatalf("Lock must be omitted: %s", r.body)
	}
	mi := uint64(cur["ModifyIndex"].(float64))
	if r.header.Get("X-Nomad-Index") != itoa(mi) {
		t.Fatalf("index header %q, ModifyIndex %d", r.header.Get("X-Nomad-Index"), mi)
	}

	// 409 body is the current variable, index header its ModifyIndex.
	r = vtDo(t, s, "PUT", "/v1/var/app/x?cas=1", mgmt, `{"Items":{"k":"w"}}`)
	if r.code != 409 || r.header.Get("X-Nomad-Index") != itoa(mi) || !strings.Contains(r.body, `"Items":{"k":"v"}`) {
		t.Fatalf("cas conflict: %d %v %s", r.code, r.header, r.body)
	}
	// Without read capability the conflict omits Items.
	r = vtDo(t, s, "PUT", "/v1/var/app/x?cas=1", ro.SecretID, `{"Items":{"k":"w"}}`)
	if r.code != 409 || strings.Contains(r.body, "Items") || !strings.Contains(r.body, `"ModifyIndex":`+itoa(mi)) {
		t.Fatalf("cas conflict without read: %d %s", r.code, r.body)
	}
	// cas!=0 on a missing variable: {Namespace, Path} with zero indices, index 0.
	r = vtDo(t, s, "PUT", "/v1/var/app/missing?cas=7", mgmt, `{"Items":{"k":"w"}}`)
	want := `{"Namespace":"default","Path":"app/missing","CreateIndex":0,"CreateTime":0,"ModifyIndex":0,"ModifyTime":0}`
	if r.code != 409 || strings.TrimSpace(r.body) != want || r.header.Get("X-Nomad-Index") != "0" {
		t.Fatalf("zero conflict: %d %q %v", r.code, r.body, r.header)
	}

	// Delete is 204 without a body, also for a missing variable.
	for _, p := range []string{"/v1/var/app/x", "/v1/var/app/x", "/v1/var/app/x?cas=0"} {
		r = vtDo(t, s, "DELETE", p, mgmt, "")
		if r.code != 204 || r.body != "" || r.header.Get("X-Nomad-Index") == "" {
			t.Fatalf("DELETE %s: %d %q", p, r.code, r.body)
		}
	}
	// Method, path and parameter errors.
	cases := []struct {
		method, path, body string
		code               int
		msg                string
	}{
		{"PATCH", "/v1/var/app/x", "", 400, "Invalid method"},
		{"PUT", "/v1/vars", "", 405, "Invalid method"},
		{"PUT", "/v1/var/", `{"Items":{"a":"b"}}`, 400, "missing variable path"},
		{"PUT", "/v1/var/app/x", `{}`, 400, "variable missing required Items object"},
		{"PUT", "/v1/var/app/x", `{"Items":{}}`, 400, "variable missing required Items object"},
		{"PUT", "/v1/var/app/x?cas=x", `{"Items":{"a":"b"}}`, 400, `can not parse cas: strconv.ParseUint: parsing "x": invalid syntax`},
		{"PUT", "/v1/var/app/x?lock-acquire&lock-release", `{}`, 400, "multiple lock operations"},
		{"PUT", "/v1/var/app/x?lock-acquire&cas=0", `{}`, 400, "CAS can't be used with lock operations"},
	}
	for _, tc := range cases {
		r := vtDo(t, s, tc.method, tc.path, mgmt, tc.body)
		if r.code != tc.code || r.body != tc.msg {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, r.code, r.body, tc.code, tc.msg)
		}
	}
}

func TestVariablesValidation(t *testing.T) {
	s := vtSim(t, Config{})
	c := vtClient(t, s, "", "")
	big := strings.Repeat("x", 65536)
	cases := []struct {
		name  string
		ns    string
		path  string
		items api.VariableItems
		msg   string // "" = accepted
	}{
		{"ok", "", "rollboot/hosts/h-1_a~b", api.VariableItems{"a": "b"}, ""},
		{"dot", "", "a.b", api.VariableItems{"a": "b"}, `RPC Error:: 400,invalid path "a.b"`},
		{"too long", "", strings.Repeat("p", 129), api.VariableItems{"a": "b"}, `RPC Error:: 400,invalid path "` + strings.Repeat("p", 129) + `"`},
		{"nomad", "", "nomad", api.VariableItems{"a": "b"}, `RPC Error:: 400,"nomad" is a reserved top-level directory path, but you may write variables to "nomad/jobs", "nomad/job-templates", "nomad/sentinel", or below`},
		{"nomad other", "", "nomad/other", api.VariableItems{"a": "b"}, `RPC Error:: 400,only paths at "nomad/jobs" or "nomad/job-templates" and below are valid paths under the top-level "nomad" directory`},
		{"nomad jobs", "", "nomad/jobs/web", api.VariableItems{"a": "b"}, ""},
		{"job template", "", "nomad/job-templates/t", api.VariableItems{"a": "b"}, ""},
		{"job templates dir", "", "nomad/job-templates", api.VariableItems{"a": "b"}, `RPC Error:: 400,"nomad/job-templates" is a reserved directory path, but you may write variables at the level below it, for example, "nomad/job-templates/template-name"`},
		{"exactly 64KiB", "", "big/ok", api.VariableItems{"k": big[:65535]}, ""},
		{"over 64KiB", "", "big/no", api.VariableItems{"k": big}, "RPC Error:: 400,variables are limited to 64KiB in total size"},
		{"wildcard namespace", "*", "x", api.VariableItems{"a": "b"}, `RPC Error:: 400,can not target wildcard ("*")namespace`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := c.Variables().Create(&api.Variable{Namespace: tc.ns, Path: tc.path, Items: tc.items}, nil)
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			code, body := vtStatus(t, err)
			if code != 400 || body != tc.msg {
				t.Fatalf("got %d %q, want 400 %q", code, body, tc.msg)
			}
		})
	}
}

func TestVariablesBlockingRead(t *testing.T) {
	s := vtSim(t, Config{})
	c := vtClient(t, s, "", "")
	vars := c.Variables()
	v, _, err := vars.Create(&api.Variable{Path: "plan/h1", Items: api.VariableItems{"phase": "idle"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, qm, err := vars.Read("plan/h1", nil)
	if err != nil || qm.LastIndex != v.ModifyIndex || !qm.KnownLeader {
		t.Fatalf("read meta %+v %v", qm, err)
	}

	// A write elsewhere does not wake a query on this variable: it times out with
	// the unchanged index.
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, _, err := vars.Create(&api.Variable{Path: "plan/h2", Items: api.VariableItems{"phase": "idle"}}, nil); err != nil {
			t.Error(err)
		}
	}()
	_, qm, err = vars.Read("plan/h1", &api.QueryOptions{WaitIndex: v.ModifyIndex, WaitTime: 200 * time.Millisecond})
	<-done
	if err != nil || qm.LastIndex != v.ModifyIndex || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("timeout read: %+v %v after %v", qm, err, time.Since(start))
	}

	// A write to it wakes the query with a strictly greater index.
	type res struct {
		v   *api.Variable
		idx uint64
		err error
	}
	ch := make(chan res, 1)
	go func() {
		got, qm, err := vars.Read("plan/h1", &api.QueryOptions{WaitIndex: v.ModifyIndex, WaitTime: 10 * time.Second})
		if err != nil {
			ch <- res{err: err}
			return
		}
		ch <- res{v: got, idx: qm.LastIndex}
	}()
	// Whether the query is already blocking or not, it must answer the update:
	// its index is strictly greater than WaitIndex.
	v.Items["phase"] = "draining"
	w, _, err := vars.Update(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil || r.idx != w.ModifyIndex || r.idx <= v.ModifyIndex || r.v.Items["phase"] != "draining" {
		t.Fatalf("woken read: %+v idx %d, write %d", r, r.idx, w.ModifyIndex)
	}

	// A query on a missing variable blocks on the table index and wakes on create.
	go func() {
		got, qm, err := vars.Peek("plan/h3", &api.QueryOptions{WaitIndex: w.ModifyIndex, WaitTime: 10 * time.Second})
		if err != nil {
			ch <- res{err: err}
			return
		}
		ch <- res{v: got, idx: qm.LastIndex}
	}()
	w3, _, err := vars.Create(&api.Variable{Path: "plan/h3", Items: api.VariableItems{"phase": "pending"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r = <-ch
	if r.err != nil || r.v == nil || r.idx != w3.ModifyIndex {
		t.Fatalf("missing-variable query: %+v", r)
	}
	// The 404 carries the query meta.
	raw := vtDo(t, s, "GET", "/v1/var/plan/none", "", "")
	if raw.code != 404 || raw.body != "variable not found" || raw.header.Get("X-Nomad-Index") != itoa(w3.ModifyIndex) {
		t.Fatalf("404: %d %q %v", raw.code, raw.body, raw.header)
	}
}

func TestVariablesList(t *testing.T) {
	s := vtSim(t, Config{})
	c := vtClient(t, s, "", "")
	for _, p := range []string{"rollboot/hosts/b", "rollboot/hosts/a", "rollboot/plan/a", "other/x"} {
		if _, _, err := c.Variables().Create(&api.Variable{Path: p, Items: api.VariableItems{"k": p}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Variables().Create(&api.Variable{Namespace: "prod", Path: "rollboot/hosts/c", Items: api.VariableItems{"k": "v"}}, nil); err != nil {
		t.Fatal(err)
	}
	paths := func(l []*api.VariableMetadata) string {
		var out []string
		for _, m := range l {
			out = append(out, m.Namespace+":"+m.Path)
		}
		return strings.Join(out, ",")
	}
	l, qm, err := c.Variables().PrefixList("rollboot/hosts/", nil)
	if err != nil || paths(l) != "default:rollboot/hosts/a,default:rollboot/hosts/b" || qm.LastIndex != s.Index() {
		t.Fatalf("prefix list %s %+v %v (index %d)", paths(l), qm, err, s.Index())
	}
	l, _, err = c.Variables().List(&api.QueryOptions{Namespace: "*", Prefix: "rollboot/hosts/"})
	if err != nil || paths(l) != "default:rollboot/hosts/a,default:rollboot/hosts/b,prod:rollboot/hosts/c" {
		t.Fatalf("all namespaces %s %v", paths(l), err)
	}
	l, _, err = c.Variables().List(&api.QueryOptions{Filter: `Path contains "plan"`})
	if err != nil || paths(l) != "default:rollboot/plan/a" {
		t.Fatalf("filter %s %v", paths(l), err)
	}
	l, qm, err = c.Variables().List(&api.QueryOptions{PerPage: 2})
	if err != nil || paths(l) != "default:other/x,default:rollboot/hosts/a" || qm.NextToken != "default.rollboot/hosts/b" {
		t.Fatalf("page 1 %s %+v %v", paths(l), qm, err)
	}
	l, qm, err = c.Variables().List(&api.QueryOptions{PerPage: 2, NextToken: qm.NextToken})
	if err != nil || paths(l) != "default:rollboot/hosts/b,default:rollboot/plan/a" || qm.NextToken != "" {
		t.Fatalf("page 2 %s %+v %v", paths(l), qm, err)
	}
	if raw := vtDo(t, s, "GET", "/v1/vars?prefix=none", "", ""); raw.code != 200 || strings.TrimSpace(raw.body) != "[]" {
		t.Fatalf("empty list: %d %q", raw.code, raw.body)
	}
}

func TestVariablesACL(t *testing.T) {
	s := vtSim(t, Config{ACL: true, AllowShortLockTTL: true})
	mgmt := vtClient(t, s, "", s.ManagementToken())
	reader := s.CreateToken("reader", vtParsePolicy(t, `
namespace "default" {
  variables {
    path "rollboot/*" { capabilities = ["read"] }
    path "rollboot/hosts/mine" { capabilities = ["read", "write"] }
  }
}`))
	rc := vtClient(t, s, "", reader.SecretID)
	for _, p := range []string{"rollboot/hosts/mine", "rollboot/plan/a", "secret/x"} {
		if _, _, err := mgmt.Variables().Create(&api.Variable{Path: p, Items: api.VariableItems{"k": "v"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Read-only path: reading works, writing and deleting are denied.
	if _, _, err := rc.Variables().Read("rollboot/plan/a", nil); err != nil {
		t.Fatalf("read: %v", err)
	}
	if _, _, err := rc.Variables().Update(&api.Variable{Path: "rollboot/plan/a", Items: api.VariableItems{"k": "w"}}, nil); err == nil {
		t.Fatal("write on a read-only path succeeded")
	} else if code, body := vtStatus(t, err); code != 403 || body != "Permission denied" {
		t.Fatalf("write: %d %q", code, body)
	}
	if _, err := rc.Variables().Delete("rollboot/hosts/mine", nil); err == nil {
		t.Fatal("delete without destroy succeeded")
	}
	if _, _, err := rc.Variables().Update(&api.Variable{Path: "rollboot/hosts/mine", Items: api.VariableItems{"k": "w"}}, nil); err != nil {
		t.Fatalf("write on own path: %v", err)
	}
	if _, _, err := rc.Variables().Read("secret/x", nil); err == nil {
		t.Fatal("read outside the policy succeeded")
	}
	// List is filtered by the list capability.
	l, _, err := rc.Variables().List(nil)
	if err != nil || len(l) != 2 {
		t.Fatalf("filtered list: %d %v", len(l), err)
	}
	// Unknown token.
	bad := vtClient(t, s, "", "00000000-0000-0000-0000-000000000000")
	if _, _, err := bad.Variables().List(nil); err == nil {
		t.Fatal("unknown token listed")
	} else if code, body := vtStatus(t, err); code != 403 || body != "Permission denied" {
		t.Fatalf("unknown token: %d %q", code, body)
	}

	// The lock is visible to management only (and to the holder in its write reply).
	lv, _, err := rc.Variables().AcquireLock(&api.Variable{Path: "rollboot/hosts/mine",
		Lock: &api.VariableLock{TTL: "10s", LockDelay: "1s"}}, nil)
	if err != nil || lv.Lock == nil || lv.Lock.ID == "" {
		t.Fatalf("acquire: %+v %v", lv, err)
	}
	if got, _, err := rc.Variables().Read("rollboot/hosts/mine", nil); err != nil || got.Lock != nil {
		t.Fatalf("non-management read shows lock: %+v %v", got, err)
	}
	if l, _, err := rc.Variables().List(nil); err != nil || l[0].Lock != nil {
		t.Fatalf("non-management list shows lock: %v", err)
	}
	got, _, err := mgmt.Variables().Read("rollboot/hosts/mine", nil)
	if err != nil || got.Lock == nil || got.Lock.ID != lv.Lock.ID || got.Lock.TTL != "10s" || got.Lock.LockDelay != "1s" {
		t.Fatalf("management read: %+v %v", got, err)
	}
	if l, _, err := mgmt.Variables().PrefixList("rollboot/hosts/", nil); err != nil || l[0].Lock == nil {
		t.Fatalf("management list hides lock: %v", err)
	}
}

func TestVariablesNoLeader(t *testing.T) {
	s := vtSim(t, Config{Servers: 3})
	c := vtClient(t, s, "", "")
	if _, _, err := c.Variables().Create(&api.Variable{Path: "a", Items: api.VariableItems{"k": "v"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLeaderLost(true); err != nil {
		t.Fatal(err)
	}
	_, _, err := c.Variables().Create(&api.Variable{Path: "b", Items: api.VariableItems{"k": "v"}}, nil)
	if code, body := vtStatus(t, err); code != 500 || body != "No cluster leader" {
		t.Fatalf("write without leader: %d %q", code, body)
	}
	_, _, err = c.Variables().Read("a", nil)
	if code, body := vtStatus(t, err); code != 500 || body != "No cluster leader" {
		t.Fatalf("read without leader: %d %q", code, body)
	}
	v, qm, err := c.Variables().Read("a", &api.QueryOptions{AllowStale: true})
	if err != nil || v.Items["k"] != "v" || qm.KnownLeader {
		t.Fatalf("stale read: %+v %+v %v", v, qm, err)
	}
	if err := s.SetLeaderLost(false); err != nil {
		t.Fatal(err)
	}
	if _, qm, err := c.Variables().Read("a", nil); err != nil || !qm.KnownLeader {
		t.Fatalf("read after re-election: %+v %v", qm, err)
	}
}
