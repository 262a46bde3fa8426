package nomadsim

import (
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// /v1/client/metadata through api.Nodes().Meta() with ACLs: node:read reads,
// node:write applies, the token is checked before the request is validated, and the
// cluster address (a server) and the host's own agent report an unknown token as
// Nomad's server and client do.
func TestClientMetadataACL(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2, ACL: true})
	h, _ := s.Host("client-1")
	pol := func(src string) *Policy {
		p, err := ParsePolicy("test.hcl", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	reader := s.CreateToken("reader", pol(`node { policy = "read" }`))
	writer := s.CreateToken("writer", pol(`node { policy = "write" }`))
	denied := s.CreateToken("denied", pol(`node { policy = "deny" }
agent { policy = "write" }`))
	nodeless := s.CreateToken("nodeless", pol(`namespace "default" { policy = "write" }`))
	set := map[string]*string{"rollboot.phase": pointerOf("draining")}
	bad := map[string]*string{"not valid": pointerOf("x")}

	for _, tc := range []struct {
		name        string
		addr, token string
		read, apply int // HTTP status; 200 = allowed
		applyBad    int // status of an invalid apply
		body        string
	}{
		{name: "reader", addr: s.Address(), token: reader.SecretID, read: 200, apply: 403, applyBad: 403, body: "Permission denied"},
		{name: "writer", addr: s.Address(), token: writer.SecretID, read: 200, apply: 200, applyBad: 400},
		{name: "deny", addr: s.Address(), token: denied.SecretID, read: 403, apply: 403, applyBad: 403, body: "Permission denied"},
		{name: "no node rule", addr: s.Address(), token: nodeless.SecretID, read: 403, apply: 403, applyBad: 403, body: "Permission denied"},
		{name: "anonymous", addr: s.Address(), read: 403, apply: 403, applyBad: 403, body: "Permission denied"},
		{name: "unknown token on a server", addr: s.Address(), token: "00000000-0000-4000-8000-000000000000",
			read: 403, apply: 403, applyBad: 403, body: "Permission denied"},
		{name: "unknown token on the client", addr: "http://" + h.Addr, token: "00000000-0000-4000-8000-000000000000",
			read: 403, apply: 403, applyBad: 403, body: "ACL token not found"},
		{name: "writer on the client", addr: "http://" + h.Addr, token: writer.SecretID, read: 200, apply: 200, applyBad: 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newClient(t, tc.addr, tc.token)
			check := func(what string, err error, want int, body string) {
				t.Helper()
				if want == 200 {
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					return
				}
				if got, b := statusOf(err); got != want || (body != "" && b != body) {
					t.Fatalf("%s: error %v; want %d %q", what, err, want, body)
				}
			}
			_, err := cl.Nodes().Meta().Read(h.NodeID, nil)
			check("read", err, tc.read, tc.body)
			_, err = cl.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: h.NodeID, Meta: set}, nil)
			check("apply", err, tc.apply, tc.body)
			_, err = cl.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: h.NodeID, Meta: bad}, nil)
			body := tc.body
			if tc.applyBad == 400 {
				body = `metadata key "not valid" is not a valid identifier`
			}
			check("invalid apply", err, tc.applyBad, body)
		})
	}
	// Only the writers changed the node.
	out, err := c.Nodes().Meta().Read(h.NodeID, nil)
	if err != nil || out.Meta["rollboot.phase"] != "draining" {
		t.Fatalf("read = %+v, %v", out, err)
	}
}

// Apply and Read as the Nomad client serves them: null unsets a key (a static key
// keeps a null tombstone in Dynamic, so its removal survives a restart), the node's
// Meta in /v1/node/:id follows after the client's batched node update, and while
// the node's host is down the servers answer 404 "No path to node".
func TestClientMetadataApplyReadAndReboot(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 2, HeartbeatTTL: 100 * time.Millisecond, BootTime: 400 * time.Millisecond})
	h, _ := s.Host("client-1")
	ctx := testCtx(t)
	if err := s.SetNodeMeta("client-1", map[string]string{"rack": "r1", "zone": "a"}); err != nil {
		t.Fatal(err)
	}

	out, err := c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: h.NodeID, Meta: map[string]*string{
		"rollboot.phase": pointerOf("draining"), "zone": pointerOf("b"),
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if out.Meta["rollboot.phase"] != "draining" || out.Meta["zone"] != "b" || out.Meta["rack"] != "r1" ||
		out.Static["zone"] != "a" || *out.Dynamic["zone"] != "b" || len(out.Dynamic) != 2 {
		t.Fatalf("apply = %+v (dynamic %v)", out, out.Dynamic)
	}
	// The servers see it after the batched node update, not at once.
	n, _, err := c.Nodes().Info(h.NodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Meta["rollboot.phase"]; ok {
		t.Fatalf("node meta updated at once: %v", n.Meta)
	}
	waitNode(ctx, t, c, h.NodeID, func(n *api.Node) bool {
		return n.Meta["rollboot.phase"] == "draining" && n.Meta["zone"] == "b"
	})

	// Unset: a dynamic-only key leaves Dynamic; a static key stays as a null.
	out, err = c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: h.NodeID, Meta: map[string]*string{
		"rollboot.phase": nil, "rack": nil,
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Dynamic["rollboot.phase"]; ok {
		t.Fatalf("dynamic-only key kept: %v", out.Dynamic)
	}
	if v, ok := out.Dynamic["rack"]; !ok || v != nil {
		t.Fatalf("static key's tombstone: %v", out.Dynamic)
	}
	if _, ok := out.Meta["rack"]; ok || out.Static["rack"] != "r1" {
		t.Fatalf("meta %v static %v", out.Meta, out.Static)
	}
	waitNode(ctx, t, c, h.NodeID, func(n *api.Node) bool {
		_, phase := n.Meta["rollboot.phase"]
		_, rack := n.Meta["rack"]
		return !phase && !rack && n.Meta["zone"] == "b"
	})

	// node_id in the query wins over the body's NodeID (parseNode).
	other, _ := s.Host("client-2")
	q := &api.QueryOptions{Params: map[string]string{"node_id": other.NodeID}}
	if _, err := c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: h.NodeID, Meta: map[string]*string{"x": pointerOf("1")}}, q); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Nodes().Meta().Read(other.NodeID, nil); err != nil || r.Meta["x"] != "1" {
		t.Fatalf("client-2 = %+v, %v", r, err)
	}

	// Rebooting: the servers have no connection to the client.
	if err := s.Reboot("client-1"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Nodes().Meta().Read(h.NodeID, nil)
	wantStatus(t, err, 404, "No path to node")
	_, err = c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: h.NodeID, Meta: map[string]*string{"x": pointerOf("1")}}, nil)
	wantStatus(t, err, 404, "No path to node")
	// Back up: the dynamic meta (and the tombstone) survived the reboot.
	if err := s.WaitFor(ctx, func(v *View) bool { hh, _ := v.Host("client-1"); return hh.Up }); err != nil {
		t.Fatal(err)
	}
	r, err := c.Nodes().Meta().Read(h.NodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Meta["rack"]; ok || r.Meta["zone"] != "b" {
		t.Fatalf("after reboot: %+v", r)
	}
	n, _, err = c.Nodes().Info(h.NodeID, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Meta["rack"]; ok || n.Meta["zone"] != "b" {
		t.Fatalf("node meta after reboot: %v", n.Meta)
	}
}

// Routing and wire details of /v1/client/metadata.
func TestClientMetadataErrors(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1, Servers: 1})
	h, _ := s.Host("client-1")
	srv, _ := s.Host("server-1")
	set := map[string]*string{"a": pointerOf("b")}

	// A server agent has no local node.
	_, err := newClient(t, "http://"+srv.Addr, "").Nodes().Meta().Read("", nil)
	wantStatus(t, err, 400, "No local Node and node_id not provided")
	_, err = c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{Meta: set}, nil)
	wantStatus(t, err, 400, "No local Node and node_id not provided")
	// An unknown node is a plain RPC error from the servers.
	_, err = c.Nodes().Meta().Read("11111111-2222-4333-8444-555555555555", nil)
	wantStatus(t, err, 500, "Unknown node 11111111-2222-4333-8444-555555555555")
	// The client validates.
	_, err = c.Nodes().Meta().Apply(&api.NodeMetaApplyRequest{NodeID: h.NodeID}, nil)
	wantStatus(t, err, 400, "missing required Meta object")
	// Only GET and POST.
	req, err := newJSONRequest(http.MethodPut, s.Address()+"/v1/client/metadata?node_id="+h.NodeID, `{"Meta":{"a":"b"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := doRaw(t, req); code != 405 || body != "Invalid method" {
		t.Fatalf("PUT: %d %q", code, body)
	}
	// A bad body is 400 before anything else, even without a node.
	req, _ = newJSONRequest(http.MethodPost, s.Address()+"/v1/client/metadata", `{"Meta":`)
	if code, _ := doRaw(t, req); code != 400 {
		t.Fatalf("bad body: %d", code)
	}
}

// What decides the 404 is the client's connection, not the node's status: a node
// the servers still list as down or disconnected (as right after a boot, before the
// client's first heartbeat) is served as soon as its client registered; a node
// whose host is down is not, whatever its status.
func TestClientMetadataFollowsTheConnection(t *testing.T) {
	s, c := newTestSim(t, Config{Clients: 1, HeartbeatTTL: time.Hour})
	h, _ := s.Host("client-1")
	for _, status := range []string{api.NodeStatusDown, api.NodeStatusDisconnected, api.NodeStatusInit, api.NodeStatusReady} {
		s.mu.Lock()
		s.cluster.nodes[h.NodeID].node.Status = status
		s.mu.Unlock()
		if _, err := c.Nodes().Meta().Read(h.NodeID, nil); err != nil {
			t.Fatalf("node %s, client connected: %v", status, err)
		}
	}
	// The heartbeat TTL of an hour keeps the node ready while its host is down.
	if err := s.Reboot("client-1"); err != nil {
		t.Fatal(err)
	}
	n, _, err := c.Nodes().Info(h.NodeID, nil)
	if err != nil || n.Status != api.NodeStatusReady {
		t.Fatalf("node %v, %v", n.Status, err)
	}
	_, err = c.Nodes().Meta().Read(h.NodeID, nil)
	wantStatus(t, err, 404, "No path to node")
}
