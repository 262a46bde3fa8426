package setup

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/allocstatus"
	"github.com/rollboot/rollboot/internal/store"
)

// heldPhases are the phases in which a host holds its group's slot (or, for
// unreadable, counts as holding one): its node is or may be drained.
var heldPhases = map[string]bool{
	store.PhaseDraining: true, store.PhaseDrained: true, store.PhaseRebooting: true,
	store.PhaseRejoining: true, store.PhaseStuck: true, store.PhaseUnreadable: true,
}

// HeldSlots lists "host (phase)" for every host holding a slot, sorted.
func HeldSlots(ctx context.Context, st *store.Store) ([]string, error) {
	plans, _, err := st.PlansChecked(ctx)
	if err != nil {
		return nil, fmt.Errorf("read rollboot's plans: %w", err)
	}
	var out []string
	for host, p := range plans {
		if heldPhases[p.Phase] {
			out = append(out, fmt.Sprintf("%s (%s)", host, p.Phase))
		}
	}
	sort.Strings(out)
	return out, nil
}

// Destroy removes what setup installed, refusing while any host holds a slot
// (its node may be drained, and nothing would give it back). In order: the
// jobs (purged), and once their allocations have stopped, rollboot's state
// variables, the tokens setup minted, the ACL policies, and the coordinator's
// namespace. The state waits for the allocations: an agent still running
// writes its host record again when it sees it deleted (agent/guard.go). A
// variable still locked by a stopping coordinator, an allocation still
// stopping, or a namespace whose allocations are still stopping, is tried
// again until ctx ends.
func Destroy(ctx context.Context, c *api.Client, st *store.Store, stateNS string, d Desired, acls bool, w io.Writer) error {
	held, err := HeldSlots(ctx, st)
	if err != nil {
		return err
	}
	if len(held) > 0 {
		return fmt.Errorf("%d hosts hold a slot: %s. Run `rollboot pause` so no other starts, wait until `rollboot status` shows none draining, drained, rebooting or rejoining, and `rollboot release <host>` each stuck one; then run setup -destroy again",
			len(held), strings.Join(held, ", "))
	}
	for _, j := range d.Jobs {
		if _, _, err := c.Jobs().Deregister(j.ID, true, (&api.WriteOptions{Namespace: j.Namespace}).WithContext(ctx)); err != nil {
			return fmt.Errorf("stop and purge job %s/%s: %w", j.Namespace, j.ID, err)
		}
		fmt.Fprintf(w, "purged job %s/%s\n", j.Namespace, j.ID)
	}
	if err := retry(ctx, func() error { return jobsStopped(ctx, c, d.Jobs) }); err != nil {
		return err
	}
	if err := retry(ctx, func() error { return deleteState(ctx, c, st.Prefix(), stateNS, w) }); err != nil {
		return err
	}
	if acls {
		if err := deleteACL(ctx, c, d, w); err != nil {
			return err
		}
	}
	err = retry(ctx, func() error {
		_, err := c.Namespaces().Delete(d.Namespace.Name, (&api.WriteOptions{}).WithContext(ctx))
		if err != nil && notFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete namespace %s: %w", d.Namespace.Name, err)
	}
	fmt.Fprintf(w, "deleted namespace %s\n", d.Namespace.Name)
	return nil
}

// jobsStopped returns an error naming an allocation of jobs whose tasks have
// not stopped yet: its client status is not terminal (complete, failed or
// lost: the client marks it so once its tasks exited).
func jobsStopped(ctx context.Context, c *api.Client, jobs []DesiredJob) error {
	for _, j := range jobs {
		allocs, _, err := c.Jobs().Allocations(j.ID, false, (&api.QueryOptions{Namespace: j.Namespace}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("allocations of job %s/%s: %w", j.Namespace, j.ID, err)
		}
		for _, a := range allocs {
			if allocstatus.ClientTerminal(a.ClientStatus) {
				continue
			}
			return fmt.Errorf("allocation %s of job %s/%s on node %s is still %s: waiting for it to stop before deleting rollboot's state",
				a.ID, j.Namespace, j.ID, a.NodeName, a.ClientStatus)
		}
	}
	return nil
}

// retry runs f until it succeeds or ctx ends, returning its last error then.
func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// deleteState deletes every variable under rollboot's prefix in its state
// namespace: host records, plans, control, requests, history, the election's
// and the stored policy.
func deleteState(ctx context.Context, c *api.Client, prefix, ns string, w io.Writer) error {
	q := (&api.QueryOptions{Namespace: ns}).WithContext(ctx)
	vars, _, err := c.Variables().PrefixList(prefix+"/", q)
	if err != nil {
		return fmt.Errorf("list rollboot's variables: %w", err)
	}
	for _, v := range vars {
		if _, err := c.Variables().Delete(v.Path, (&api.WriteOptions{Namespace: ns}).WithContext(ctx)); err != nil {
			// A held variable lock cannot be deleted (409): the election's
			// until a stopping coordinator releases it or its TTL ends, a
			// server reboot lock while a server host's agent holds it.
			return fmt.Errorf("delete variable %s: %w (a lock is held: if it stays so, stop the agents on the server hosts, systemctl disable --now rollboot-agent, and run setup -destroy again)", v.Path, err)
		}
	}
	if len(vars) > 0 {
		fmt.Fprintf(w, "deleted %d variables under %s/ in namespace %s\n", len(vars), prefix, ns)
	}
	return nil
}

// deleteACL deletes the tokens setup minted and the policies it applied.
func deleteACL(ctx context.Context, c *api.Client, d Desired, w io.Writer) error {
	toks, _, err := c.ACLTokens().List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("list ACL tokens: %w", err)
	}
	for _, t := range toks {
		if !strings.HasPrefix(t.Name, ServerTokenPrefix) {
			continue
		}
		if _, err := c.ACLTokens().Delete(t.AccessorID, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
			return fmt.Errorf("delete token %q: %w", t.Name, err)
		}
		fmt.Fprintf(w, "deleted token %q\n", t.Name)
	}
	for _, p := range d.Policies {
		if _, err := c.ACLPolicies().Delete(p.Name, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
			return fmt.Errorf("delete ACL policy %s: %w", p.Name, err)
		}
		fmt.Fprintf(w, "deleted acl policy %s\n", p.Name)
	}
	return nil
}
