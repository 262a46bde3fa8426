// Package e2e runs the real rollboot binary as separate processes, one agent per
// simulated host (and standalone coordinators where a test needs to kill one),
// against the Nomad emulator on real sockets, and checks the safety invariants with
// the independent checker over the emulator's event log.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/invariants"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simhost"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/storedpolicy"
)

var rollbootBin string

// agentJob is the system job the agents run as.
const agentJob = "rollboot"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rollboot-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	rollbootBin = filepath.Join(dir, "rollboot")
	build := exec.Command("go", "build", "-o", rollbootBin, "github.com/rollboot/rollboot/cmd/rollboot")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build rollboot:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// clusterOpts describe one test cluster.
type clusterOpts struct {
	clients      int
	pools        []string
	policy       string // HCL: drain, group and window blocks of the stored policy
	coordExtra   string // HCL attributes of the stored policy's coordinator block (rollout rules)
	coordOnly    string // HCL blocks added to the standalone coordinators' configuration only
	agentExtra   string // HCL attributes added to the agent block
	rebootExtra  string // HCL attributes added to agent.reboot
	coordinators int    // standalone coordinator processes; 0: agents are candidates
	keepSentinel bool
	jobs         []nomadsim.JobSpec
	migrateTime  time.Duration
	// servers: server hosts running Nomad, Consul and Vault servers, each with an
	// agent (as a service: they run no Nomad client).
	servers    int
	autoUnseal bool
	// simConfig, when set, adjusts the emulator's configuration.
	simConfig func(*nomadsim.Config)
	// agentEnv, when set, gives environment variables added to a host's agent
	// each time it starts (later ones win).
	agentEnv func(host string) []string
	// agentLostAfter is the agents' system job's disconnect.lost_after (0: none).
	agentLostAfter time.Duration
	// acl: the emulator enforces ACLs; every process gets the management token
	// in its configuration (and the tests check no log shows it).
	acl bool
	// rebootCommand replaces the agents' reboot command (argv). In it and in
	// rebootExtra, {{host}}, {{host_dir}}, {{bin}} and {{sim}} stand for the
	// host's name and folder, the rollboot binary and the emulator's address.
	rebootCommand []string
	// agentToken and coordToken, when set, replace the management token for the
	// agents and the standalone coordinators (security_test.go mints them through
	// the ACL API from the shipped policies).
	agentToken string
	coordToken string
	// serverAgentToken, when set, replaces agentToken for the agents of
	// server hosts (the rollboot-agent-server policy: autopilot health and
	// the server reboot lock).
	serverAgentToken string
	// fromSetup: the cluster starts empty (no agents' job); `rollboot setup`
	// registers the jobs, every process takes its allocation's workload
	// identity as NOMAD_TOKEN (agentEnv and runJobCoordinators, setup_test.go),
	// and the agents are no candidates.
	fromSetup bool
	// resync is coordinator.resync_interval (default 200ms). Tests of how fast
	// rollboot reacts use productionResync, so that no resync hides a missed wake-up.
	resync time.Duration
	// coordConfig, when set, gives HCL blocks added to one standalone
	// coordinator's configuration, by its name (coordinator-1, ...).
	coordConfig func(name string) string
}

// productionResync is the default coordinator.resync_interval.
const productionResync = 30 * time.Second

// Secrets given to every process; no log may show them.
const (
	consulToken = "consul-secret-3f1c9e"
	vaultToken  = "vault-secret-8b27d4"
)

type cluster struct {
	t      *testing.T
	sim    *nomadsim.Sim
	dir    string
	sup    *simhost.Supervisor
	st     *store.Store
	client *api.Client
	opts   clusterOpts

	mu     sync.Mutex
	logs   map[string]*bytes.Buffer // per process name
	coords map[string]*exec.Cmd
	// killed: processes the test stopped on purpose; exits lists the others
	// that ended while the test ran (name and status).
	killed map[string]bool
	// exited: coordinators whose process has ended (cmd.ProcessState is
	// written by Wait without the lock: read this instead).
	exited map[string]bool
	exits  []string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// shortTests are the cluster tests `go test -short` runs: one whole rollout of
// real agent processes against the emulator, so that the quick command still
// reboots a cluster for real. Every other cluster test (and the fault seeds)
// runs in the full suite, `go test -race ./...` (README).
var shortTests = map[string]bool{"TestFullRollout": true}

// skipInShort skips t under -short unless its test is one of shortTests. A
// test that checks what its subtests' clusters did calls it itself, before
// them; newCluster calls it for every other.
func skipInShort(t *testing.T) {
	t.Helper()
	if top, _, _ := strings.Cut(t.Name(), "/"); testing.Short() && !shortTests[top] {
		t.Skip("-short: a cluster of real processes; the full suite (go test -race ./...) runs it")
	}
}

func newCluster(t *testing.T, o clusterOpts) *cluster {
	t.Helper()
	skipInShort(t)
	if o.migrateTime == 0 {
		o.migrateTime = 100 * time.Millisecond
	}
	cfg := nomadsim.Config{
		ACL:                  o.acl,
		Servers:              o.servers,
		ConsulServers:        o.servers > 0,
		VaultServers:         o.servers > 0,
		VaultAutoUnseal:      o.autoUnseal,
		Clients:              o.clients,
		ClientPools:          o.pools,
		HeartbeatTTL:         150 * time.Millisecond,
		BootTime:             400 * time.Millisecond,
		MigrateTime:          o.migrateTime,
		KeepSentinelOnReboot: o.keepSentinel,
	}
	if o.simConfig != nil {
		o.simConfig(&cfg)
	}
	sim, err := nomadsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	// The agents are deployed as a Nomad system job, as in production: an agent
	// runs only while its node has a running allocation of this job.
	if !o.fromSetup {
		o.jobs = append([]nomadsim.JobSpec{{ID: agentJob, Type: "system", DisconnectLostAfter: o.agentLostAfter}}, o.jobs...)
	}
	for _, j := range o.jobs {
		if err := sim.AddJob(j); err != nil {
			t.Fatal(err)
		}
	}
	client, err := api.NewClient(&api.Config{Address: sim.Address(), SecretID: mgmtToken(sim)})
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, sim: sim, dir: t.TempDir(), client: client, opts: o,
		st:   store.New(client.Variables(), "rollboot", ""),
		logs: map[string]*bytes.Buffer{}, coords: map[string]*exec.Cmd{}, killed: map[string]bool{},
		exited: map[string]bool{}}
	var hosts []string
	for _, h := range sim.Hosts() {
		if h.NodeID != "" || h.Server != nil {
			hosts = append(hosts, h.Name)
		}
	}
	c.sup = &simhost.Supervisor{Sim: sim, Hosts: hosts, Start: c.runAgent, Job: agentJob}
	// The policy (policy and coordExtra) is stored as `rollboot policy apply`
	// stores it, before the test injects any fault.
	if pol := c.policySource(); pol != "" {
		c.applyPolicy(pol)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
	})
	// Registered after dumpLogs, so it runs before it (and after the processes
	// were stopped by start's cleanup): a spin it reports has its logs dumped.
	t.Cleanup(c.checkNoSpin)
	return c
}

// spinWarning is what the coordinator logs when it cuts a chain of passes that
// each reported a change with nothing else changing (coordinator.Run): a
// decision that does not settle.
const spinWarning = "decisions kept changing"

// checkNoSpin fails the test for every spin warning in any process's log: the
// standalone coordinators' and the agents' (an agent may lead as coordinator).
// A decision that reports a change each pass on the same input is a bug even
// when the rollout still completes.
func (c *cluster) checkNoSpin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := slices.Sorted(maps.Keys(c.logs))
	for _, name := range names {
		for line := range strings.Lines(c.logs[name].String()) {
			if strings.Contains(line, spinWarning) {
				c.t.Errorf("%s logged a spin (a decision that does not settle): %s", name, strings.TrimSpace(line))
			}
		}
	}
}

// start runs the agents (and coordinators) until the test ends.
func (c *cluster) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.sup.Run(ctx) }()
	for i := 0; i < c.opts.coordinators; i++ {
		c.startCoordinator(fmt.Sprintf("coordinator-%d", i+1))
	}
	c.t.Cleanup(func() {
		cancel()
		c.mu.Lock()
		for name, cmd := range c.coords {
			c.killed[name] = true
			cmd.Process.Signal(syscall.SIGCONT) // a stopped process cannot die
			cmd.Process.Kill()
		}
		c.mu.Unlock()
		c.wg.Wait()
	})
}

// policySource is the policy of clusterOpts: its blocks and rollout rules.
func (c *cluster) policySource() string {
	pol := c.opts.policy
	if strings.TrimSpace(c.opts.coordExtra) != "" {
		pol += "\ncoordinator {\n" + c.opts.coordExtra + "\n}\n"
	}
	return strings.TrimSpace(pol)
}

// applyPolicy stores src as the next version of the policy, through the code of
// `rollboot policy apply`, and returns it.
func (c *cluster) applyPolicy(src string) store.PolicyRecord {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := storedpolicy.Prepare(ctx, c.st, c.client.Nodes(), []byte(src), "policy.hcl")
	if err != nil {
		c.t.Fatalf("policy: %v", err)
	}
	rec, err := ch.Apply(ctx, c.st, "e2e", time.Now(), nil)
	if err != nil {
		c.t.Fatalf("apply the policy: %v", err)
	}
	return rec
}

// mgmtToken is the emulator's management token ("" without ACLs).
func mgmtToken(sim *nomadsim.Sim) string {
	if !sim.ACLEnabled() {
		return ""
	}
	return sim.ManagementToken()
}

// expand fills the placeholders of clusterOpts.rebootCommand and rebootExtra.
func (c *cluster) expand(s string, h nomadsim.Host) string {
	return strings.NewReplacer("{{host}}", h.Name, "{{host_dir}}", h.Dir, "{{bin}}", rollbootBin,
		"{{sim}}", c.sim.Address()).Replace(s)
}

func (c *cluster) configFor(host, address string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "nomad {\n  address = %q\n", address)
	// A minted token (agentToken, coordToken) comes through NOMAD_TOKEN instead,
	// and a token in the file would win over it.
	minted := (host != "" && c.opts.agentToken != "") || (host == "" && c.opts.coordToken != "") || c.opts.fromSetup
	if tok := mgmtToken(c.sim); tok != "" && !minted {
		fmt.Fprintf(&b, "  token = %q\n", tok)
	}
	if c.opts.fromSetup {
		// As the shipped jobs' configuration: the state namespace, not the
		// job's (NOMAD_NAMESPACE).
		b.WriteString("  namespace = \"default\"\n")
	}
	b.WriteString("}\n")
	// Agents stand for election unless standalone coordinators run; a
	// standalone coordinator's file leaves coordinator.enabled unset (false),
	// as the shipped coordinator job's does: `rollboot coordinator` stands
	// whatever it says.
	enabled := ""
	if host != "" {
		enabled = fmt.Sprintf("  enabled = %v\n", c.opts.coordinators == 0 && !c.opts.fromSetup)
	}
	resync := c.opts.resync
	if resync == 0 {
		resync = 200 * time.Millisecond
	}
	fmt.Fprintf(&b, "coordinator {\n%s  lock_ttl = \"10s\"\n  resync_interval = %q\n}\n",
		enabled, resync.String())
	if host == "" {
		b.WriteString(c.opts.coordOnly + "\n")
		return b.String()
	}
	h, _ := c.sim.Host(host)
	// The detectors look at the host's folder, not at the machine running the
	// tests: without an os-release file there, "auto" chooses none.
	fmt.Fprintf(&b, "agent {\n  host = %q\n  boot_id_file = %q\n  boot_time_file = %q\n  sentinel_file = %q\n  server_lock_file = %q\n  record_file = %q\n  detector_root = %q\n%s\n",
		host, filepath.Join(h.Dir, nomadsim.BootIDFile), filepath.Join(h.Dir, nomadsim.StatFile), filepath.Join(h.Dir, "reboot-required"),
		filepath.Join(h.Dir, "server-lock.json"), filepath.Join(h.Dir, "record.json"), h.Dir, c.opts.agentExtra)
	command := fmt.Sprintf("[%q, \"sim-ctl\", \"reboot\", \"--address\", %q, %q]", rollbootBin, c.sim.Address(), host)
	if len(c.opts.rebootCommand) > 0 {
		var args []string
		for _, a := range c.opts.rebootCommand {
			args = append(args, fmt.Sprintf("%q", c.expand(a, h)))
		}
		command = "[" + strings.Join(args, ", ") + "]"
	}
	fmt.Fprintf(&b, "  reboot {\n    method = \"command\"\n    command = %s\n%s\n  }\n}\n",
		command, c.expand(c.opts.rebootExtra, h))
	return b.String()
}

func (c *cluster) writeConfig(name, content string) string {
	p := filepath.Join(c.dir, name+".hcl")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return p
}

// logText is what the process name has logged so far, read under the lock its
// writers hold.
func (c *cluster) logText(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b := c.logs[name]; b != nil {
		return b.String()
	}
	return ""
}

func (c *cluster) logFor(name string) *bytes.Buffer {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.logs[name]
	if b == nil {
		b = &bytes.Buffer{}
		c.logs[name] = b
	}
	return b
}

// lockedWriter serializes writes of several processes into one buffer.
type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// runAgent runs `rollboot agent` for one boot of a host; a reboot kills it (SIGKILL).
func (c *cluster) runAgent(ctx context.Context, h nomadsim.Host) {
	path := c.writeConfig(h.Name, c.configFor(h.Name, "http://"+h.Addr))
	cmd := exec.CommandContext(ctx, rollbootBin, "agent", "--config", path, "--log-level", "debug")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	// The host's local Consul and Vault agents, as their usual variables say; a
	// host without them gets an address where nothing listens.
	consul, vault := "http://127.0.0.1:1", "http://127.0.0.1:1"
	if h.ConsulAddr != "" {
		consul = "http://" + h.ConsulAddr
	}
	if h.VaultAddr != "" {
		vault = "http://" + h.VaultAddr
	}
	cmd.Env = append(os.Environ(), "CONSUL_HTTP_ADDR="+consul, "VAULT_ADDR="+vault, "VAULT_TOKEN="+vaultToken,
		"CONSUL_HTTP_TOKEN="+consulToken)
	if h.NodeID != "" {
		// What Nomad sets in the task environment of the agents' system job.
		cmd.Env = append(cmd.Env, "NOMAD_JOB_ID="+agentJob, "NOMAD_NAMESPACE=default")
	}
	switch {
	case h.Server != nil && c.opts.serverAgentToken != "":
		cmd.Env = append(cmd.Env, "NOMAD_TOKEN="+c.opts.serverAgentToken)
	case c.opts.agentToken != "":
		cmd.Env = append(cmd.Env, "NOMAD_TOKEN="+c.opts.agentToken)
	}
	if c.opts.agentEnv != nil {
		cmd.Env = append(cmd.Env, c.opts.agentEnv(h.Name)...)
	}
	w := lockedWriter{&c.mu, c.logFor(h.Name)}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		c.t.Errorf("start agent on %s: %v", h.Name, err)
		return
	}
	err := cmd.Wait()
	if ctx.Err() == nil {
		// Neither a reboot nor the test stopped it: it ended by itself.
		c.mu.Lock()
		c.exits = append(c.exits, fmt.Sprintf("agent on %s: %v", h.Name, err))
		c.mu.Unlock()
	}
}

func (c *cluster) startCoordinator(name string) { c.startCoordinatorEnv(name, nil) }

// startCoordinatorEnv starts a standalone coordinator with env added to its
// environment.
func (c *cluster) startCoordinatorEnv(name string, env []string) {
	cfg := c.configFor("", c.sim.Address())
	if c.opts.coordConfig != nil {
		cfg += c.opts.coordConfig(name) + "\n"
	}
	path := c.writeConfig(name, cfg)
	cmd := exec.Command(rollbootBin, "coordinator", "--config", path, "--log-level", "debug")
	consul, vault := "http://127.0.0.1:1", "http://127.0.0.1:1"
	if c.opts.servers > 0 {
		consul, vault = c.sim.ConsulAddress(), c.sim.VaultAddress()
	}
	cmd.Env = append(os.Environ(), "CONSUL_HTTP_ADDR="+consul, "VAULT_ADDR="+vault, "VAULT_TOKEN="+vaultToken,
		"CONSUL_HTTP_TOKEN="+consulToken)
	if c.opts.coordToken != "" {
		cmd.Env = append(cmd.Env, "NOMAD_TOKEN="+c.opts.coordToken)
	}
	cmd.Env = append(cmd.Env, env...)
	w := lockedWriter{&c.mu, c.logFor(name)}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	c.mu.Lock()
	c.coords[name] = cmd
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		err := cmd.Wait()
		c.mu.Lock()
		defer c.mu.Unlock()
		c.exited[name] = true
		if !c.killed[name] {
			c.exits = append(c.exits, fmt.Sprintf("%s: %v", name, err))
		}
	}()
}

// leader returns the standalone coordinator that leads now (it logged its election last).
func (c *cluster) leader() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.coords {
		if c.exited[name] {
			continue
		}
		log := c.logs[name].String()
		if i := strings.LastIndex(log, "elected coordinator"); i >= 0 && !strings.Contains(log[i:], "stopped leading") {
			return name
		}
	}
	return ""
}

// killCoordinator kills a standalone coordinator process at once (SIGKILL).
func (c *cluster) killCoordinator(name string) {
	c.mu.Lock()
	cmd := c.coords[name]
	c.mu.Unlock()
	if cmd == nil {
		c.t.Fatalf("no coordinator %s", name)
	}
	c.mu.Lock()
	c.killed[name] = true
	c.mu.Unlock()
	_ = cmd.Process.Kill()
}

// signalCoordinator sends sig (SIGSTOP, SIGCONT) to a standalone coordinator. It
// returns os.ErrProcessDone when the process has ended (another fault killed it).
func (c *cluster) signalCoordinator(name string, sig syscall.Signal) error {
	c.mu.Lock()
	cmd := c.coords[name]
	c.mu.Unlock()
	if cmd == nil {
		c.t.Fatalf("no coordinator %s", name)
	}
	err := cmd.Process.Signal(sig)
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.t.Fatalf("signal %s: %v", name, err)
	}
	return err
}

// unexpectedExits lists the processes that ended by themselves.
func (c *cluster) unexpectedExits() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.exits...)
}

func (c *cluster) dumpLogs() {
	c.mu.Lock()
	defer c.mu.Unlock()
	// ROLLBOOT_E2E_LOGS=DIR keeps every process's whole log there, beside the
	// tails the test prints.
	dir := os.Getenv("ROLLBOOT_E2E_LOGS")
	for name, b := range c.logs {
		s := b.String()
		if dir != "" {
			_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(c.t.Name(), "/", "_")+"-"+name+".log"), []byte(s), 0o644)
		}
		if len(s) > 6000 {
			s = "..." + s[len(s)-6000:]
		}
		c.t.Logf("---- %s ----\n%s", name, s)
	}
}

// clients returns the names of the client hosts.
func (c *cluster) clients() []string {
	var out []string
	for _, h := range c.sup.Hosts {
		if hh, _ := c.sim.Host(h); hh.NodeID != "" {
			out = append(out, h)
		}
	}
	return out
}

// serverHosts returns the names of the server hosts.
func (c *cluster) serverHosts() []string {
	var out []string
	for _, h := range c.sup.Hosts {
		if hh, _ := c.sim.Host(h); hh.Server != nil {
			out = append(out, h)
		}
	}
	return out
}

func (c *cluster) needReboot(hosts ...string) {
	for _, h := range hosts {
		if err := c.sim.SetRebootRequired(h, "test"); err != nil {
			c.t.Fatal(err)
		}
	}
}

// within waits for cond like waitFor and returns how long it took since start. A
// reaction slower than half the resync interval fails the test: only a watch, not
// the resync, can explain a faster one, whatever the machine's speed.
func (c *cluster) within(what string, start time.Time, cond func() bool) time.Duration {
	c.t.Helper()
	c.waitFor(what, 2*productionResync, cond)
	took := time.Since(start)
	c.t.Logf("%s: %s", what, took.Round(time.Millisecond))
	if resync := c.opts.resync; resync > 0 && took > resync/2 {
		c.t.Errorf("%s took %s with resync_interval %s: it waited for a resync", what, took, resync)
	}
	return took
}

// waitFor polls cond (reading rollboot's state or the emulator) until it holds.
func (c *cluster) waitFor(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		c.sim.WaitIndex(ctx, c.sim.Index())
		cancel()
	}
}

func (c *cluster) plans() map[string]store.Plan {
	p, err := c.st.Plans(context.Background())
	if err != nil {
		return nil
	}
	return p
}

func (c *cluster) history() []store.HistoryRecord {
	h, _ := c.st.History(context.Background())
	return h
}

// rebootedAll: every host has a finished cycle in the history and is idle.
func (c *cluster) rebootedAll(hosts []string) func() bool {
	return func() bool {
		done := map[string]bool{}
		for _, r := range c.history() {
			if r.Outcome == "rebooted" {
				done[r.Host] = true
			}
		}
		plans := c.plans()
		for _, h := range hosts {
			if !done[h] || plans[h].Phase != store.PhaseIdle {
				return false
			}
		}
		return true
	}
}

// check runs the invariant checker over the emulator's event log.
func (c *cluster) check(spec invariants.Spec) invariants.Result {
	final := map[string]invariants.Final{}
	for _, h := range c.clients() {
		n, err := c.sim.Node(h)
		if err != nil {
			c.t.Fatal(err)
		}
		final[h] = invariants.FinalOf(n)
	}
	return invariants.Check(c.sim.Events(0), final, spec)
}

func (c *cluster) mustHold(spec invariants.Spec) invariants.Result {
	c.t.Helper()
	res := c.check(spec)
	for _, v := range res.Violations {
		c.t.Errorf("violation: %s", v)
	}
	return res
}

// groupsByPool maps each client host to its node pool.
func (c *cluster) groupsByPool() map[string]string {
	out := map[string]string{}
	for _, h := range c.clients() {
		n, err := c.sim.Node(h)
		if err != nil {
			c.t.Fatal(err)
		}
		out[h] = n.NodePool
	}
	return out
}

func allTrue(hosts []string) map[string]bool {
	m := map[string]bool{}
	for _, h := range hosts {
		m[h] = true
	}
	return m
}

func each(hosts []string, n int) map[string]int {
	m := map[string]int{}
	for _, h := range hosts {
		m[h] = n
	}
	return m
}

func storeFor(t *testing.T, sim *nomadsim.Sim) *store.Store {
	t.Helper()
	return store.New(apiClientFor(t, sim).Variables(), "rollboot", "")
}

// apiClientFor is a Nomad client of the emulator, without a token.
func apiClientFor(t *testing.T, sim *nomadsim.Sim) *api.Client {
	t.Helper()
	client, err := api.NewClient(&api.Config{Address: sim.Address()})
	if err != nil {
		t.Fatal(err)
	}
	return client
}
