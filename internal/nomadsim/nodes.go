package nomadsim

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// clusterState is the Nomad state store part the emulator models: nodes, jobs and
// allocations. Every field is guarded by Sim.mu.
type clusterState struct {
	nodes      map[string]*simNode // by node ID
	nodesIndex uint64              // index of the "nodes" table (state.Index("nodes"))

	jobs     map[jobKey]*simJob
	jobOrder []jobKey

	allocs     map[string]*simAlloc // by alloc ID
	allocOrder []string             // creation order
	// byNode: by node ID, the IDs of its allocations in creation order (the
	// state store's allocs "node_prefix" index, which allocsByNodeTxn reads):
	// a node's allocations without a walk over every allocation.
	byNode      map[string][]string
	allocsIndex uint64 // index of the "allocs" table

	// batchIdx is the index shared by the writes of one batch (one tick phase),
	// as Nomad batches client alloc updates and plan results into one Raft apply.
	batchIdx uint64

	rebootGen map[string]int // per host: bumped on every reboot

	hb heartbeats // the leader's heartbeat timers (heartbeat.go)

	// topics wakes the blocking queries of what a write changes (watch.go).
	topics *topics
	// stream is the event broker: its buffer and subscriptions (eventstream.go).
	stream *eventBroker
	// cache holds what the node list computes from each node (nodecache.go).
	cache nodeCache
	// byHost are the nodes in host order (sortedNodesLocked).
	byHost []*simNode

	drainRound uint64 // drainer rounds so far (drain.go)
	// sched: the scheduler's inputs as its last round left them (scheduleDue).
	sched schedInputs

	wl workloadState // deployments and blocked evaluations (deployments.go, evals.go)
}

// simNode is a node and the emulator's own bookkeeping for it.
type simNode struct {
	node *api.Node
	host *Host

	staticMeta  map[string]string  // client config meta
	dynamicMeta map[string]*string // /v1/client/metadata (persists across reboots)
	metaPending bool               // dynamic meta not yet sent to the servers
}

func (c *clusterState) init() {
	c.nodes = map[string]*simNode{}
	c.jobs = map[jobKey]*simJob{}
	c.allocs = map[string]*simAlloc{}
	c.rebootGen = map[string]int{}
	c.wl.init()
}

// start runs the cluster loop: client alloc updates, the scheduler and the drainer.
// Nomad's drainer reacts to state changes; a tick of MigrateTime/2 is close enough
// for allocations that take MigrateTime to stop or start.
func (c *clusterState) start(s *Sim) {
	tick := s.cfg.MigrateTime / 2
	if tick < time.Millisecond {
		tick = time.Millisecond
	}
	s.every(tick, func(now time.Time) { c.tickLocked(s, now) })
}

// tickLocked is one round of the cluster: clients report alloc progress, the
// drainer marks allocs and completes drains, the scheduler places allocs.
func (c *clusterState) tickLocked(s *Sim, now time.Time) {
	c.clientUpdatesLocked(s, now)
	c.drainLocked(s, now)
	if c.scheduleDue() {
		c.scheduleLocked(s, now)
	}
	c.wl.watchDeploymentsLocked(s)
}

// writeLocked returns the index of the current write batch, starting a new Raft
// apply (bumpLocked) the first time it is called in a batch.
func (c *clusterState) writeLocked(s *Sim) uint64 {
	if c.batchIdx == 0 {
		c.batchIdx = s.bumpLocked()
	}
	return c.batchIdx
}

// endBatch closes the current write batch and publishes its node events as
// one item of the event stream, as Nomad publishes one per Raft apply.
func (c *clusterState) endBatch() {
	c.batchIdx = 0
	c.stream.flushLocked()
}

// registerNodeLocked registers the client of host h (client/client.go registerNode →
// nomad/node_endpoint.go Node.Register). The node starts ready and eligible with a
// "Node registered" event.
func (c *clusterState) registerNodeLocked(s *Sim, h *Host, pool string) string {
	idx := s.bumpLocked()
	id := s.uuidLocked()
	now := time.Now()
	n := &api.Node{
		ID:         id,
		Datacenter: s.cfg.Datacenter,
		Name:       h.Name,
		HTTPAddr:   h.Addr,
		// client/fingerprint/host.go, nomad.go, cpu.go, network.go.
		Attributes: map[string]string{
			"unique.hostname":           h.Name,
			"unique.host_id":            s.uuidLocked(),
			"unique.network.ip-address": addrHost(h.Addr),
			"os.name":                   "ubuntu",
			"os.version":                "24.04",
			"os.signals":                "SIGHUP,SIGINT,SIGKILL,SIGTERM",
			"kernel.name":               "linux",
			"kernel.arch":               "x86_64",
			"kernel.version":            "6.8.0-60-generic",
			"cpu.arch":                  "amd64",
			"cpu.numcores":              "4",
			"nomad.version":             s.cfg.NomadVersion,
			"nomad.advertise.address":   h.Addr,
			"driver.exec":               "1",
			"driver.raw_exec":           "1",
			"unique.storage.volume":     "/dev/sda1",
			"nomad.service_discovery":   "true",
			"nomad.bridge.hairpin_mode": "false",
			"unique.cgroup.mountpoint":  "/sys/fs/cgroup",
			"os.cgroups.version":        "2",
		},
		Meta:                  map[string]string{},
		NodePool:              pool,
		SchedulingEligibility: api.NodeSchedulingEligible,
		Status:                api.NodeStatusReady,
		StatusUpdatedAt:       now.Unix(),
		Drivers: map[string]*api.DriverInfo{
			"exec":     {Detected: true, Healthy: true, HealthDescription: "Healthy", UpdateTime: now, Attributes: map[string]string{"driver.exec": "1"}},
			"raw_exec": {Detected: true, Healthy: true, HealthDescription: "Healthy", UpdateTime: now, Attributes: map[string]string{"driver.raw_exec": "1"}},
		},
		CreateIndex: idx,
		ModifyIndex: idx,
	}
	if slices.Contains(s.cfg.NoRawExec, h.Name) {
		// raw_exec is off unless the client's plugin block enables it: its
		// fingerprint is then HealthStateUndetected, "disabled", with no
		// attribute (drivers/rawexec/driver.go buildFingerprint), which the
		// client records as a driver not detected and not healthy
		// (client/pluginmanager/drivermanager/instance.go; client/node_updater.go
		// updateNodeFromDriver).
		n.Drivers["raw_exec"] = &api.DriverInfo{HealthDescription: "disabled", UpdateTime: now, Attributes: map[string]string{}}
		delete(n.Attributes, "driver.raw_exec")
	}
	n.NodeResources, n.ReservedResources = nodeResources(s.cfg.clientResources(h.Name))
	addNodeEvent(n, "Cluster", "Node registered", nil, idx)
	sn := &simNode{node: n, host: h, staticMeta: map[string]string{}, dynamicMeta: map[string]*string{}}
	c.nodes[id] = sn
	c.touchNodeLocked(n, idx, eventNodeRegistration)
	c.acceptHeartbeatLocked(s, sn, now) // Node.Register starts the heartbeat timer
	return id
}

func addrHost(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

// maxRetainedNodeEvents is structs.MaxRetainedNodeEvents: the server keeps the
// last 10 node events (nomad/state/state_store.go appendNodeEvents).
const maxRetainedNodeEvents = 10

func addNodeEvent(n *api.Node, subsystem, msg string, details map[string]string, idx uint64) {
	n.Events = append(n.Events, &api.NodeEvent{
		Message: msg, Subsystem: subsystem, Details: details, Timestamp: time.Now(), CreateIndex: idx,
	})
	if len(n.Events) > maxRetainedNodeEvents {
		n.Events = append([]*api.NodeEvent(nil), n.Events[len(n.Events)-maxRetainedNodeEvents:]...)
	}
}

// touchNodeLocked records a write to n at index idx, of the event type typ
// (the type nomad/state/events.go gives the write's message type). Every
// encoding of a node in Nomad's answers (node read, event payload) carries the
// legacy Drain flag, true while a drain strategy is set: the JSON extension
// nomad/structs/extensions.go nodeExt adds it; the emulator keeps it on the
// stored node.
func (c *clusterState) touchNodeLocked(n *api.Node, idx uint64, typ string) {
	n.Drain = n.DrainStrategy != nil
	n.ModifyIndex = idx
	c.wl.triggers.nodeWrittenLocked(n, typ) // evals.go
	c.topics.nodeWrittenLocked(n.ID)
	c.nodesIndex = idx
	c.nodeEventLocked(n, idx, typ)
}

// numAllocsLocked is the number of allocations the client on nodeID runs
// (stats.client.num_allocations).
func (c *clusterState) numAllocsLocked(nodeID string) int {
	n := 0
	for _, id := range c.byNode[nodeID] {
		if a := c.allocs[id]; a.a.NodeID == nodeID && !allocClientTerminal(a.a) {
			n++
		}
	}
	return n
}

// nodeReady is structs.Node.Ready (nomad/structs/structs.go): status ready, no drain
// strategy and eligible for scheduling. Only such nodes get new allocations.
func nodeReady(n *api.Node) bool {
	return n.Status == api.NodeStatusReady && n.DrainStrategy == nil &&
		n.SchedulingEligibility == api.NodeSchedulingEligible
}

// ---- test and demo knobs ---------------------------------------------------------

// SetNodeMeta sets static client meta on the node of host (the client config's
// `meta` block; an empty value removes the key) and re-registers it at once.
func (s *Sim) SetNodeMeta(host string, meta map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := s.cluster.nodeOfHostLocked(host)
	if err != nil {
		return err
	}
	for k, v := range meta {
		if v == "" {
			delete(sn.staticMeta, k)
		} else {
			sn.staticMeta[k] = v
		}
	}
	sn.node.Meta = mergeNodeMeta(sn.staticMeta, sn.dynamicMeta)
	s.cluster.touchNodeLocked(sn.node, s.bumpLocked(), eventNodeRegistration)
	return nil
}

// SetNodeClass sets the node class of host's node (client config node_class).
func (s *Sim) SetNodeClass(host, class string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := s.cluster.nodeOfHostLocked(host)
	if err != nil {
		return err
	}
	sn.node.NodeClass = class
	s.cluster.touchNodeLocked(sn.node, s.bumpLocked(), eventNodeRegistration)
	return nil
}

// Node returns a copy of the Nomad node of host.
func (s *Sim) Node(host string) (*api.Node, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, err := s.cluster.nodeOfHostLocked(host)
	if err != nil {
		return nil, err
	}
	return cloneAPI(sn.node), nil
}

func (c *clusterState) nodeOfHostLocked(host string) (*simNode, error) {
	for _, sn := range c.nodes {
		if sn.host.Name == host {
			return sn, nil
		}
	}
	return nil, fmt.Errorf("host %q runs no Nomad client", host)
}

// Node returns a copy of the node with the given ID.
func (v *View) Node(id string) (*api.Node, bool) {
	sn, ok := v.s.cluster.nodes[id]
	if !ok {
		return nil, false
	}
	return cloneAPI(sn.node), true
}

// Allocs returns copies of the allocations on nodeID ("" for every node), in
// creation order.
func (v *View) Allocs(nodeID string) []*api.Allocation {
	var out []*api.Allocation
	for _, id := range v.s.cluster.allocOrder {
		a := v.s.cluster.allocs[id].a
		if nodeID == "" || a.NodeID == nodeID {
			out = append(out, cloneAPI(a))
		}
	}
	return out
}

// RunningAlloc returns the ID of a running allocation of job on nodeID, if any.
// It copies nothing, so it is cheap enough for WaitFor conditions.
func (v *View) RunningAlloc(nodeID, job string) (string, bool) {
	for _, id := range v.s.cluster.allocOrder {
		a := v.s.cluster.allocs[id].a
		if a.NodeID == nodeID && a.JobID == job && a.DesiredStatus == api.AllocDesiredStatusRun &&
			a.ClientStatus == api.AllocClientStatusRunning {
			return a.ID, true
		}
	}
	return "", false
}

// cloneAPI deep-copies an api value through its wire form.
func cloneAPI[T any](v *T) *T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return &out
}

// ---- HTTP --------------------------------------------------------------------------

func (s *Sim) registerNodeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/v1/nodes", methods(s.handleNodes, http.MethodGet))
	mux.HandleFunc("/v1/node/", s.handleNodeSpecific)
	// command/agent/meta_endpoint.go NodeMetaRequest: GET reads, POST applies; any
	// other method is 405.
	mux.HandleFunc("/v1/client/metadata", methods(s.handleClientMeta, http.MethodGet, http.MethodPost))
}

// handleNodeSpecific dispatches /v1/node/:id[/...] (command/agent/node_endpoint.go
// NodeSpecificRequest).
func (s *Sim) handleNodeSpecific(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/node/")
	switch {
	case strings.HasSuffix(rest, "/drain"):
		methods(func(w http.ResponseWriter, r *http.Request) {
			s.handleNodeDrain(w, r, strings.TrimSuffix(rest, "/drain"))
		}, http.MethodPut, http.MethodPost)(w, r)
	case strings.HasSuffix(rest, "/eligibility"):
		methods(func(w http.ResponseWriter, r *http.Request) {
			s.handleNodeEligibility(w, r, strings.TrimSuffix(rest, "/eligibility"))
		}, http.MethodPut, http.MethodPost)(w, r)
	case strings.HasSuffix(rest, "/allocations"):
		methods(func(w http.ResponseWriter, r *http.Request) {
			s.handleNodeAllocs(w, r, strings.TrimSuffix(rest, "/allocations"))
		}, http.MethodGet)(w, r)
	case rest != "" && !strings.Contains(rest, "/"):
		methods(func(w http.ResponseWriter, r *http.Request) {
			s.handleNodeGet(w, r, rest)
		}, http.MethodGet)(w, r)
	default:
		simhttp.WriteError(w, http.StatusNotFound, "Invalid URL")
	}
}

// handleNodes answers GET /v1/nodes (nomad/node_endpoint.go Node.List). The filter
// is evaluated against the full node, as the paginator does
// (nomad/state/paginator/paginator.go), again only for a node that changed since
// (nodecache.go); pages are ordered by node ID, the ID being the next token
// (paginator.StructsTokenizer WithID).
func (s *Sim) handleNodes(w http.ResponseWriter, r *http.Request) {
	if s.authorize(w, r, func(t *Token) bool { return t.AllowNode(false) }) == nil {
		return
	}
	q := r.URL.Query()
	prefix := q.Get("prefix")
	if prefix != "" {
		// NodesByIDPrefix uses go-memdb's UUIDFieldIndex, which needs an even
		// number of hex digits (the CLI trims the prefix with sanitizeUUIDPrefix).
		if err := checkUUIDPrefix(prefix); err != nil {
			simhttp.WriteError(w, http.StatusInternalServerError, "node lookup failed: "+err.Error())
			return
		}
	}
	var filter *nodeFilter
	if f := q.Get("filter"); f != "" {
		s.mu.Lock()
		nf, err := s.cluster.cache.filterLocked(f)
		s.mu.Unlock()
		if err != nil {
			simhttp.WriteError(w, http.StatusBadRequest, "failed to create result paginator: "+err.Error())
			return
		}
		filter = nf
	}
	perPage, _ := strconv.Atoi(q.Get("per_page"))
	nextToken := q.Get("next_token")
	reverse := q.Get("reverse") == "true"
	withOS := q.Get("os") == "true"
	withRes := q.Get("resources") == "true"

	var token string
	s.blockingReadWatch(w, r, new(s.watchNodePrefix(prefix)), func() (any, uint64, error) {
		ids := s.cluster.cache.idsLocked(s.cluster.nodes)
		if reverse {
			ids = slices.Clone(ids)
			slices.Reverse(ids)
		}
		out := rawArray{}
		token = ""
		for _, id := range ids {
			if prefix != "" && !strings.HasPrefix(id, prefix) {
				continue
			}
			if nextToken != "" && ((!reverse && id < nextToken) || (reverse && id > nextToken)) {
				continue
			}
			sn := s.cluster.nodes[id]
			if filter != nil {
				ok, err := filter.matchLocked(sn)
				if err != nil {
					return nil, 0, simhttp.Code(http.StatusBadRequest, "failed to read result page: %v", err)
				}
				if !ok {
					continue
				}
			}
			if perPage > 0 && len(out) == perPage {
				token = id
				break
			}
			out = append(out, s.cluster.cache.stubLocked(sn, withOS, withRes))
		}
		if token != "" {
			w.Header().Set("X-Nomad-NextToken", token)
		} else {
			w.Header().Del("X-Nomad-NextToken")
		}
		return out, s.cluster.nodesIndex, nil
	})
}

func checkUUIDPrefix(p string) error {
	clean := strings.ReplaceAll(p, "-", "")
	if len(p) > 36 {
		return fmt.Errorf("Invalid UUID length. UUID have 36 characters; got %d", len(p))
	}
	if len(clean)%2 != 0 {
		return fmt.Errorf("Input (without hyphens) must be even length")
	}
	if _, err := hex.DecodeString(clean); err != nil {
		return fmt.Errorf("Invalid UUID: %v", err)
	}
	return nil
}

// nodeStub is structs.Node.Stub (nomad/structs/structs.go).
func nodeStub(n *api.Node, withOS, withRes bool) *api.NodeListStub {
	st := &api.NodeListStub{
		Address:               addrHost(n.HTTPAddr),
		ID:                    n.ID,
		Datacenter:            n.Datacenter,
		Name:                  n.Name,
		NodeClass:             n.NodeClass,
		NodePool:              n.NodePool,
		Version:               n.Attributes["nomad.version"],
		Drain:                 n.DrainStrategy != nil,
		SchedulingEligibility: n.SchedulingEligibility,
		Status:                n.Status,
		StatusDescription:     n.StatusDescription,
		Drivers:               n.Drivers,
		LastDrain:             n.LastDrain,
		CreateIndex:           n.CreateIndex,
		ModifyIndex:           n.ModifyIndex,
	}
	if withOS {
		st.Attributes = map[string]string{"os.name": n.Attributes["os.name"]}
	}
	if withRes {
		st.NodeResources = n.NodeResources
		st.ReservedResources = n.ReservedResources
	}
	return cloneAPI(st)
}

// handleNodeGet answers GET /v1/node/:id (Node.GetNode): exact ID, 404 "node not
// found", index = the node's ModifyIndex.
func (s *Sim) handleNodeGet(w http.ResponseWriter, r *http.Request, id string) {
	if s.authorize(w, r, func(t *Token) bool { return t.AllowNode(false) }) == nil {
		return
	}
	s.blockingRead(w, r, func() (any, uint64, error) {
		sn, ok := s.cluster.nodes[id]
		if !ok {
			// Node.GetNode answers with the nodes table index and no node; the
			// HTTP layer then turns that into 404. A blocking query on an unknown
			// node therefore blocks like any other.
			return nil, 0, &indexedError{err: simhttp.Code(http.StatusNotFound, "node not found"), index: s.cluster.nodesIndex}
		}
		return rawJSON(encodeLocked(sn.node)), sn.node.ModifyIndex, nil
	})
}

// handleNodeAllocs answers GET /v1/node/:id/allocations (Node.GetAllocs): full
// allocations with their job; allocations in namespaces where the token lacks
// read-job are dropped silently; an unknown node is an empty list. The index is
// the highest alloc ModifyIndex, or the allocs table index when there is none.
func (s *Sim) handleNodeAllocs(w http.ResponseWriter, r *http.Request, id string) {
	t := s.authorize(w, r, func(t *Token) bool { return t.AllowNode(false) })
	if t == nil {
		return
	}
	s.blockingReadWatch(w, r, new(s.watchNodeAllocs(id)), func() (any, uint64, error) {
		out := rawArray{}
		var idx uint64
		for _, aid := range s.cluster.byNode[id] {
			a := s.cluster.allocs[aid].a
			if a.NodeID != id {
				continue
			}
			idx = max(idx, a.ModifyIndex)
			if t.AllowNamespace(a.Namespace, "read-job") {
				out = append(out, encodeLocked(a))
			}
		}
		if idx == 0 {
			idx = max(s.cluster.allocsIndex, 1)
		}
		return out, idx, nil
	})
}

// ---- /v1/client/metadata -------------------------------------------------------------

// handleClientMeta serves GET and POST /v1/client/metadata (Nomad >= 1.5.0:
// command/agent/meta_endpoint.go nodeMetaRead / nodeMetaApply). A bad body is 400
// before anything else; then the agent picks who answers (command/agent/http.go
// rpcHandlerForNode): its own client when node_id is empty or names its node,
// otherwise the servers (nomad/client_meta_endpoint.go), which forward the request
// to the node's client. The client checks the token again and validates the
// request (client/meta_endpoint.go). No index header is sent.
func (s *Sim) handleClientMeta(w http.ResponseWriter, r *http.Request) {
	write := r.Method == http.MethodPost
	nodeID := r.URL.Query().Get("node_id")
	var req api.NodeMetaApplyRequest
	if write {
		if err := decodeBody(r, &req); err != nil {
			simhttp.WriteErr(w, err)
			return
		}
		// parseNode: the node_id query parameter wins over the body's NodeID.
		if nodeID == "" {
			nodeID = req.NodeID
		}
	}
	s.mu.Lock()
	out, err := s.clientMetaLocked(r, nodeID, write, req.Meta)
	s.mu.Unlock()
	if err != nil {
		simhttp.WriteErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// clientMetaLocked routes and answers one metadata request.
func (s *Sim) clientMetaLocked(r *http.Request, nodeID string, write bool, meta map[string]*string) (*api.NodeMetaResponse, error) {
	local := requestHost(r)
	useLocal := local != nil && local.NodeID != "" && (nodeID == "" || nodeID == local.NodeID)
	if !useLocal && nodeID == "" {
		return nil, simhttp.Code(http.StatusBadRequest, "No local Node and node_id not provided")
	}
	// nomad/client_meta_endpoint.go: a failed Authenticate (an unknown secret)
	// is reported as "Permission denied" by the servers; the client's own
	// ResolveToken reports "ACL token not found".
	resolve := s.tokenLocked
	if useLocal {
		resolve = s.agentTokenLocked
	}
	t, err := resolve(r)
	if err != nil {
		return nil, err
	}
	if !t.AllowNode(write) { // AllowNodeWrite / AllowNodeRead, on server and client
		return nil, errPermissionDenied
	}
	if useLocal {
		nodeID = local.NodeID
	}
	sn, ok := s.cluster.nodes[nodeID]
	if !ok {
		// nomad/client_rpc.go forwardClientRPC → util.go getNodeForRpc: a plain
		// RPC error, hence 500.
		return nil, fmt.Errorf("Unknown node %s", nodeID)
	}
	if !useLocal && !clientConnected(sn) {
		// No server holds a connection to the client (findNodeConnAndForward):
		// structs.ErrNoNodeConn, which the HTTP agent turns into 404.
		return nil, simhttp.Code(http.StatusNotFound, "No path to node")
	}
	if write {
		if err := validateNodeMeta(meta); err != nil {
			return nil, simhttp.Code(http.StatusBadRequest, "%s", err.Error())
		}
		s.applyNodeMetaLocked(sn, meta)
	}
	return &api.NodeMetaResponse{
		Meta:    mergeNodeMeta(sn.staticMeta, sn.dynamicMeta),
		Dynamic: maps.Clone(sn.dynamicMeta),
		Static:  maps.Clone(sn.staticMeta),
	}, nil
}

// clientConnected reports whether a server holds a connection to the node's
// client (nomad/client_rpc.go getNodeConn). The client opens it when it registers
// at boot (nomad/node_endpoint.go Register and UpdateStatus call addNodeConn) and
// loses it when its host goes down. The node's status does not matter: after a
// boot the client is connected while the node is still down or disconnected,
// until its first heartbeat changes that.
func clientConnected(sn *simNode) bool {
	return sn.host.Up
}

// applyNodeMetaLocked is client/meta_endpoint.go NodeMeta.Apply: the dynamic meta
// takes the new values; a null deletes the key from it, except for a key that is
// also static, whose null stays as a tombstone so that its removal survives a
// restart (dynamic meta persists in the client's state DB). The client then
// triggers a node update: its servers get the merged meta with the next
// re-registration, batched over 5-10s (client/client.go watchNodeUpdates,
// nodeUpdateRetryIntv plus stagger); HeartbeatTTL/2 here.
func (s *Sim) applyNodeMetaLocked(sn *simNode, meta map[string]*string) {
	for k, v := range meta {
		_, static := sn.staticMeta[k]
		switch {
		case v == nil && !static:
			delete(sn.dynamicMeta, k)
		case v == nil:
			sn.dynamicMeta[k] = nil
		default:
			val := *v
			sn.dynamicMeta[k] = &val
		}
	}
	if !sn.metaPending {
		sn.metaPending = true
		s.after(s.cfg.HeartbeatTTL/2, func() { s.cluster.syncMetaLocked(s, sn) })
	}
}

// syncMetaLocked sends the client's merged meta to the servers (a node update).
// A host that is down sends it when it registers again.
func (c *clusterState) syncMetaLocked(s *Sim, sn *simNode) {
	if !sn.metaPending || !sn.host.Up {
		return
	}
	sn.metaPending = false
	sn.node.Meta = mergeNodeMeta(sn.staticMeta, sn.dynamicMeta)
	c.touchNodeLocked(sn.node, s.bumpLocked(), eventNodeRegistration)
}

func mergeNodeMeta(static map[string]string, dynamic map[string]*string) map[string]string {
	out := maps.Clone(static)
	if out == nil {
		out = map[string]string{}
	}
	for k, v := range dynamic {
		if v == nil {
			delete(out, k)
		} else {
			out[k] = *v
		}
	}
	return out
}

// validateNodeMeta is structs.NodeMetaApplyRequest.Validate (nomad/structs/node.go):
// Meta must be non-empty and every key a dotted HCL identifier.
func validateNodeMeta(meta map[string]*string) error {
	if len(meta) == 0 {
		return fmt.Errorf("missing required Meta object")
	}
	keys := slices.Sorted(maps.Keys(meta))
	for _, k := range keys {
		if k == "" {
			return fmt.Errorf("metadata keys must not be empty")
		}
		for _, part := range strings.Split(k, ".") {
			if !hclsyntax.ValidIdentifier(part) {
				return fmt.Errorf("metadata key %q is not a valid identifier", k)
			}
		}
	}
	return nil
}

// sortedNodesLocked returns the nodes in host order. Hosts keep their order and
// nodes are never removed, so the order is computed again only when a node
// registered; callers must not modify the slice.
func (c *clusterState) sortedNodesLocked(s *Sim) []*simNode {
	if len(c.byHost) == len(c.nodes) {
		return c.byHost
	}
	out := make([]*simNode, 0, len(c.nodes))
	for _, h := range s.sortedHostsLocked() {
		if sn, ok := c.nodes[h.NodeID]; ok && h.NodeID != "" {
			out = append(out, sn)
		}
	}
	c.byHost = out
	return out
}
