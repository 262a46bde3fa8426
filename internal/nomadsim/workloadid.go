package nomadsim

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"
	"github.com/rollboot/rollboot/internal/nomadsim/simhttp"
)

// Workload identity, as Nomad gives it to every task of an allocation and
// resolves it when the task calls the API with it:
//
//   - Each task of a placed allocation has a signed identity, a JWT whose claims
//     name the namespace, job, allocation and task (nomad/structs/workload_id.go
//     WorkloadIdentityClaims, built by WorkloadIdentityClaimsBuilder and signed by
//     the servers' keyring, nomad/encrypter.go). The task gets it in NOMAD_TOKEN
//     with `identity { env = true }`, in secrets/nomad_token with `file = true`,
//     and from the Task API in any case. The emulator signs with HMAC-SHA256 under
//     a key of its own (Nomad signs with RS256 or EdDSA): the token's shape and
//     what the servers check are Nomad's, the algorithm is not.
//   - A secret that is no UUID is verified as an identity (nomad/auth/auth.go
//     Authenticate: resolveSecretToken answers ErrTokenInvalid for a non-UUID,
//     then VerifyClaim). VerifyClaim checks the signature, then that the
//     allocation exists and is not client-terminal (verifyWorkloadIdentityClaim):
//     the identity of a stopped, lost or completed allocation is refused.
//   - Its rules are the ACL policies attached to the job (ResolvePoliciesForClaims):
//     those whose JobACL names its namespace and job, and, when they name a group
//     (and a task), its group (and task); plus every policy attached to the whole
//     namespace (a JobACL with a namespace and no job). `nomad acl policy apply
//     -namespace ns -job j [-group g [-task t]]` attaches them
//     (command/acl_policy_apply.go).
//   - Without any policy it still reads and lists, in its own namespace only,
//     exactly nomad/jobs, nomad/jobs/<job>, nomad/jobs/<job>/<group> and
//     nomad/jobs/<job>/<group>/<task>, unless a policy names that exact path
//     (acl/acl.go matchingVariablesCapabilitySet: a concrete rule first, then the
//     workload's implicit read and list, then globs). It never writes without a
//     policy: variable writes check without the claim
//     (nomad/variables_endpoint.go hasOperationPermissions).
//   - Changes it makes are recorded as "alloc:<id>" (nomad/structs/structs.go
//     AuthenticatedIdentity.String), and /v1/acl/token/self answers 404 "ACL
//     token not found": ACL.WhoAmI knows it as claims, not as a token
//     (command/agent/acl_endpoint.go aclTokenSelf).

// workloadClaims are the claims of a task's identity that the servers use
// (nomad/structs/workload_id.go WorkloadIdentityClaims, with the registered
// JWT claims).
type workloadClaims struct {
	Namespace    string   `json:"nomad_namespace"`
	JobID        string   `json:"nomad_job_id"`
	AllocationID string   `json:"nomad_allocation_id"`
	Task         string   `json:"nomad_task"`
	Subject      string   `json:"sub"`
	Audience     []string `json:"aud"`
	IssuedAt     int64    `json:"iat"`
	NotBefore    int64    `json:"nbf"`
	// group is not a claim: Nomad reads it from the allocation
	// (ResolvePoliciesForClaims: alloc.TaskGroup), as does the emulator.
	group string
}

// workloadAudience is the default identity's audience (structs
// WorkloadIdentityDefaultAud).
const workloadAudience = "nomadproject.io"

var errIdentityInvalid = errors.New("invalid workload identity")

// newIdentityKey is the emulator's signing key, never shown.
func newIdentityKey() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(fmt.Sprintf("nomadsim: identity key: %v", err))
	}
	return k
}

var jwtEncoding = base64.RawURLEncoding

// signIdentityLocked is the identity of the task of sa (its one task).
func (s *Sim) signIdentityLocked(sa *simAlloc, now time.Time) string {
	a := sa.a
	task := taskName(sa)
	c := workloadClaims{
		Namespace: a.Namespace, JobID: a.JobID, AllocationID: a.ID, Task: task,
		// WorkloadIdentityClaimsBuilder.Build: sub is
		// region:namespace:job:group:task:identity.
		Subject:  strings.Join([]string{s.cfg.Region, a.Namespace, a.JobID, a.TaskGroup, task, "default"}, ":"),
		Audience: []string{workloadAudience}, IssuedAt: now.Unix(), NotBefore: now.Unix(),
	}
	header, _ := json.Marshal(map[string]string{"alg": "HS256", "typ": "JWT", "kid": s.acl.keyID})
	body, _ := json.Marshal(c)
	signed := jwtEncoding.EncodeToString(header) + "." + jwtEncoding.EncodeToString(body)
	return signed + "." + jwtEncoding.EncodeToString(s.identityMAC(signed))
}

func (s *Sim) identityMAC(signed string) []byte {
	m := hmac.New(sha256.New, s.acl.identityKey)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// verifyIdentityLocked is VerifyClaim: the signature, then a live allocation.
func (s *Sim) verifyIdentityLocked(secret string) (*workloadClaims, error) {
	parts := strings.Split(secret, ".")
	if len(parts) != 3 {
		return nil, errIdentityInvalid
	}
	sig, err := jwtEncoding.DecodeString(parts[2])
	if err != nil || !hmac.Equal(sig, s.identityMAC(parts[0]+"."+parts[1])) {
		return nil, errIdentityInvalid
	}
	body, err := jwtEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, errIdentityInvalid
	}
	var c workloadClaims
	if err := json.Unmarshal(body, &c); err != nil || c.AllocationID == "" {
		return nil, errIdentityInvalid
	}
	sa := s.cluster.allocs[c.AllocationID]
	if sa == nil || allocClientTerminal(sa.a) {
		// verifyWorkloadIdentityClaim: "allocation does not exist", or
		// "allocation is terminal".
		return nil, errIdentityInvalid
	}
	c.group = sa.a.TaskGroup
	return &c, nil
}

// workloadTokenLocked is the token a verified identity stands for: the policies
// attached to its job, group or task, or to its namespace
// (ResolvePoliciesForClaims), read at the time of the request.
func (s *Sim) workloadTokenLocked(c *workloadClaims) *Token {
	t := &Token{Name: "workload:" + c.AllocationID, claims: c}
	for _, name := range s.policyNamesLocked() {
		p := s.acl.policies[name]
		if jobACLMatches(p.JobACL, c) {
			t.Policies = append(t.Policies, p.parsed)
			t.attached = append(t.attached, name)
		}
	}
	return t
}

// jobACLMatches: ResolvePoliciesForClaims's two look-ups, by (namespace, job)
// then by namespace alone (nomad/state/schema.go ACLPolicyJobACLFieldIndex: a
// JobACL without a job is indexed under its namespace only).
func jobACLMatches(j *api.JobACL, c *workloadClaims) bool {
	switch {
	case j == nil || j.Namespace != c.Namespace:
		return false
	case j.JobID == "":
		return true
	case j.JobID != c.JobID:
		return false
	case j.Group == "":
		return true
	case j.Group != c.group:
		return false
	}
	return j.Task == "" || j.Task == c.Task
}

// validateJobACL is the JobACL part of ACLPolicy.Validate (nomad/structs/acl.go).
func validateJobACL(j *api.JobACL) []string {
	if j == nil {
		return nil
	}
	var problems []string
	if j.JobID != "" && j.Namespace == "" {
		problems = append(problems, "namespace must be set to set job ID")
	}
	if j.Group != "" && j.JobID == "" {
		problems = append(problems, "job ID must be set to set group")
	}
	if j.Task != "" && j.Group == "" {
		problems = append(problems, "group must be set to set task")
	}
	return problems
}

// implicitWorkloadRead: the variable paths a workload reads and lists without a
// policy (acl/acl.go matchingVariablesCapabilitySet).
func (c *workloadClaims) implicitWorkloadRead(ns, p string) bool {
	if c == nil || ns != c.Namespace {
		return false
	}
	switch p {
	case "nomad/jobs", "nomad/jobs/" + c.JobID, "nomad/jobs/" + c.JobID + "/" + c.group,
		"nomad/jobs/" + c.JobID + "/" + c.group + "/" + c.Task:
		return true
	}
	return false
}

// TaskIdentity is the identity of one task of a live allocation, and the
// environment variables the task gets from its identity block.
type TaskIdentity struct {
	AllocID string `json:"alloc_id"`
	Host    string `json:"host"`
	Group   string `json:"group"`
	Task    string `json:"task"`
	// DesiredStatus is the allocation's: "stop" once the scheduler stopped
	// it, when its client kills the task (kill_signal) while the identity
	// still authenticates, until the allocation is client-terminal.
	DesiredStatus string `json:"desired_status"`
	// Token is the signed identity, as the Task API gives it to any task.
	Token string `json:"token"`
	// Env holds NOMAD_TOKEN when the task's identity block says env = true
	// (client/allocrunner/taskrunner/identity_hook.go); empty otherwise.
	Env map[string]string `json:"env"`
}

// TaskIdentities returns the identities of the tasks of the job's allocations
// that are not client-terminal, in placement order: what each task would find
// in its environment. An allocation keeps its identity while it lives; a
// replacement has a new one.
func (s *Sim) TaskIdentities(namespace, job string) ([]TaskIdentity, error) {
	if namespace == "" {
		namespace = "default"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cluster.jobs[jobKey{namespace, job}] == nil {
		return nil, fmt.Errorf("job %s in namespace %s does not exist", job, namespace)
	}
	out := []TaskIdentity{}
	for _, aid := range s.cluster.allocOrder {
		sa := s.cluster.allocs[aid]
		a := sa.a
		if a.JobID != job || a.Namespace != namespace || allocClientTerminal(a) {
			continue
		}
		if sa.identity == "" {
			sa.identity = s.signIdentityLocked(sa, time.Now())
		}
		ti := TaskIdentity{AllocID: a.ID, Host: a.NodeName, Group: a.TaskGroup, Task: taskName(sa), DesiredStatus: a.DesiredStatus,
			Token: sa.identity, Env: map[string]string{}}
		if g := sa.job.group(a.TaskGroup); g != nil && g.IdentityEnv {
			ti.Env["NOMAD_TOKEN"] = sa.identity
		}
		out = append(out, ti)
	}
	return out, nil
}

// taskName is the name of the allocation's one task (GroupSpec.Task).
func taskName(sa *simAlloc) string {
	if g := sa.job.group(sa.a.TaskGroup); g != nil && g.Task != "" {
		return g.Task
	}
	return sa.a.TaskGroup
}

// ctlIdentities is GET /identities?namespace=&job= (control.go).
func (s *Sim) ctlIdentities(r *http.Request) (any, *controlError) {
	q := r.URL.Query()
	if q.Get("job") == "" {
		return nil, ctlErr(http.StatusBadRequest, "?job= is required: the job whose tasks' identities to show")
	}
	out, err := s.TaskIdentities(q.Get("namespace"), q.Get("job"))
	if err != nil {
		return nil, ctlErr(http.StatusNotFound, "%v", err)
	}
	return out, nil
}

// writeIdentityRefused is the answer to /v1/acl/token/self with a secret that
// is no token: 500 with the verifier's error for one that is no valid identity
// (encrypter.go VerifyClaim), 404 "ACL token not found" for a valid identity
// (WhoAmI answers claims, and aclTokenSelf wants a token).
func writeIdentityRefused(w http.ResponseWriter, secret string, valid bool) {
	switch {
	case valid:
		simhttp.WriteError(w, http.StatusNotFound, "ACL token not found")
	case strings.Count(secret, ".") == 2:
		simhttp.WriteError(w, http.StatusInternalServerError, "failed to verify signed token: invalid signature")
	default:
		simhttp.WriteError(w, http.StatusInternalServerError, "failed to parse signed token: go-jose/go-jose: compact JWS format must have three parts")
	}
}
