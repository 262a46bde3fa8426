package setup

import (
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"
)

var release = Options{Driver: "raw_exec", Version: "v1.2.3", ReleaseURL: "https://releases.example.com/rollboot", StateNamespace: "default", Prefix: "rollboot"}

func want(t *testing.T, o Options) Desired {
	t.Helper()
	d, err := Want(o)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// observedAll is a cluster where everything d wants is in place.
func observedAll(d Desired) Observed {
	o := Observed{ACLs: true, Namespaces: map[string]bool{d.Namespace.Name: true}, Policies: map[string]*api.ACLPolicy{},
		Jobs: map[string]*api.Job{}, StoredPolicyVersion: 3}
	for _, p := range d.Policies {
		o.Policies[p.Name] = &api.ACLPolicy{Name: p.Name, Rules: p.Rules, JobACL: p.JobACL}
	}
	for _, j := range d.Jobs {
		o.Jobs[j.Namespace+"/"+j.ID] = &api.Job{Meta: map[string]string{MetaKey: j.Digest}}
	}
	return o
}

func actions(changes []Change) map[string]Action {
	out := map[string]Action{}
	for _, c := range changes {
		out[c.Kind+" "+c.Name] = c.Action
	}
	return out
}

func TestPlan(t *testing.T) {
	d := want(t, release)
	for _, tt := range []struct {
		name    string
		observe func(o *Observed)
		want    map[string]Action
		pending int
	}{
		{"everything in place: nothing to do", func(*Observed) {}, map[string]Action{"job default/rollboot": Keep, "stored policy rollboot/policy": Keep}, 0},
		{"an empty cluster: everything created", func(o *Observed) { *o = Observed{ACLs: true} },
			map[string]Action{"namespace rollboot": Create, "acl policy rollboot-agent": Create, "stored policy rollboot/policy": Create, "job rollboot/rollboot-coordinator": Create, "job default/rollboot": Create}, 8},
		{"a policy edited by hand is put back", func(o *Observed) {
			o.Policies["rollboot-agent"] = &api.ACLPolicy{Rules: "node { policy = \"write\" }", JobACL: d.Policies[0].JobACL}
		},
			map[string]Action{"acl policy rollboot-agent": Update}, 1},
		{"a policy detached from its job is attached again", func(o *Observed) { o.Policies["rollboot-coordinator"] = &api.ACLPolicy{Rules: d.Policies[1].Rules} },
			map[string]Action{"acl policy rollboot-coordinator": Update}, 1},
		{"another release registered: the job is updated", func(o *Observed) { o.Jobs["default/rollboot"].Meta[MetaKey] = "older" },
			map[string]Action{"job default/rollboot": Update}, 1},
		{"a stored policy is the operator's: kept", func(o *Observed) { o.StoredPolicyVersion = 7 },
			map[string]Action{"stored policy rollboot/policy": Keep}, 0},
		{"an unreadable stored policy is left alone", func(o *Observed) { o.StoredPolicyVersion = -1 },
			map[string]Action{"stored policy rollboot/policy": Keep}, 0},
		{"a job registered by hand is registered again", func(o *Observed) { o.Jobs["rollboot/rollboot-coordinator"].Meta = nil },
			map[string]Action{"job rollboot/rollboot-coordinator": Update}, 1},
		{"ACLs off: no policy", func(o *Observed) { o.ACLs = false },
			map[string]Action{"acl policy rollboot-agent": Skip, "acl policy rollboot-operator": Skip}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := observedAll(d)
			tt.observe(&o)
			got := Plan(d, o)
			acts := actions(got)
			for k, a := range tt.want {
				if acts[k] != a {
					t.Errorf("%s: %s, want %s", k, acts[k], a)
				}
			}
			if n := Pending(got); n != tt.pending {
				t.Errorf("%d pending, want %d: %v", n, tt.pending, acts)
			}
		})
	}
}

// The jobs' policies are attached to the jobs setup registers, each in its
// namespace; the digest follows the release.
func TestWant(t *testing.T) {
	d := want(t, release)
	jobs := map[string]DesiredJob{}
	for _, j := range d.Jobs {
		jobs[j.Namespace+"/"+j.ID] = j
	}
	for _, p := range d.Policies {
		if p.JobACL == nil {
			continue
		}
		if _, ok := jobs[p.JobACL.Namespace+"/"+p.JobACL.JobID]; !ok {
			t.Errorf("policy %s is attached to %s/%s, which setup does not register", p.Name, p.JobACL.Namespace, p.JobACL.JobID)
		}
	}
	if j := jobs["default/rollboot"]; !strings.Contains(j.Vars, `release_url = "https://releases.example.com/rollboot"`) || j.File != "nomad/rollboot.nomad.hcl" {
		t.Errorf("agents' job %s with %q", j.File, j.Vars)
	}
	newer := release
	newer.Version = "v1.2.4"
	if want(t, newer).Jobs[0].Digest == d.Jobs[0].Digest {
		t.Error("another release has the same digest: a second setup would not register it")
	}
	docker := release
	docker.Driver, docker.Image = "docker", "registry.example.com/rollboot:v1.2.3"
	for _, j := range want(t, docker).Jobs {
		if j.ID == AgentJob && (j.File != "nomad/rollboot-docker.nomad.hcl" || !strings.Contains(j.Vars, "image = ")) {
			t.Errorf("docker: agents' job %s with %q", j.File, j.Vars)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(o *Options)
		want string
	}{
		{"no release URL", func(o *Options) { o.ReleaseURL = "" }, "-release-url"},
		{"release URL without scheme", func(o *Options) { o.ReleaseURL = "releases.example.com" }, "-release-url"},
		{"no version", func(o *Options) { o.Version = "" }, "-version"},
		{"docker without image", func(o *Options) { o.Driver = "docker" }, "-image"},
		{"unknown driver", func(o *Options) { o.Driver = "exec" }, `-driver "exec"`},
		{"an interpolation", func(o *Options) { o.Version = "${env.X}" }, "template sequences"},
		{"another prefix", func(o *Options) { o.Prefix = "reboots" }, "shipped ACL policies"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := release
			tt.edit(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%v, want an error naming %s", err, tt.want)
			}
		})
	}
	if err := release.Validate(); err != nil {
		t.Error(err)
	}
}
