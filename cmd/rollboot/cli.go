package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/store"
)

// DefaultCLITimeout bounds every request of the commands that talk to Nomad.
const DefaultCLITimeout = 30 * time.Second

// normalizeArgs rewrites Nomad-style single-dash long flags ("-json",
// "-address=x") as double-dash ones for the command args run, so that every
// command takes both spellings. Single-letter flags and "--" and what follows
// are left alone.
func normalizeArgs(root *cobra.Command, args []string) []string {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		return args
	}
	cmd.InitDefaultHelpFlag()
	known := func(name string) bool {
		return cmd.Flags().Lookup(name) != nil || cmd.InheritedFlags().Lookup(name) != nil
	}
	return rewriteSingleDash(args, known)
}

func rewriteSingleDash(args []string, known func(string) bool) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' {
			name, _, _ := strings.Cut(a[1:], "=")
			if known(name) {
				a = "-" + a
			}
		}
		out = append(out, a)
	}
	return out
}

// connInfo is what an error hint may say about the connection (never a token).
type connInfo struct {
	Address, Namespace, Prefix string
	TokenSet                   bool
	Timeout                    time.Duration
	// token asks Nomad who the token is (whoseToken), once, when a hint
	// needs it; nil: not asked.
	token func() tokenInfo
}

// whose is what Nomad says of the token (tokenUnchecked when not asked).
func (c connInfo) whose() tokenInfo {
	if c.token == nil {
		return tokenInfo{}
	}
	return c.token()
}

func connInfoOf(cfg *config.Compiled, timeout time.Duration) connInfo {
	return connInfo{Address: cfg.Nomad.Address, Namespace: cfg.Nomad.Namespace, Prefix: cfg.State.Prefix,
		TokenSet: cfg.Nomad.Token != "", Timeout: timeout}
}

// explain adds a hint to an error from Nomad: what was talked to, and what to
// check. It returns err unchanged when it has nothing to add.
func explain(err error, c connInfo) error {
	if err == nil {
		return nil
	}
	var ure api.UnexpectedResponseError
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w\nhint: no answer from Nomad at %s within %s: is this the Nomad HTTP API address, and is the server up? (-timeout waits longer)",
			err, c.Address, c.Timeout)
	case errors.As(err, &ure) && ure.StatusCode() == 403:
		return fmt.Errorf("%w\nhint: permission denied at %s: %s", err, c.Address, deniedHint(c, c.whose()))
	case errors.As(err, &oe) && oe.Op == "dial":
		return fmt.Errorf("%w\nhint: cannot reach Nomad at %s: is the address right and the server up?", err, c.Address)
	case errors.As(err, &ure) && ure.StatusCode() == 404:
		return fmt.Errorf("%w\nhint: not found at %s: is this the Nomad HTTP API address (such as http://127.0.0.1:4646)?", err, c.Address)
	}
	return err
}

// addressHint explains an address Validate refused for lack of a scheme.
func addressHint(err error, address string) error {
	if err == nil || address == "" || strings.Contains(address, "://") {
		return err
	}
	return fmt.Errorf("%w\nhint: the Nomad address %q has no scheme: use \"http://%s\" (or https://)", err, address, address)
}

// nomadConn is what a command that talks to Nomad runs with: the configuration,
// loaded and compiled once, the Nomad client it names, and -timeout.
type nomadConn struct {
	cfg     *config.Compiled
	client  *api.Client
	timeout time.Duration
}

// store is rollboot's state at the namespace and prefix of the configuration.
func (n nomadConn) store() *store.Store { return daemon.Store(n.cfg, n.client) }

// clientRun is the body of a command that talks to Nomad.
type clientRun func(cmd *cobra.Command, args []string, n nomadConn) error

// clientCommand makes cmd a command that talks to Nomad: it takes -timeout
// (every request of the command ends by then), loads the configuration cf names,
// refuses when there is no rollboot state at the namespace and prefix it looks at
// (unless cmd is annotated emptyStateOK),
// runs run with what it loaded, and explains Nomad's errors. untimed, when not
// nil, says whether this run goes on until interrupted (status -watch): the
// command's context then has no deadline, and each of its reads takes -timeout
// itself.
func clientCommand(cf *configFlags, cmd *cobra.Command, run clientRun, untimed func() bool) *cobra.Command {
	var timeout time.Duration
	cmd.Flags().DurationVar(&timeout, "timeout", DefaultCLITimeout, "give up on Nomad after this long")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, err := cf.load()
		if err != nil {
			return addressHint(err, addressOf(*cf))
		}
		if timeout <= 0 {
			return fmt.Errorf("-timeout %s: must be positive", timeout)
		}
		parent := cmd.Context()
		ctx, cancel := context.WithTimeout(parent, timeout)
		defer cancel()
		c := connInfoOf(cfg, timeout)
		client, err := daemon.Client(cfg)
		if err != nil {
			return err
		}
		n := nomadConn{cfg: cfg, client: client, timeout: timeout}
		c.token = sync.OnceValue(func() tokenInfo { return whoseToken(ctx, client.ACLTokens()) })
		if err := checkState(ctx, cmd, n.store(), c); err != nil {
			return explain(err, c)
		}
		if untimed != nil && untimed() {
			ctx = parent
		}
		cmd.SetContext(ctx)
		return explain(run(cmd, args, n), c)
	}
	return cmd
}

// addressOf is the Nomad address the flags and environment name, before validation.
func addressOf(cf configFlags) string {
	if a, ok := cf.nomadFlags()["address"]; ok {
		return a
	}
	cfg := config.Default()
	if cf.path != "" {
		if c, err := config.Parse(cf.path); err == nil {
			cfg = c
		}
	}
	_ = cfg.ApplyEnv(os.Getenv)
	return cfg.Nomad.Address
}

// emptyStateOK is the annotation of a command that may run where the
// namespace and prefix hold no rollboot state yet: the first `policy apply`.
const emptyStateOK = "rollboot/empty-state-ok"

// checkState refuses to go on when the namespace and prefix hold no rollboot
// state at all (most often a wrong -prefix or -namespace): an empty table, or
// a pause nobody reads, would look like success.
func checkState(ctx context.Context, cmd *cobra.Command, st *store.Store, c connInfo) error {
	if cmd.Annotations[emptyStateOK] != "" {
		return nil
	}
	ok, err := st.HasState(ctx)
	if err != nil || ok {
		return err
	}
	return emptyStateError(c)
}

func emptyStateError(c connInfo) error {
	where := fmt.Sprintf("under prefix %q in namespace %q at %s", c.Prefix, c.Namespace, c.Address)
	switch t := c.whose(); t.kind {
	case tokenInvalid, tokenAnonymous:
		// Nomad lists nothing to a token it does not know or to anonymous
		// requests: the token, not the prefix, is what to fix.
		return fmt.Errorf("no rollboot state visible %s: %s", where, deniedHint(c, t))
	case tokenKnown:
		return fmt.Errorf("no rollboot state %s (no variable at all): check -prefix or state.prefix, -namespace, NOMAD_NAMESPACE or nomad.namespace, and that token %q may read them (Nomad lists only the variables a token may read; %s grants it); on a new cluster, state appears once an agent runs or `rollboot policy apply` stores a policy",
			where, t.name, operatorPolicy)
	}
	return fmt.Errorf("no rollboot state %s (no variable at all): check -prefix or state.prefix, -namespace, NOMAD_NAMESPACE or nomad.namespace; on a new cluster, state appears once an agent runs or `rollboot policy apply` stores a policy",
		where)
}

// hostCheck checks the host a command names before anything is stored.
type hostCheck func(ctx context.Context, st *store.Store, host string) error

// knownHostCheck: an unknown host is an error.
func knownHostCheck(ctx context.Context, st *store.Store, host string) error {
	_, err := knownHost(ctx, st, host)
	return err
}

// knownHost returns the plan of host (zero when none) if host has a record or a
// plan; otherwise an error naming the closest known hosts.
func knownHost(ctx context.Context, st *store.Store, host string) (store.Plan, error) {
	hosts, _, err := st.Hosts(ctx, 0, 0)
	if err != nil {
		return store.Plan{}, err
	}
	plans, err := st.Plans(ctx)
	if err != nil {
		return store.Plan{}, err
	}
	names := make([]string, 0, len(hosts)+len(plans))
	found := false
	for _, h := range hosts {
		names = append(names, h.Host)
		found = found || h.Host == host
	}
	for name := range plans {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		found = found || name == host
	}
	if !found {
		return store.Plan{}, unknownHostError(host, names)
	}
	return plans[host], nil
}

func unknownHostError(host string, names []string) error {
	msg := fmt.Sprintf("unknown host %q: no agent published it and rollboot never planned it", host)
	if m := closeMatches(host, names, 3); len(m) > 0 {
		msg += "; did you mean " + strings.Join(quoteAll(m), " or ") + "?"
	} else if len(names) == 0 {
		msg += " (no host is known at all)"
	}
	return errors.New(msg)
}

// releasable: release frees only a stuck host's slot.
func releasable(ctx context.Context, st *store.Store, host string) error {
	p, err := knownHost(ctx, st, host)
	if err != nil {
		return err
	}
	if p.Phase != store.PhaseStuck {
		phase := p.Phase
		if phase == "" {
			phase = store.PhaseIdle
		}
		return fmt.Errorf("host %q is %s, not stuck: release frees only a stuck host's slot (to withdraw a request, use rollboot cancel %s)", host, phase, host)
	}
	return nil
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// closeMatches returns up to n names close to name: the same ignoring case,
// containing it or contained in it, or within an edit distance of a third of its
// length (at least 1, at most 3), closest first.
func closeMatches(name string, names []string, n int) []string {
	type match struct {
		name string
		dist int
	}
	limit := min(max(len(name)/3, 1), 3)
	var ms []match
	lname := strings.ToLower(name)
	for _, c := range names {
		lc := strings.ToLower(c)
		d := editDistance(lname, lc)
		switch {
		case lc == lname:
			d = 0
		case strings.Contains(lc, lname) || strings.Contains(lname, lc):
			d = min(d, 1)
		}
		if d <= limit && c != name {
			ms = append(ms, match{c, d})
		}
	}
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].dist != ms[j].dist {
			return ms[i].dist < ms[j].dist
		}
		return ms[i].name < ms[j].name
	})
	out := []string{}
	for i := 0; i < len(ms) && i < n; i++ {
		out = append(out, ms[i].name)
	}
	return out
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
