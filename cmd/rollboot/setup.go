package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/spf13/cobra"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/daemon"
	install "github.com/rollboot/rollboot/internal/setup"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/version"
)

// setupFlags are `rollboot setup`'s own flags.
type setupFlags struct {
	opts         install.Options
	check        bool
	destroy      bool
	serverTokens []string
	timeout      time.Duration
}

// errChangesPending is -check's answer when setup would change something: a
// non-zero exit, as `nomad job plan` exits 1 when the plan changes the cluster.
var errChangesPending = errors.New("changes pending")

func newSetupCmd(cf *configFlags) *cobra.Command {
	var f setupFlags
	cmd := &cobra.Command{
		Use:   "setup",
		Short: "Install rollboot into the Nomad cluster: namespace, ACL policies, stored policy and jobs",
		Long: `Install rollboot the way ` + "`nomad setup vault`" + ` sets Nomad up: read what the cluster
has, show what will be created or changed, then do it. Run it again at any time:
what is already there is kept. It creates the coordinator's namespace (rollboot),
applies the ACL policies of deploy/acl (rollboot-agent attached to the agents'
job, rollboot-coordinator to the coordinator's job, so each task's workload
identity is its token and no secret is pasted), stores deploy/policy.hcl as the
rollout policy when none is stored, and registers the coordinator job and the
agents' system job (deploy/nomad), parsed by Nomad.

It needs a management token when ACLs are on, Nomad ` + daemon.MinNomadVersion + ` or newer, and at least
one client that can run the agents' driver. -check shows the changes and exits
1 if there are any. -server-host-token HOST mints (once) and prints the token
and systemd steps of a server-only host, which runs rollboot outside Nomad.
-destroy removes everything setup installed, once no host holds a slot.`,
		Args: noArgs("setup"),
		RunE: func(cmd *cobra.Command, _ []string) error { return runSetup(cmd, cf, f) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.opts.Driver, "driver", "raw_exec", "the agents' task driver: raw_exec (the release archive) or docker (-image)")
	fs.StringVar(&f.opts.Version, "version", releaseVersion(), "the rollboot release the jobs run, e.g. v1.2.3 (default: this binary's release)")
	fs.StringVar(&f.opts.ReleaseURL, "release-url", "", "base URL where you host scripts/release's output: <url>/<version>/rollboot_<version>_linux_<arch>.tar.gz and SHA256SUMS (docs/install.md)")
	fs.StringVar(&f.opts.Image, "image", "", "with -driver docker: the image built from the Dockerfile, pinned by tag or digest")
	fs.BoolVar(&f.check, "check", false, "show what setup would create or change, change nothing, and exit 1 if anything is pending")
	fs.BoolVar(&f.destroy, "destroy", false, "remove the jobs, rollboot's variables, the tokens setup minted, the ACL policies and the namespace")
	fs.StringSliceVar(&f.serverTokens, "server-host-token", nil, "mint (once) and print the token and systemd steps for this server-only host (repeatable)")
	fs.DurationVar(&f.timeout, "timeout", 2*time.Minute, "give up on Nomad after this long")
	return cmd
}

// releaseVersion is this binary's version when it is a release (v1.2.3).
func releaseVersion() string {
	v := version.Get().Version
	if strings.HasPrefix(v, "v") {
		return v
	}
	return ""
}

func runSetup(cmd *cobra.Command, cf *configFlags, f setupFlags) error {
	cfg, err := cf.load()
	if err != nil {
		return addressHint(err, addressOf(*cf))
	}
	if f.timeout <= 0 {
		return fmt.Errorf("-timeout %s: must be positive", f.timeout)
	}
	f.opts.StateNamespace, f.opts.Prefix = cfg.Nomad.Namespace, cfg.State.Prefix
	if !f.destroy {
		if err := f.opts.Validate(); err != nil {
			return err
		}
	}
	client, err := daemon.Client(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	conn := connInfoOf(cfg, f.timeout)
	st := daemon.Store(cfg, client)
	if f.destroy {
		return explain(runDestroy(ctx, cmd.OutOrStdout(), client, st, cfg, f), conn)
	}
	return explain(runInstall(ctx, cmd.OutOrStdout(), client, st, f), conn)
}

func runInstall(ctx context.Context, out io.Writer, c *api.Client, st *store.Store, f setupFlags) error {
	acls, err := install.Preflight(ctx, c, f.opts)
	if err != nil {
		return err
	}
	want, err := install.Want(f.opts)
	if err != nil {
		return err
	}
	obs, err := install.Observe(ctx, c, st, want, acls)
	if err != nil {
		return err
	}
	changes := install.Plan(want, obs)
	n := install.Pending(changes)
	fmt.Fprintf(out, "rollboot setup at %s (%s agents, release %s):\n", c.Address(), f.opts.Driver, f.opts.Version)
	install.WritePlan(out, changes)
	if !acls {
		fmt.Fprintln(out, "ACLs are off: no policy is applied, and the jobs' identities need none.")
	}
	if w, err := install.CoordinatorNodeWarning(ctx, c); err != nil {
		return err
	} else if w != "" {
		fmt.Fprintln(out, "warning: "+w)
	}
	switch {
	case n == 0:
		fmt.Fprintln(out, "Nothing to change.")
	case f.check:
		fmt.Fprintf(out, "%d changes pending: run `rollboot setup` without -check to make them.\n", n)
		return fmt.Errorf("%w: %d", errChangesPending, n)
	default:
		if err := install.Apply(ctx, c, st, changes, want.StoredPolicy, appliedBy(c), out); err != nil {
			return err
		}
		fmt.Fprintf(out, "%d changes made. `rollboot status` shows the hosts as their agents start.\n", n)
	}
	if f.check {
		return nil
	}
	return serverTokens(ctx, out, c, f, acls)
}

func serverTokens(ctx context.Context, out io.Writer, c *api.Client, f setupFlags, acls bool) error {
	if len(f.serverTokens) > 0 && !acls {
		fmt.Fprintln(out, "ACLs are off: the server hosts need no token (deploy/systemd, docs/deploy.md).")
		return nil
	}
	for _, host := range f.serverTokens {
		tok, created, err := install.ServerHostToken(ctx, c, host)
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintf(out, "created token %q\n", tok.Name)
		}
		if err := install.WriteServerHostSteps(out, host, tok, f.opts.Version); err != nil {
			return err
		}
	}
	return nil
}

func runDestroy(ctx context.Context, out io.Writer, c *api.Client, st *store.Store, cfg *config.Compiled, f setupFlags) error {
	acls, err := install.Access(ctx, c)
	if err != nil {
		return err
	}
	// Destroy removes what any variant installed: the names do not depend on
	// the release or the driver.
	want, err := install.Want(install.Options{Driver: "raw_exec", Version: "v0", ReleaseURL: "http://unused", StateNamespace: cfg.Nomad.Namespace, Prefix: cfg.State.Prefix})
	if err != nil {
		return err
	}
	if err := install.Destroy(ctx, c, st, cfg.Nomad.Namespace, want, acls, out); err != nil {
		return err
	}
	fmt.Fprintln(out, "rollboot is removed from the cluster. On server hosts: systemctl disable --now rollboot-agent.")
	return nil
}
