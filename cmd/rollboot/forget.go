package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/nomad/api"
	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/store"
)

// newForgetCmd removes a host rollboot should not know any more: a
// decommissioned host, or a record forged under a name that is no host.
func newForgetCmd(cf *configFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "forget HOST",
		Short: "Remove a decommissioned or forged host: its record and requests now, its plan and metrics by the coordinator",
		Long: `Remove a host rollboot should not know any more: a decommissioned host, or a
record written under a name that is no host. Its host record and its requests are
deleted now; the leading coordinator then deletes its idle plan, and its metric
series and status lines go with it.

It refuses a host whose cycle is under way (rollboot release HOST first) and a host
whose Nomad node is not down (its agent would publish the record again: stop the
agent, or purge the node, first).`,
		Args: oneHost("forget"),
	}
	return clientCommand(cf, cmd, func(cmd *cobra.Command, args []string, n nomadConn) error {
		return forget(cmd.Context(), cmd.OutOrStdout(), n.store(), n.client.Nodes(), args[0])
	}, nil)
}

// forgetNodes is the part of the Nomad nodes API forget reads.
type forgetNodes interface {
	List(q *api.QueryOptions) ([]*api.NodeListStub, *api.QueryMeta, error)
}

func forget(ctx context.Context, out io.Writer, st *store.Store, nodes forgetNodes, host string) error {
	if err := store.CheckHostName(host); err != nil {
		return err
	}
	if err := forgettable(ctx, st, nodes, host); err != nil {
		return err
	}
	rec, err := st.Host(ctx, host)
	switch {
	case errors.Is(err, store.ErrNotFound):
		fmt.Fprintf(out, "No host record of %s.\n", host)
	case err != nil && !errors.Is(err, store.ErrUnreadable):
		return fmt.Errorf("read the record of %s: %w", host, err)
	default:
		if err := st.DeleteHost(ctx, rec); err != nil {
			return fmt.Errorf("delete the record of %s: %w", host, err)
		}
		fmt.Fprintf(out, "Host record of %s deleted.\n", host)
	}
	if _, err := st.UpdateControl(ctx, func(c *store.Control) error {
		delete(c.Requests, host)
		delete(c.Cancels, host)
		delete(c.Releases, host)
		delete(c.Approvals, host)
		return nil
	}); err != nil {
		return fmt.Errorf("delete the requests of %s: %w", host, err)
	}
	fmt.Fprintf(out, "The coordinator deletes the idle plan of %s and drops its metrics at its next pass.\n", host)
	return nil
}

// forgettable says why host may not be forgotten now (nil if it may).
func forgettable(ctx context.Context, st *store.Store, nodes forgetNodes, host string) error {
	p, err := st.Plan(ctx, host)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("read the plan of %s: %w", host, err)
	}
	if err == nil && p.Active() {
		return fmt.Errorf("%s has a cycle under way (phase %s): run rollboot release %s first", host, p.Phase, host)
	}
	list, _, err := nodes.List((&api.QueryOptions{Filter: fmt.Sprintf("Name == %q", host)}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("list the Nomad nodes named %s: %w", host, err)
	}
	for _, n := range list {
		if n.Name == host && n.Status != api.NodeStatusDown {
			return fmt.Errorf("%s still has Nomad node %s (%s): its agent would publish its record again; stop the agent or purge the node (nomad node purge) first",
				host, n.ID, n.Status)
		}
	}
	return nil
}
