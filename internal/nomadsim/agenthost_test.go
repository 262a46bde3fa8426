package nomadsim

import (
	"testing"

	"github.com/hashicorp/nomad/api"
)

// GET /v1/agent/host reads the host data of any node or server with agent:read,
// as `nomad operator debug` does; node:read is not enough, and with ACLs off it
// is refused (enable_debug is off).
func TestAgentHostOfAnyNode(t *testing.T) {
	s, mgmt := newTestSim(t, Config{Servers: 1, Clients: 2, ACL: true})
	for name, rules := range map[string]string{"agent-read": `agent { policy = "read" }`, "node-read": `node { policy = "read" }`} {
		if _, err := mgmt.ACLPolicies().Upsert(&api.ACLPolicy{Name: name, Rules: rules}, nil); err != nil {
			t.Fatal(err)
		}
	}
	token := func(policy string) *api.Client {
		tok, _, err := mgmt.ACLTokens().Create(&api.ACLToken{Name: policy, Type: "client", Policies: []string{policy}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return newClient(t, s.Address(), tok.SecretID)
	}
	agentRead, nodeRead := token("agent-read"), token("node-read")
	other := nodeID(t, s, "client-2")

	got, err := agentRead.Agent().Host("", other, nil)
	if err != nil {
		t.Fatalf("agent:read, another node's host data: %v", err)
	}
	if got.AgentID != other || got.HostData == nil || got.HostData.Environment["HOSTNAME"] != "client-2" {
		t.Errorf("host data of client-2: %+v", got)
	}
	if got, err := agentRead.Agent().Host("leader", "", nil); err != nil || got.AgentID != "server-1.global" {
		t.Errorf("host data of the leader: %+v, %v", got, err)
	}
	_, err = nodeRead.Agent().Host("", other, nil)
	wantStatus(t, err, 403, "Permission denied")
	_, err = agentRead.Agent().Host("", "00000000-0000-0000-0000-000000000000", nil)
	wantStatus(t, err, 404, "Unknown node")
	_, err = agentRead.Agent().Host("leader", other, nil)
	wantStatus(t, err, 400, "either client node or server")

	_, open := newTestSim(t, Config{Clients: 1})
	_, err = open.Agent().Host("", "", nil)
	wantStatus(t, err, 403, "Permission denied")
}
