package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rollboot/rollboot/internal/approvalhook"
	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/coordinator"
	"github.com/rollboot/rollboot/internal/phase"
	"github.com/rollboot/rollboot/internal/policy"
	"github.com/rollboot/rollboot/internal/rules"
	"github.com/rollboot/rollboot/internal/sideoutput"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/storedpolicy"
)

// storedPolicy is the coordinator's source of the stored policy: the policy
// variable, parsed and checked as `rollboot policy apply` checks it, over the
// coordinator's local configuration. It compiles a version once.
type storedPolicy struct {
	st    *store.Store
	local *config.Compiled

	mu     sync.Mutex
	index  uint64 // ModifyIndex of the record compiled last
	rules  rules.Rules
	invErr error
}

// Rules implements coordinator.PolicySource. A stored version is compiled once.
func (p *storedPolicy) Rules(ctx context.Context) (rules.Rules, error) {
	rec, err := p.st.Policy(ctx)
	if err != nil {
		cfg, version, err := inForce(p.local, rec, err)
		if err != nil {
			return rules.Rules{}, err
		}
		return coordinatorRules(cfg, version), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if rec.ModifyIndex != p.index {
		cfg, version, err := inForce(p.local, rec, nil)
		p.rules, p.invErr = rules.Rules{}, err
		if err == nil {
			p.rules = coordinatorRules(cfg, version)
		}
		p.index = rec.ModifyIndex
	}
	return p.rules, p.invErr
}

// inForce is the local configuration with the rules of the stored policy rec,
// as read with err: the safe default's when none is stored, and a
// coordinator.InvalidPolicyError when it cannot be used (unreadable, or it fails
// its checks). Any other read error is returned as is.
func inForce(local *config.Compiled, rec store.PolicyRecord, err error) (*config.Compiled, int, error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return local.With(config.DefaultRules()), 0, nil
	case errors.Is(err, store.ErrUnreadable), errors.Is(err, store.ErrUnknownVersion):
		return nil, rec.Version, &coordinator.InvalidPolicyError{Version: rec.Version, Err: err}
	case err != nil:
		return nil, 0, err
	}
	r, err := storedpolicy.Compile(rec)
	if err != nil {
		return nil, rec.Version, &coordinator.InvalidPolicyError{Version: rec.Version, Err: err}
	}
	return local.With(r), rec.Version, nil
}

// groups are the stored policy's groups, for the FleetLock server: the safe
// default's when none is stored, an error when it cannot be used.
func (p *storedPolicy) groups(ctx context.Context) (policy.Policy, error) {
	r, err := p.Rules(ctx)
	if err != nil {
		return policy.Policy{}, err
	}
	out := policy.Policy{Default: r.DefaultGroup}
	for _, g := range r.Groups {
		out.Groups = append(out.Groups, g.Group)
	}
	return out, nil
}

// Watch implements coordinator.PolicySource.
func (p *storedPolicy) Watch(ctx context.Context, index uint64, wait time.Duration) (uint64, error) {
	return p.st.WatchPolicy(ctx, index, wait)
}

// coordinatorRules are the coordinator's rules from a configuration: its
// compiled groups and timings as they are.
func coordinatorRules(cfg *config.Compiled, version int) rules.Rules {
	return rules.Rules{
		Version:      version,
		Groups:       withGroupOptions(groupSpecs(cfg.Policy), cfg),
		DefaultGroup: cfg.Policy.Default,
		Timing: phase.Timing{
			DrainDeadline:   cfg.Drain.Deadline,
			ForceOnTimeout:  cfg.ForceDrains,
			RetryBackoff:    cfg.Drain.RetryBackoff,
			RetryMaxBackoff: cfg.Drain.RetryMaxBackoff,
			RejoinTimeout:   cfg.Coordinator.RejoinTimeout,
			LoopBackoff:     cfg.Coordinator.RebootLoopBackoff,
			LoopMaxBackoff:  cfg.Coordinator.RebootLoopMaxBackoff,
			NodeGoneGrace:   cfg.Coordinator.PurgedNodeGrace,
		},
		HistorySize:          cfg.Coordinator.HistorySize,
		ServerStableFor:      cfg.Coordinator.ServerStableFor,
		HoldOnDeniedHandOver: cfg.HoldOnDeniedHandOver,
		Alerts:               cfg.AlertGate,
		HealthGates:          cfg.HealthGates,
		Workloads:            cfg.Workloads.Settings(),
		Capacity:             rules.CapacityGate{Enabled: cfg.Capacity.Enabled, Headroom: float64(cfg.Capacity.HeadroomPercent()) / 100},
		DefaultOptions:       defaultGroupOptions(cfg),
		MetaKeys: sideoutput.MetaRules{NextInLine: cfg.NodeMeta.NextInLine, CordonNext: cfg.NodeMeta.CordonNext,
			BeforeDrain: cfg.NodeMeta.BeforeDrain, AfterRejoin: cfg.NodeMeta.AfterRejoin},
		Approval: cfg.ApprovalRules(),
		ApprovalHook: approvalhook.Settings{URL: cfg.Approval.Webhook, Timeout: cfg.Approval.Timeout,
			Header: cfg.Approval.AuthHeader, Env: cfg.Approval.AuthEnv, File: cfg.Approval.AuthFile},
		FailureBudgets: cfg.FailureBudgets,
		RolloutBudget:  cfg.RolloutBudget,
	}
}

// identity names this process as a coordinator: the host and the process.
func identity(cfg *config.Compiled) string {
	host := cfg.Agent.Host
	if host == "" {
		host, _ = os.Hostname()
	}
	return fmt.Sprintf("%s (pid %d)", host, os.Getpid())
}

// PolicyInForce returns the local configuration with the rules the coordinator
// enforces now (the stored policy's, or the safe default's when none is stored)
// and the stored version (0: none). A stored policy that cannot be used is an
// error: the coordinator then starts no reboot, and there is nothing to preview.
func PolicyInForce(ctx context.Context, local *config.Compiled, st *store.Store) (*config.Compiled, int, error) {
	rec, err := st.Policy(ctx)
	cfg, version, err := inForce(local, rec, err)
	var bad *coordinator.InvalidPolicyError
	if errors.As(err, &bad) {
		return nil, version, fmt.Errorf("%w (the coordinator starts no reboot until a valid one is applied with rollboot policy apply)", err)
	}
	return cfg, version, err
}
