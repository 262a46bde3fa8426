package nomadsim

// EmitNodeEvent adds an event to the node of host as its client reports one: a
// driver's or a CSI plugin's health that changed (client/node_updater.go
// updateNodeFromDriver, updateNodeFromCSIControllerLocked: subsystem "Driver"
// or "CSI", the health description as message), sent in a batch by the client
// (client/client.go watchNodeEvents → nomad/node_endpoint.go Node.EmitEvents).
// The server appends it, keeping the node's 10 newest events
// (nomad/state/state_store.go upsertNodeEvents, appendNodeEvents); the write
// moves the nodes table's index (watchers of the node wake, an event of type
// NodeStreamEvent goes to the event stream: nomad/state/events.go
// UpsertNodeEventsType → structs.TypeNodeEvent) but not the node's
// ModifyIndex, which upsertNodeEvents leaves as it was.
func (s *Sim) EmitNodeEvent(host, subsystem, message string, details map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := s.cluster.nodeOfHostLocked(host)
	if err != nil {
		return err
	}
	idx := s.bumpLocked()
	addNodeEvent(sn.node, subsystem, message, details, idx)
	s.cluster.topics.nodeWrittenLocked(sn.node.ID)
	s.cluster.nodesIndex = idx
	s.cluster.nodeEventLocked(sn.node, idx, eventNodeStatus)
	return nil
}
