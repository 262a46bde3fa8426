package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/store"
)

// HostView is one row of `rollboot status`.
type HostView struct {
	Host           string    `json:"host"`
	Group          string    `json:"group,omitempty"`
	NodeID         string    `json:"node_id,omitempty"`
	Roles          []string  `json:"roles,omitempty"`
	FleetLockID    string    `json:"fleetlock_id,omitempty"`
	BootID         string    `json:"boot_id,omitempty"`
	Phase          string    `json:"phase"`
	Since          time.Time `json:"since,omitzero"`
	RebootRequired bool      `json:"reboot_required"`
	Reason         string    `json:"reason,omitempty"`
	RequestedAt    time.Time `json:"requested_at,omitzero"`
	Waiting        string    `json:"waiting,omitempty"`
	LastError      string    `json:"last_error,omitempty"`
	DetectError    string    `json:"detect_error,omitempty"`
	DiscoverError  string    `json:"discover_error,omitempty"`
	ManualRequest  bool      `json:"manual_request,omitempty"`
	// AgentMissing says why the host's agent is known not to run.
	AgentMissing string `json:"agent_missing,omitempty"`
	// RecordIgnored says why the coordinator does not use the host's record.
	RecordIgnored string `json:"record_ignored,omitempty"`
	// HoldReason: the agent holds the reboot at its final go/no-go, and why.
	HoldReason string `json:"hold_reason,omitempty"`
	// Failure is the host's last failed reboot attempt, as its agent reported it.
	Failure *FailureView `json:"failure,omitempty"`
}

// FailureView is a failed reboot attempt in `rollboot status -json`.
type FailureView struct {
	Grant      string    `json:"grant"`
	Step       string    `json:"step"`
	ExitStatus int       `json:"exit_status"`
	Message    string    `json:"message"`
	At         time.Time `json:"at,omitzero"`
}

// StatusView is the whole output of `rollboot status -json`.
type StatusView struct {
	Paused      bool       `json:"paused"`
	PauseReason string     `json:"pause_reason,omitempty"`
	Hosts       []HostView `json:"hosts"`
	// Ignored are the host records that cannot be used (skipped), and why.
	Ignored []store.BadRecord `json:"ignored_records,omitempty"`
	// ControlProblems are the control entries that cannot be read (skipped).
	ControlProblems []string `json:"control_problems,omitempty"`
	// PlanProblems are plans with items that cannot be read (read as zero).
	PlanProblems []store.BadRecord `json:"plan_problems,omitempty"`
	// AgentCheck says how agents were checked, when they could not be.
	AgentCheck string `json:"agent_check,omitempty"`
}

func readStatus(ctx context.Context, st *store.Store) (StatusView, error) {
	hosts, _, err := st.Hosts(ctx, 0, 0)
	if err != nil {
		return StatusView{}, err
	}
	plans, err := st.Plans(ctx)
	if err != nil {
		return StatusView{}, err
	}
	ctl, err := st.Control(ctx)
	if err != nil {
		return StatusView{}, err
	}
	out := StatusView{Paused: ctl.Paused, PauseReason: ctl.PauseReason, Hosts: []HostView{}}
	seen := map[string]bool{}
	for _, h := range hosts {
		seen[h.Host] = true
		v := HostView{Host: h.Host, NodeID: h.NodeID, Roles: h.Roles, FleetLockID: h.FleetLockID, BootID: h.BootID, Phase: store.PhaseIdle,
			RebootRequired: h.RebootRequired, Reason: h.Reason, RequestedAt: h.RequestedAt, DetectError: h.DetectError,
			DiscoverError: h.DiscoverError}
		if p, ok := plans[h.Host]; ok {
			fillPlan(&v, p)
		}
		_, v.ManualRequest = ctl.Requests[h.Host]
		fillAgentReport(&v, h)
		out.Hosts = append(out.Hosts, v)
	}
	for name, p := range plans {
		if !seen[name] {
			v := HostView{Host: name}
			fillPlan(&v, p)
			out.Hosts = append(out.Hosts, v)
		}
	}
	for name := range ctl.Requests {
		if !seen[name] && plans[name].Host == "" {
			out.Hosts = append(out.Hosts, HostView{Host: name, Phase: store.PhaseIdle, ManualRequest: true, Waiting: "no agent has published this host"})
		}
	}
	sort.Slice(out.Hosts, func(i, j int) bool { return out.Hosts[i].Host < out.Hosts[j].Host })
	return out, nil
}

func fillPlan(v *HostView, p store.Plan) {
	v.Group, v.Phase, v.Since, v.Waiting, v.LastError = p.Group, p.Phase, p.PhaseSince, p.Waiting, p.LastError
	if v.NodeID == "" {
		v.NodeID = p.NodeID
	}
	if v.Reason == "" {
		v.Reason = p.Reason
	}
}

// fillAgentReport adds the agent's hold and last failure to the view.
func fillAgentReport(v *HostView, h store.HostRecord) {
	if h.HoldReason != "" && h.RebootingGrant != "" {
		v.HoldReason = h.HoldReason
	}
	if f := h.Failure; f != nil {
		v.Failure = &FailureView{Grant: f.Grant, Step: f.Step, ExitStatus: f.ExitStatus, Message: f.Message, At: f.At}
	}
}

// failureText is the one-line form of a failure, as the store writes it.
func failureText(f *FailureView) string {
	return store.RebootFailure{Step: f.Step, ExitStatus: f.ExitStatus, Message: f.Message}.String()
}

// printStatus writes the status as an aligned table, like the nomad CLI.
func printStatus(w io.Writer, s StatusView, now time.Time) {
	if s.Paused {
		fmt.Fprintf(w, "Rollout paused: %s\n\n", orDash(s.PauseReason))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Host\tGroup\tNode ID\tRoles\tPhase\tSince\tWhy")
	for _, h := range s.Hosts {
		since := "-"
		if !h.Since.IsZero() {
			since = now.Sub(h.Since).Round(time.Second).String() + " ago"
		}
		node := h.NodeID
		if len(node) > 8 {
			node = node[:8]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Host, orDash(h.Group), orDash(node),
			orDash(rolesText(h)), h.Phase, since, why(h))
	}
	tw.Flush()
	printProblems(w, s)
}

// rolesText shows the roles, the FleetLock role with the client's id
// ("fleetlock=<id>"), so that a FleetLock holder can be told by its id.
func rolesText(h HostView) string {
	roles := make([]string, 0, len(h.Roles))
	for _, r := range h.Roles {
		if r == store.RoleFleetLock && h.FleetLockID != "" {
			r += "=" + h.FleetLockID
		}
		roles = append(roles, r)
	}
	return strings.Join(roles, ",")
}

func why(h HostView) string {
	var parts []string
	switch {
	case h.LastError != "" && h.Phase != store.PhaseIdle:
		parts = append(parts, h.LastError)
	case h.Waiting != "":
		parts = append(parts, h.Waiting)
	}
	if h.Phase != store.PhaseIdle || h.RebootRequired || h.ManualRequest {
		if h.Reason != "" {
			parts = append(parts, "reboot: "+h.Reason)
		} else if h.ManualRequest {
			parts = append(parts, "reboot: manual request")
		}
	}
	if h.HoldReason != "" && h.Phase != store.PhaseIdle && !strings.Contains(h.Waiting, h.HoldReason) {
		parts = append(parts, "agent holds the reboot: "+h.HoldReason)
	}
	if h.Failure != nil && !strings.Contains(h.LastError, failureText(h.Failure)) {
		parts = append(parts, "last failed attempt: "+failureText(h.Failure))
	}
	if h.DetectError != "" {
		parts = append(parts, "detection error: "+h.DetectError)
	}
	if h.DiscoverError != "" && !strings.Contains(h.Waiting, h.DiscoverError) {
		parts = append(parts, "server roles unknown: "+h.DiscoverError)
	}
	if h.AgentMissing != "" {
		parts = append(parts, h.AgentMissing)
	}
	if h.RecordIgnored != "" {
		parts = append(parts, h.RecordIgnored)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newStatusCmd() *cobra.Command {
	var cf configFlags
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show every host's reboot phase",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, c, err := loadedOf(cmd)
			if err != nil {
				return err
			}
			st := daemon.Store(cfg, c)
			s, err := readStatus(cmd.Context(), st)
			if err != nil {
				return err
			}
			if err := addChecks(cmd.Context(), &s, cfg, c, st); err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(s)
			}
			printStatus(cmd.OutOrStdout(), s, time.Now())
			return nil
		},
	}
	cf.register(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	return cmd
}
