package agent

// Two servers of one cluster are never down at once, whatever any record says.
// Admission keeps them apart only as long as the records it reads are honest; so
// a server host's agent also takes its cluster's reboot lock, a Nomad variable
// lock at <prefix>/serverlock/<product>-<cluster>, from its final go/no-go until
// its server is back and the cluster passes the post-reboot gate. A locked
// variable cannot be changed, unlocked or deleted without its lock ID, which
// Nomad shows only to its holder (and to management tokens): no forged record
// undoes it. The agent keeps the IDs across the reboot in a file
// (Options.ServerLockFile); a lost file leaves the lock to its TTL.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/health"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/watch"
)

// LockVariables is the part of the Nomad Variables API the server reboot locks
// use; *api.Variables implements it.
type LockVariables interface {
	Read(path string, q *api.QueryOptions) (*api.Variable, *api.QueryMeta, error)
	AcquireLock(v *api.Variable, q *api.WriteOptions) (*api.Variable, *api.WriteMeta, error)
	RenewLock(v *api.Variable, q *api.WriteOptions) (*api.VariableMetadata, *api.WriteMeta, error)
	ReleaseLock(v *api.Variable, q *api.WriteOptions) (*api.Variable, *api.WriteMeta, error)
}

// heldLock is one server reboot lock held by this host.
type heldLock struct {
	Path    string `json:"path"`
	ID      string `json:"lock_id"`
	Product string `json:"product"`
	Cluster string `json:"cluster"`
	Server  string `json:"server"` // this host's server in the cluster (its Raft ID)
}

// lockFile is what the agent keeps on disk across the reboot.
type lockFile struct {
	Host   string     `json:"host"`
	Grant  string     `json:"grant"`
	BootID string     `json:"boot_id"` // the boot the locks were taken in
	Locks  []heldLock `json:"locks"`
}

// lockState is the agent's part of the server reboot locks, owned by the loop.
type lockState struct {
	held    []heldLock // held by the attempt under way
	renewed time.Time  // when held were last renewed
	grant   string
	bootID  string
	// releasing is closed when the release of earlier locks (after the boot, or
	// after an attempt that did not reboot) has ended; nil when none ran.
	releasing chan struct{}
}

// serverLockPath is the path of a cluster's reboot lock: every character Nomad
// does not allow in a variable path (the dot among them) is stored as "~", as
// the store does with host names. Two clusters whose names differ only there
// share a lock: that costs waiting, never safety.
func serverLockPath(prefix, product, cluster string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '~'
	}, product+"-"+cluster)
	return prefix + "/serverlock/" + name
}

// lockClusters are the clusters whose locks a host with servers takes, one per
// lock path, in the order of their paths: every host takes them in the same
// order, so two hosts never wait for each other.
func lockClusters(prefix string, servers []store.Server) []store.Server {
	byPath := map[string]store.Server{}
	for _, s := range servers {
		byPath[serverLockPath(prefix, s.Product, s.Cluster)] = s
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	out := make([]store.Server, len(paths))
	for i, p := range paths {
		out[i] = byPath[p]
	}
	return out
}

// serverLockGate takes, at the final go/no-go of grant, the reboot lock of each
// of the host's server clusters that it does not hold yet. It says why the reboot must wait ("" once it holds them all,
// and on a host without servers). Locks already taken are kept while it waits
// for the next: the fixed order leaves no cycle to wait in.
func (a *Agent) serverLockGate(ctx context.Context, grant, bootID string) string {
	clusters := lockClusters(a.opt.Store.Prefix(), a.rec.Servers)
	if len(clusters) == 0 {
		return ""
	}
	switch {
	case a.opt.ServerLocks == nil || a.opt.ServerLockFile == "":
		return "the server reboot lock cannot be taken: the agent has no lock client or no lock file"
	case a.releasing():
		return "the server reboot locks of an earlier attempt are not released yet: its servers must pass their post-reboot gate first"
	}
	a.locks.grant, a.locks.bootID = grant, bootID
	for _, srv := range clusters {
		path := serverLockPath(a.opt.Store.Prefix(), srv.Product, srv.Cluster)
		if slices.ContainsFunc(a.locks.held, func(l heldLock) bool { return l.Path == path }) {
			continue
		}
		l, hold := a.acquireLock(ctx, path, srv, grant, bootID)
		if hold != "" {
			return hold
		}
		if len(a.locks.held) == 0 {
			a.locks.renewed = a.now()
		}
		a.locks.held = append(a.locks.held, l)
		if err := writeLockFile(a.opt.ServerLockFile, a.heldFile()); err != nil {
			// Without its ID on disk the lock would outlive a reboot until its
			// TTL: give it back and wait.
			a.locks.held = a.locks.held[:len(a.locks.held)-1]
			a.releaseLocks(ctx, []heldLock{l})
			return "cannot keep the server reboot lock: " + err.Error()
		}
	}
	return ""
}

// renewDue renews the locks the attempt holds when a quarter TTL passed since
// their last renewal; a lock lost meanwhile is dropped, to be taken again.
func (a *Agent) renewDue(ctx context.Context) {
	if len(a.locks.held) > 0 && a.now().Sub(a.locks.renewed) >= a.renewEvery() {
		a.locks.held = a.renewLocks(ctx, a.locks.held)
		a.locks.renewed = a.now()
	}
}

// releasing reports whether the release of earlier locks still runs.
func (a *Agent) releasing() bool {
	if a.locks.releasing == nil {
		return false
	}
	select {
	case <-a.locks.releasing:
		a.locks.releasing = nil
		return false
	default:
		return true
	}
}

func (a *Agent) heldFile() lockFile {
	return lockFile{Host: a.opt.Host, Grant: a.locks.grant, BootID: a.locks.bootID, Locks: slices.Clone(a.locks.held)}
}

// renewEvery is how often held locks are renewed: four times per TTL.
func (a *Agent) renewEvery() time.Duration { return a.opt.ServerLockTTL / 4 }

func (a *Agent) lockWrite(ctx context.Context) *api.WriteOptions {
	return (&api.WriteOptions{Namespace: a.opt.Namespace}).WithContext(ctx)
}

// acquireLock takes the lock at path for srv's cluster; otherwise it says why
// the reboot waits: who holds it, or why it could not be taken.
func (a *Agent) acquireLock(ctx context.Context, path string, srv store.Server, grant, bootID string) (heldLock, string) {
	delay := min(api.DefaultLockDelay, a.opt.ServerLockTTL)
	v := &api.Variable{Namespace: a.opt.Namespace, Path: path,
		Items: map[string]string{"host": a.opt.Host, "grant": grant, "boot_id": bootID, "server": srv.ID,
			"acquired_at": a.now().UTC().Format(time.RFC3339)},
		Lock: &api.VariableLock{TTL: a.opt.ServerLockTTL.String(), LockDelay: delay.String()}}
	out, _, err := a.opt.ServerLocks.AcquireLock(v, a.lockWrite(ctx))
	what := fmt.Sprintf("server lock of %s %q", srv.Product, srv.Cluster)
	switch {
	case lockStatus(err) == http.StatusConflict:
		return heldLock{}, what + " held by " + a.lockHolder(ctx, path)
	case err != nil:
		return heldLock{}, "cannot take the " + what + ": " + err.Error()
	case out == nil || out.LockID() == "":
		return heldLock{}, "cannot take the " + what + ": Nomad answered without a lock ID"
	}
	a.log.Info("server reboot lock taken", "lock", path, "grant", grant, "ttl", a.opt.ServerLockTTL)
	return heldLock{Path: path, ID: out.LockID(), Product: srv.Product, Cluster: srv.Cluster, Server: srv.ID}, ""
}

// lockHolder names the holder of the lock at path as its items say (the
// holder wrote them when it took the lock; nobody can change them without its
// lock ID).
func (a *Agent) lockHolder(ctx context.Context, path string) string {
	v, _, err := a.opt.ServerLocks.Read(path, (&api.QueryOptions{Namespace: a.opt.Namespace}).WithContext(ctx))
	if err != nil || v == nil || v.Items["host"] == "" {
		return "another holder"
	}
	return fmt.Sprintf("%s (grant %s)", v.Items["host"], v.Items["grant"])
}

// renewLocks renews held and returns those still held: a lock Nomad says is
// not ours any more (expired, or gone) is dropped; one whose renewal failed
// otherwise is kept, to be renewed again next time.
func (a *Agent) renewLocks(ctx context.Context, held []heldLock) []heldLock {
	var kept []heldLock
	for _, l := range held {
		v := &api.Variable{Namespace: a.opt.Namespace, Path: l.Path, Lock: &api.VariableLock{ID: l.ID}}
		_, _, err := a.opt.ServerLocks.RenewLock(v, a.lockWrite(ctx))
		switch s := lockStatus(err); {
		case err == nil:
			kept = append(kept, l)
		case s == http.StatusConflict || s == http.StatusNotFound:
			a.log.Warn("server reboot lock lost: it expired or is not ours any more", "lock", l.Path, "err", err)
		case ctx.Err() != nil:
			kept = append(kept, l) // the agent stops (the host going down): the file keeps it
		default:
			a.log.Warn("renew the server reboot lock; trying again later", "lock", l.Path, "err", err)
			kept = append(kept, l)
		}
	}
	return kept
}

// releaseLocks gives held back and returns those it could not (to try again):
// a lock already gone (expired, or released) counts as given back.
func (a *Agent) releaseLocks(ctx context.Context, held []heldLock) []heldLock {
	var left []heldLock
	for _, l := range held {
		v := &api.Variable{Namespace: a.opt.Namespace, Path: l.Path, Lock: &api.VariableLock{ID: l.ID}}
		_, _, err := a.opt.ServerLocks.ReleaseLock(v, a.lockWrite(ctx))
		switch s := lockStatus(err); {
		case err == nil:
			a.log.Info("server reboot lock released", "lock", l.Path)
		case s == http.StatusConflict || s == http.StatusNotFound || lockGone(err):
			a.log.Info("server reboot lock already gone", "lock", l.Path, "err", err)
		default:
			a.log.Warn("release the server reboot lock; trying again later", "lock", l.Path, "err", err)
			left = append(left, l)
		}
	}
	return left
}

// lockStatus is the HTTP status of a lock call's error (0 for none).
func lockStatus(err error) int {
	if err == nil {
		return 0
	}
	return statusOf(err)
}

// lockGone: Nomad answers a release of a variable, or of a lock, that is no
// longer there with a plain error (500).
func lockGone(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "doesn't exist") || strings.Contains(msg, "doesn't hold a lock")
}

// keepLocks renews the held locks every renewEvery while the host goes down,
// until the returned stop is called (or ctx ends).
func (a *Agent) keepLocks(ctx context.Context) (stop func()) {
	held := slices.Clone(a.locks.held)
	if len(held) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(a.renewEvery())
		defer t.Stop()
		for len(held) > 0 {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if held = a.renewLocks(ctx, held); len(held) == 0 && ctx.Err() == nil {
					a.log.Error("every server reboot lock was lost while the host goes down")
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// endServerLocks ends an attempt's hold on its locks. When the agent stops
// (ctx ended: the host going down, or a restart) they stay held, the file
// telling the next start; when the attempt ended without a reboot they are
// released once the host's servers pass their post-reboot gate (a reboot
// command may have stopped them before failing).
func (a *Agent) endServerLocks(ctx context.Context) {
	if len(a.locks.held) == 0 {
		return
	}
	lf := a.heldFile()
	a.locks.held = nil
	if ctx.Err() != nil {
		return
	}
	a.startRelease(ctx, lf)
}

// lockFileAtStart returns the locks an earlier agent of this host left held.
func (a *Agent) lockFileAtStart() (lockFile, bool) {
	if a.opt.ServerLockFile == "" {
		return lockFile{}, false
	}
	lf, err := readLockFile(a.opt.ServerLockFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return lockFile{}, false
	case err != nil:
		a.log.Error("server lock file unreadable: its locks, if any, expire by their TTL", "file", a.opt.ServerLockFile, "err", err)
		a.removeLockFile()
		return lockFile{}, false
	case len(lf.Locks) == 0:
		a.removeLockFile()
		return lockFile{}, false
	}
	return lf, true
}

// startRelease releases lf's locks beside the loop, once their servers are
// back; the loop's next attempt waits for it (releasing).
func (a *Agent) startRelease(ctx context.Context, lf lockFile) {
	done := make(chan struct{})
	a.locks.releasing = done
	a.bg.Go(func() {
		defer close(done)
		a.releaseWhenBack(ctx, lf)
	})
}

// releaseWhenBack renews lf's locks (at once: they went unrenewed while the
// host was down) until each of their servers passes its cluster's post-reboot
// gate, then releases them and removes the file. It touches neither the record
// nor anything else the loop owns.
func (a *Agent) releaseWhenBack(ctx context.Context, lf lockFile) {
	log := a.log.With("grant", lf.Grant)
	if a.opt.ServerLocks == nil || a.opt.Clusters == nil {
		log.Warn("server reboot locks held, but the agent cannot check its servers: they expire by their TTL", "file", a.opt.ServerLockFile)
		a.removeLockFile()
		return
	}
	held, renewed, last := lf.Locks, time.Time{}, ""
	for {
		if a.now().Sub(renewed) >= a.renewEvery() {
			held, renewed = a.renewLocks(ctx, held), a.now()
		}
		if len(held) == 0 {
			break
		}
		why := a.serversBack(ctx, held)
		if why == "" {
			if held = a.releaseLocks(ctx, held); len(held) == 0 {
				break
			}
		} else if why != last {
			log.Info("server reboot locks kept until the servers are back", "why", why)
			last = why
		}
		if !watch.Sleep(ctx, a.opt.RecheckEvery) {
			return
		}
	}
	a.removeLockFile()
}

// serversBack says why a server of held is not back yet ("" when all are).
func (a *Agent) serversBack(ctx context.Context, held []heldLock) string {
	for _, l := range held {
		h := a.opt.Clusters.Read(ctx, l.Product, l.Cluster)
		if ok, why := health.PostRebootGate(h, l.Server, a.now(), a.opt.ServerStableFor); !ok {
			return "post-reboot gate: " + why
		}
	}
	return ""
}

func (a *Agent) removeLockFile() {
	if err := os.Remove(a.opt.ServerLockFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
		a.log.Warn("remove the server lock file", "file", a.opt.ServerLockFile, "err", err)
	}
}

func readLockFile(path string) (lockFile, error) {
	var lf lockFile
	b, err := os.ReadFile(path)
	if err != nil {
		return lf, err
	}
	if err := json.Unmarshal(b, &lf); err != nil {
		return lf, fmt.Errorf("%s: %w", path, err)
	}
	return lf, nil
}

// writeLockFile replaces the file at path with lf, readable by the agent's user
// only (a lock ID lets whoever has it release the lock), synced before it
// replaces the old one, so that a reboot right after finds it whole.
func writeLockFile(path string, lf lockFile) error {
	b, err := json.Marshal(lf)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, there is nothing left to remove
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
