// Package setup installs rollboot into a Nomad cluster the way `nomad setup
// vault` sets Nomad up for Vault: it reads what the cluster has, shows what it
// will create or change, and then does it, idempotently. What it installs is
// the files of deploy/ (embedded in the binary): the coordinator's namespace,
// the ACL policies (the jobs' attached to them, so each task's workload
// identity is its token), the starting rollout policy, and the coordinator and
// agents' jobs, parsed by Nomad itself. Destroy removes all of it.
//
// The decision is pure (Plan: what is wanted and what is there → the changes);
// Observe reads the cluster and Apply writes the changes through the Nomad API.
package setup

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/deploy"
)

// Names of what setup installs. The shipped ACL policies are written for the
// state prefix "rollboot" in namespace "default", the coordinator job runs in
// namespace "rollboot", and the agents' job in "default".
const (
	CoordinatorNamespace = "rollboot"
	AgentNamespace       = "default"
	AgentJob             = "rollboot"
	CoordinatorJob       = "rollboot-coordinator"
	// MetaKey is the job meta key holding the digest of the job file and
	// variables setup registered, so a second run knows the job is current.
	MetaKey = "rollboot_setup"
	// ServerTokenPrefix starts the name of every token setup mints for a
	// server host ("rollboot-agent-server <host>").
	ServerTokenPrefix = "rollboot-agent-server "
	shippedPrefix     = "rollboot"
	shippedNamespace  = "default"
)

// Options say which release to install and how.
type Options struct {
	// Driver is "raw_exec" (the release archive) or "docker" (the image).
	Driver     string
	Version    string
	ReleaseURL string
	Image      string
	// StateNamespace and Prefix are rollboot's state (nomad.namespace,
	// state.prefix): the shipped policies grant "default" and "rollboot" only.
	StateNamespace string
	Prefix         string
}

// Validate returns every problem of the options at once, each with its fix.
func (o Options) Validate() error {
	var problems []string
	// The coordinator job (exec) downloads the release archive whatever the
	// agents' driver.
	if o.Version == "" {
		problems = append(problems, "-version: required (the release to run, e.g. v1.2.3)")
	}
	if u, err := url.Parse(o.ReleaseURL); o.ReleaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		problems = append(problems, fmt.Sprintf("-release-url %q: want the http(s) base URL where you host scripts/release's output (<url>/<version>/rollboot_<version>_linux_<arch>.tar.gz and SHA256SUMS; docs/install.md)", o.ReleaseURL))
	}
	switch o.Driver {
	case "raw_exec":
	case "docker":
		if o.Image == "" {
			problems = append(problems, "-image: required with -driver docker (the image built from the Dockerfile, pinned by tag or digest)")
		}
	default:
		problems = append(problems, fmt.Sprintf("-driver %q: want raw_exec or docker", o.Driver))
	}
	for flag, v := range map[string]string{"-version": o.Version, "-release-url": o.ReleaseURL, "-image": o.Image} {
		if strings.Contains(v, "${") || strings.Contains(v, "%{") || strings.ContainsAny(v, "\"\\\n") {
			problems = append(problems, fmt.Sprintf("%s %q: quotes, backslashes, newlines and template sequences are not allowed", flag, v))
		}
	}
	if o.StateNamespace != shippedNamespace || o.Prefix != shippedPrefix {
		problems = append(problems, fmt.Sprintf("state namespace %q and prefix %q: the shipped ACL policies grant namespace %q and prefix %q only; set those, or apply edited policies and jobs by hand (docs/deploy.md)",
			o.StateNamespace, o.Prefix, shippedNamespace, shippedPrefix))
	}
	if len(problems) > 0 {
		return fmt.Errorf("setup: %s", strings.Join(problems, "; "))
	}
	return nil
}

// DesiredJob is a job file to register with its variables.
type DesiredJob struct {
	Namespace, ID, File string
	Source              []byte
	// Vars is the content of a variables file, as /v1/jobs/parse takes it.
	Vars string
	// Digest identifies the file and variables (MetaKey).
	Digest string
}

// DesiredPolicy is an ACL policy from deploy/acl, attached to a job or not.
type DesiredPolicy struct {
	Name, Description, Rules string
	JobACL                   *api.JobACL
}

// Desired is what setup wants in the cluster.
type Desired struct {
	Namespace    api.Namespace
	Policies     []DesiredPolicy
	StoredPolicy []byte
	Jobs         []DesiredJob
}

// Want is what setup installs for these options, from the embedded deploy files.
func Want(o Options) (Desired, error) {
	d := Desired{Namespace: api.Namespace{Name: CoordinatorNamespace, Description: "rollboot coordinator"}}
	for _, p := range []DesiredPolicy{
		{Name: "rollboot-agent", Description: "rollboot agents (job " + AgentNamespace + "/" + AgentJob + ")", JobACL: &api.JobACL{Namespace: AgentNamespace, JobID: AgentJob}},
		{Name: "rollboot-coordinator", Description: "rollboot coordinator (job " + CoordinatorNamespace + "/" + CoordinatorJob + ")", JobACL: &api.JobACL{Namespace: CoordinatorNamespace, JobID: CoordinatorJob}},
		{Name: "rollboot-agent-server", Description: "rollboot agent on server hosts (systemd)"},
		{Name: "rollboot-operator", Description: "rollboot CLI"},
	} {
		rules, err := deploy.Read("acl/" + p.Name + ".policy.hcl")
		if err != nil {
			return d, err
		}
		p.Rules = string(rules)
		d.Policies = append(d.Policies, p)
	}
	src, err := deploy.Read("policy.hcl")
	if err != nil {
		return d, err
	}
	d.StoredPolicy = src
	coordVars := varsFile("version", o.Version, "release_url", o.ReleaseURL)
	agentFile, agentVars := "nomad/rollboot.nomad.hcl", coordVars
	if o.Driver == "docker" {
		agentFile, agentVars = "nomad/rollboot-docker.nomad.hcl", varsFile("image", o.Image)
	}
	for _, j := range []DesiredJob{
		{Namespace: CoordinatorNamespace, ID: CoordinatorJob, File: "nomad/rollboot-coordinator.nomad.hcl", Vars: coordVars},
		{Namespace: AgentNamespace, ID: AgentJob, File: agentFile, Vars: agentVars},
	} {
		if j.Source, err = deploy.Read(j.File); err != nil {
			return d, err
		}
		sum := sha256.Sum256(append(append(append([]byte{}, j.Source...), 0), j.Vars...))
		j.Digest = hex.EncodeToString(sum[:8])
		d.Jobs = append(d.Jobs, j)
	}
	return d, nil
}

// varsFile writes name/value pairs as a variables file.
func varsFile(kv ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, "%s = %s\n", kv[i], strconv.Quote(kv[i+1]))
	}
	return b.String()
}
