// Package recordcheck checks the host records, the hosts' claims, before the
// coordinator's pass uses them: it drops those the pass must not use, corrects
// the rest with the clusters' memberships and the operator's lists, finds the
// hosts whose agent is missing (package hostcheck decides), and logs each of
// these when it changes.
package recordcheck

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/hostcheck"
	"github.com/rollboot/rollboot/internal/membership"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/watched"
)

// Checker checks the records of one coordinator, pass after pass; the pass
// goroutine's.
type Checker struct {
	// Members reads the server clusters' memberships; Reporter logs what
	// corroboration made of the records.
	Members  *membership.Reader
	Reporter membership.Reporter
	// Jobs reads the allocations of the agent's job, AgentJob in Namespace
	// ("": not checked).
	Jobs      hostcheck.JobsAPI
	AgentJob  string
	Namespace string
	// Unbacked counts the hosts left out (a metric).
	Unbacked func(n int)
	Log      *slog.Logger
	Now      func() time.Time
	// reported: what Check last logged.
	reported string
	// atLeast: the index of the last list of the agent job's allocations a
	// pass read itself: a watch's answer older than it is not used.
	atLeast uint64
}

// Checked is what Check made of the records.
type Checked struct {
	// Records are those the pass may use, corrected; Ignored those it must
	// not, with why; Missing the hosts whose agent is known not to run, with
	// why.
	Records []store.HostRecord
	Ignored []store.BadRecord
	Missing map[string]string
}

// NewTerm forgets the index of the agent job's allocations a pass read: a
// new term's watch starts afresh.
func (k *Checker) NewTerm() { k.atLeast = 0 }

// Check drops the records the pass must not use, corrects the others with
// the clusters and b (members filled in here), and finds the missing agents,
// from the agent job's allocations as its watch last answered (agentJob) or
// read now; it logs what changed since its last check, the control state's
// problems included.
func (k *Checker) Check(ctx context.Context, hosts []store.HostRecord, bad []store.BadRecord, nodes map[string]*api.NodeListStub,
	ctl store.Control, b hostcheck.Backing, agentJob watched.Value[hostcheck.AgentAllocs]) Checked {
	hosts, ignored := hostcheck.ValidateRecords(hosts, nodes)
	hosts = k.corroborate(ctx, hosts, nodes, b)
	bad = append(bad, ignored...)
	missing := map[string]string{}
	var lines []string
	var allocErr error
	if k.AgentJob != "" {
		allocs, err := k.agentAllocs(ctx, agentJob)
		if err != nil {
			// A failed read only hides missing agents (logged when it changes).
			allocErr = err
			lines = append(lines, "allocs:"+err.Error())
		} else {
			missing = hostcheck.MissingAgents(hosts, nodes, allocs, k.Now())
		}
	}
	for _, b := range bad {
		lines = append(lines, "bad:"+b.Host+":"+b.Err)
	}
	for _, p := range ctl.Problems {
		lines = append(lines, "control:"+p)
	}
	for h, why := range missing {
		lines = append(lines, "missing:"+h+":"+why)
	}
	sort.Strings(lines)
	if key := strings.Join(lines, "\n"); key != k.reported {
		k.reported = key
		k.log(bad, ctl.Problems, missing, allocErr)
	}
	return Checked{Records: hosts, Ignored: bad, Missing: missing}
}

// log logs what Check found.
func (k *Checker) log(bad []store.BadRecord, problems []string, missing map[string]string, allocErr error) {
	if allocErr != nil {
		k.Log.Warn("cannot tell which agents run", "err", allocErr)
	}
	for _, b := range bad {
		k.Log.Warn("host record ignored", "host", b.Host, "path", b.Path, "err", b.Err)
	}
	for _, p := range problems {
		k.Log.Warn("control entry skipped", "err", p)
	}
	hosts := make([]string, 0, len(missing))
	for h := range missing {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	for _, h := range hosts {
		k.Log.Warn("agent missing", "host", h, "why", missing[h])
	}
}

// agentAllocs returns the agent job's allocations: as the watch last saw
// them (w, as the pass took them), or read now when it is not live or its
// answer is older than what a pass read itself (as for the host records).
func (k *Checker) agentAllocs(ctx context.Context, w watched.Value[hostcheck.AgentAllocs]) (hostcheck.AgentAllocs, error) {
	if w.Live && w.Index >= k.atLeast {
		return w.Val, nil
	}
	allocs, index, err := hostcheck.ReadAgentAllocs(ctx, k.Jobs, k.AgentJob, k.Namespace, 0, 0)
	if err == nil {
		k.atLeast = max(k.atLeast, index)
	}
	return allocs, err
}

// corroborate corrects the records with the clusters and the operator's lists
// (hostcheck.Corroborate). The hosts left out are counted, and each logged
// once; the disputes are logged when they change.
func (k *Checker) corroborate(ctx context.Context, recs []store.HostRecord, nodes map[string]*api.NodeListStub, b hostcheck.Backing) []store.HostRecord {
	b.Members, b.Unread = k.Members.Read(ctx, recs)
	out := hostcheck.Corroborate(recs, nodes, b)
	k.Unbacked(len(out.Unbacked))
	k.Reporter.Unbacked(out.Unbacked)
	k.Reporter.Disputes(out.Disputes)
	return out.Records
}
