package coordinator

import (
	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/store"
)

// nodeGone says why the node p's cycle took out of service is no longer its
// host's (phase.NodeGone), from the node list the pass read; "" for a host not
// out of service. The nodes by name are indexed once per pass, the first time
// a cycle's node is not listed as its host's.
func (s *snapshot) nodeGone(p store.Plan) string {
	if !p.Active() || p.NodeID == "" {
		return ""
	}
	n := s.nodes[p.NodeID]
	if n != nil && n.Name == p.Host && n.Status != api.NodeStatusDown {
		return "" // the common case: no index needed
	}
	if s.nodesByName == nil {
		s.nodesByName = make(map[string][]phase.ListedNode, len(s.nodes))
		for _, m := range s.nodes {
			s.nodesByName[m.Name] = append(s.nodesByName[m.Name], listedNode(m))
		}
	}
	var planNode *phase.ListedNode
	if n != nil {
		l := listedNode(n)
		planNode = &l
	}
	return phase.NodeGone(p.Host, p.NodeID, planNode, s.nodesByName[p.Host])
}

func listedNode(n *api.NodeListStub) phase.ListedNode {
	return phase.ListedNode{ID: n.ID, Name: n.Name, Status: n.Status, CreateIndex: n.CreateIndex}
}
