package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/coordinator"
	"github.com/rollboot/rollboot/internal/store"
)

// addChecks adds to the status what the coordinator checks before using the
// hosts' records: records that cannot be used (they do not decode, do not match
// their path, or name another host's node), control entries that cannot be read,
// and hosts whose agent does not run (from the agent job's allocations).
func addChecks(ctx context.Context, s *StatusView, cfg *config.Compiled, c *api.Client, st *store.Store) error {
	recs, bad, _, err := st.HostsChecked(ctx, 0, 0)
	if err != nil {
		return err
	}
	ctl, err := st.Control(ctx)
	if err != nil {
		return err
	}
	s.ControlProblems = ctl.Problems
	if _, s.PlanProblems, err = st.PlansChecked(ctx); err != nil {
		return err
	}
	list, _, err := c.Nodes().List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		// The rest of the status stands; say what could not be checked.
		s.Ignored = bad
		s.AgentCheck = "cannot check host records against their nodes, nor agents: list nodes: " + err.Error()
		markIgnored(s)
		return nil
	}
	nodes := make(map[string]*api.NodeListStub, len(list))
	for _, n := range list {
		nodes[n.ID] = n
	}
	recs, ignored := coordinator.ValidateRecords(recs, nodes)
	s.Ignored = append(bad, ignored...)
	missing := map[string]string{}
	if job := cfg.Coordinator.AgentJob; job != "" {
		ns := cfg.Coordinator.AgentJobNamespace
		if ns == "" {
			ns = cfg.Nomad.Namespace
		}
		allocs, _, err := coordinator.ReadAgentAllocs(ctx, c.Jobs(), job, ns, 0, 0)
		switch {
		case err != nil:
			s.AgentCheck = "cannot tell which agents run: " + err.Error()
		case !allocs.Known:
			s.AgentCheck = fmt.Sprintf("job %s has no allocations in namespace %s: agents are not checked", job, ns)
		default:
			missing = coordinator.MissingAgents(recs, nodes, allocs, time.Now())
		}
	}
	for i := range s.Hosts {
		s.Hosts[i].AgentMissing = missing[s.Hosts[i].Host]
	}
	markIgnored(s)
	return nil
}

// markIgnored shows each ignored record on its host's row; a host whose only
// record does not decode has no row yet: it gets one.
func markIgnored(s *StatusView) {
	why := map[string]string{}
	for _, b := range s.Ignored {
		why[b.Host] = b.Err
	}
	for i := range s.Hosts {
		s.Hosts[i].RecordIgnored = why[s.Hosts[i].Host]
	}
	seen := map[string]bool{}
	for _, h := range s.Hosts {
		seen[h.Host] = true
	}
	for _, b := range s.Ignored {
		if !seen[b.Host] {
			s.Hosts = append(s.Hosts, HostView{Host: b.Host, Phase: store.PhaseIdle, RecordIgnored: b.Err})
			seen[b.Host] = true
		}
	}
	sort.Slice(s.Hosts, func(i, j int) bool { return s.Hosts[i].Host < s.Hosts[j].Host })
}

// printProblems lists what was skipped, below the table.
func printProblems(w io.Writer, s StatusView) {
	if len(s.Ignored) > 0 {
		fmt.Fprintln(w, "\nIgnored host records:")
		for _, b := range s.Ignored {
			fmt.Fprintf(w, "  %s: %s\n", b.Host, b.Err)
		}
	}
	if len(s.ControlProblems) > 0 {
		fmt.Fprintln(w, "\nUnreadable control entries (skipped; rollboot control reset repairs them):")
		for _, p := range s.ControlProblems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	if len(s.PlanProblems) > 0 {
		fmt.Fprintln(w, "\nPartly unreadable plans (used with what could be read; the coordinator's next write repairs them):")
		for _, b := range s.PlanProblems {
			fmt.Fprintf(w, "  %s: %s\n", b.Host, b.Err)
		}
	}
	if s.AgentCheck != "" {
		fmt.Fprintf(w, "\nAgents: %s\n", s.AgentCheck)
	}
}
