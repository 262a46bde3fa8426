package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
)

// shippedToken mints a token from a policy file of deploy/acl, as an operator
// does.
func shippedToken(t *testing.T, sim *nomadsim.Sim, policy string) string {
	t.Helper()
	path := filepath.Join("..", "..", "deploy", "acl", policy+".policy.hcl")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := nomadsim.ParsePolicy(path, src)
	if err != nil {
		t.Fatal(err)
	}
	return sim.CreateToken(policy, p).SecretID
}

// Who a host is comes from its local agent's health (what it runs) and the
// node of its name, both open to the shipped agent tokens, which cannot read
// /v1/agent/self: a client host, a server host and a host that runs both. The
// node also gives its client's Nomad version, which the agent checks.
func TestIdentityWithTheAgentTokens(t *testing.T) {
	const nomadVersion = "1.9.4"
	sim, err := nomadsim.New(nomadsim.Config{Servers: 1, Clients: 1, ACL: true, NomadVersion: nomadVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	if _, err := sim.AddHost("both-1", true, true, ""); err != nil {
		t.Fatal(err)
	}
	agentTok, serverTok := shippedToken(t, sim, "rollboot-agent"), shippedToken(t, sim, "rollboot-agent-server")
	ctx := context.Background()
	clientOf := func(h nomadsim.Host) *api.Client {
		tok := agentTok
		if h.Server != nil {
			tok = serverTok
		}
		c, err := api.NewClient(&api.Config{Address: "http://" + h.Addr, SecretID: tok})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	check := func(when string) {
		t.Helper()
		for _, h := range sim.Hosts() {
			c := clientOf(h)
			var want []string
			if h.NodeID != "" {
				want = append(want, store.RoleNomadClient)
			}
			if h.Server != nil {
				want = append(want, store.RoleNomadServer)
			}
			nodeID, roles, v, err := Identity(ctx, c.Agent(), c.Nodes(), h.Name)
			if err != nil || nodeID != h.NodeID || !slices.Equal(roles, want) {
				t.Errorf("%s: %s: node %q, roles %v, %v; want node %q, roles %v", when, h.Name, nodeID, roles, err, h.NodeID, want)
			}
			if wantV := map[bool]string{true: nomadVersion, false: ""}[h.NodeID != ""]; v != wantV {
				t.Errorf("%s: %s: Nomad version %q, want %q (its node's client, none without one)", when, h.Name, v, wantV)
			}
		}
	}
	check("with a leader")
	for _, h := range sim.Hosts() {
		if _, err := clientOf(h).Agent().Self(); err == nil || !strings.Contains(err.Error(), "403") {
			t.Errorf("%s: the agent token reads /v1/agent/self: %v", h.Name, err)
		}
	}
	// Without a leader a server's health is a 500 (still saying what runs), and
	// the node list is read stale.
	if err := sim.SetLeaderLost(true); err != nil {
		t.Fatal(err)
	}
	check("without a leader")
}

// A client whose node cannot be found by the host's name is no answer: the
// agent does not take "no node" for a client host.
func TestIdentityOfAClientWithoutItsNode(t *testing.T) {
	_, h, client := simHost(t, 1)
	_, _, _, err := Identity(context.Background(), client.Agent(), client.Nodes(), h.Name+"-renamed")
	if err == nil || !strings.Contains(err.Error(), `no Nomad node is named "client-1-renamed"`) {
		t.Fatalf("err = %v", err)
	}
}
