package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/daemon"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/storedpolicy"
)

// Preflight refuses, with the fix, a cluster that cannot run rollboot: a Nomad
// older than daemon.MinNomadVersion; ACLs on without a management token; no
// client that can run the agents' driver. It returns whether ACLs are on.
func Preflight(ctx context.Context, c *api.Client, o Options) (bool, error) {
	acls, err := Access(ctx, c)
	if err != nil {
		return false, err
	}
	nodes, _, err := c.Nodes().List((&api.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return acls, fmt.Errorf("list the Nomad clients: %w", err)
	}
	if n := nodesFor(nodes, o.Driver); n == 0 {
		return acls, noDriverError(o.Driver, len(nodes))
	}
	return acls, nil
}

// Access is the part of Preflight that -destroy needs too: the Nomad version,
// and a management token when ACLs are on. It returns whether they are.
func Access(ctx context.Context, c *api.Client) (bool, error) {
	if err := daemon.CheckNomadVersion(c.Agent(), slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		return false, fmt.Errorf("%w; upgrade Nomad first", err)
	}
	return aclsOn(ctx, c)
}

// aclsOn reads the token: with ACLs on it must be a management token (setup
// writes ACL policies and namespaces, which nothing less may).
func aclsOn(ctx context.Context, c *api.Client) (bool, error) {
	tok, _, err := c.ACLTokens().Self((&api.QueryOptions{}).WithContext(ctx))
	switch {
	case err != nil:
		return false, fmt.Errorf("read this token (/v1/acl/token/self): %w; with ACLs on, setup needs a management token in NOMAD_TOKEN (`nomad acl bootstrap` gives the first one)", err)
	case tok.AccessorID == "acls-disabled":
		return false, nil
	case tok.Type != "management":
		name := tok.Name
		if name == "" {
			name = tok.AccessorID
		}
		return true, fmt.Errorf("ACLs are on and this token (%s) is a %s token: setup writes ACL policies and namespaces, which needs a management token in NOMAD_TOKEN (`nomad acl token create -type management`)", name, tok.Type)
	}
	return true, nil
}

// nodesFor counts the ready clients whose driver can run the agents: raw_exec
// detected and healthy, or docker healthy with privileged containers allowed
// (the docker driver's attribute driver.docker.privileged.enabled).
func nodesFor(nodes []*api.NodeListStub, driver string) int {
	n := 0
	for _, node := range nodes {
		d := node.Drivers[driver]
		if d == nil || !d.Detected || !d.Healthy {
			continue
		}
		if driver == "docker" && d.Attributes["driver.docker.privileged.enabled"] != "true" {
			continue
		}
		n++
	}
	return n
}

// CoordinatorNodeWarning says, when fewer than three clients may run the
// coordinator job (its constraint on the client metadata rollboot_coordinator),
// why its instances would wait and what to set; "" otherwise.
func CoordinatorNodeWarning(ctx context.Context, c *api.Client) (string, error) {
	q := (&api.QueryOptions{Filter: `Meta.rollboot_coordinator == "true"`}).WithContext(ctx)
	nodes, _, err := c.Nodes().List(q)
	if err != nil {
		return "", fmt.Errorf("list the clients that may run the coordinator: %w", err)
	}
	if len(nodes) >= 3 {
		return "", nil
	}
	return fmt.Sprintf("%d clients have the metadata rollboot_coordinator = \"true\": the coordinator job's two instances run only there, on distinct hosts, "+
		"and a third lets a drained one move; set client { meta { rollboot_coordinator = \"true\" } } (or nomad node meta apply rollboot_coordinator=true) on three clients you trust with it (docs/deploy.md)", len(nodes)), nil
}

func noDriverError(driver string, clients int) error {
	if driver == "docker" {
		return fmt.Errorf("none of the %d Nomad clients runs docker with privileged containers allowed: the agents' docker job runs privileged; set plugin \"docker\" { config { allow_privileged = true  volumes { enabled = true } } } on the clients and restart them, or use -driver raw_exec (docs/deploy.md)", clients)
	}
	return fmt.Errorf("none of the %d Nomad clients has a healthy raw_exec driver: enable it with plugin \"raw_exec\" { config { enabled = true } } on the clients and restart them, or use -driver docker (docs/deploy.md)", clients)
}

// Observe reads what the cluster has of what d wants.
func Observe(ctx context.Context, c *api.Client, st *store.Store, d Desired, acls bool) (Observed, error) {
	o := Observed{ACLs: acls, Namespaces: map[string]bool{}, Policies: map[string]*api.ACLPolicy{}, Jobs: map[string]*api.Job{}}
	q := (&api.QueryOptions{}).WithContext(ctx)
	nss, _, err := c.Namespaces().List(q)
	if err != nil {
		return o, fmt.Errorf("list namespaces: %w", err)
	}
	for _, ns := range nss {
		o.Namespaces[ns.Name] = true
	}
	if acls {
		for _, p := range d.Policies {
			cur, _, err := c.ACLPolicies().Info(p.Name, q)
			if err != nil && !notFound(err) {
				return o, fmt.Errorf("read ACL policy %s: %w", p.Name, err)
			}
			if err == nil {
				o.Policies[p.Name] = cur
			}
		}
	}
	for _, j := range d.Jobs {
		job, _, err := c.Jobs().Info(j.ID, (&api.QueryOptions{Namespace: j.Namespace}).WithContext(ctx))
		if err != nil && !notFound(err) {
			return o, fmt.Errorf("read job %s/%s: %w", j.Namespace, j.ID, err)
		}
		if err == nil && (job.Stop == nil || !*job.Stop) {
			o.Jobs[j.Namespace+"/"+j.ID] = job
		}
	}
	rec, err := st.Policy(ctx)
	switch {
	case err == nil:
		o.StoredPolicyVersion = rec.Version
	case errors.Is(err, store.ErrNotFound):
	default:
		// Unreadable: someone's; setup does not overwrite it.
		o.StoredPolicyVersion = -1
	}
	return o, nil
}

func notFound(err error) bool {
	var ue api.UnexpectedResponseError
	if errors.As(err, &ue) {
		return ue.StatusCode() == 404
	}
	return strings.Contains(err.Error(), "404")
}

// Apply makes the changes, in the order Plan gives them (namespace, policies,
// stored policy, jobs: a job is registered only once its policy and namespace
// exist), and writes one line per change done.
func Apply(ctx context.Context, c *api.Client, st *store.Store, changes []Change, src []byte, by string, w io.Writer) error {
	wq := (&api.WriteOptions{}).WithContext(ctx)
	for _, ch := range changes {
		if ch.Action != Create && ch.Action != Update {
			continue
		}
		var err error
		switch ch.Kind {
		case "namespace":
			_, err = c.Namespaces().Register(&api.Namespace{Name: ch.Name, Description: "rollboot coordinator"}, wq)
		case "acl policy":
			p := ch.policy
			_, err = c.ACLPolicies().Upsert(&api.ACLPolicy{Name: p.Name, Description: p.Description, Rules: p.Rules, JobACL: p.JobACL}, wq)
		case "stored policy":
			err = storePolicy(ctx, c, st, src, by)
		case "job":
			err = registerJob(ctx, c, ch.job)
		}
		if err != nil {
			return fmt.Errorf("%s %s %s: %w", ch.Action, ch.Kind, ch.Name, err)
		}
		fmt.Fprintf(w, "%sed %s %s\n", strings.TrimSuffix(string(ch.Action), "e"), ch.Kind, ch.Name)
	}
	return nil
}

// storePolicy stores the starting policy as `rollboot policy apply` does, only
// if none is stored (check-and-set 0).
func storePolicy(ctx context.Context, c *api.Client, st *store.Store, src []byte, by string) error {
	ch, err := storedpolicy.Prepare(ctx, st, c.Nodes(), src, "deploy/policy.hcl")
	if err != nil {
		return err
	}
	zero := uint64(0)
	_, err = ch.Apply(ctx, st, by, time.Now(), &zero)
	return err
}

// registerJob has Nomad parse the job file with its variables (as `nomad job
// run -var` does), marks it with its digest and registers it.
func registerJob(ctx context.Context, c *api.Client, j *DesiredJob) error {
	job, err := c.Jobs().ParseHCLOpts(&api.JobsParseRequest{JobHCL: string(j.Source), Variables: j.Vars})
	if err != nil {
		return fmt.Errorf("parse deploy/%s: %w", j.File, err)
	}
	if job.Meta == nil {
		job.Meta = map[string]string{}
	}
	job.Meta[MetaKey] = j.Digest
	_, _, err = c.Jobs().Register(job, (&api.WriteOptions{Namespace: j.Namespace}).WithContext(ctx))
	return err
}
