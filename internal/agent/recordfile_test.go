package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/store"
	"github.com/rollboot/rollboot/internal/syncbuf"
)

// recordFileAt returns what the record file at path keeps.
func recordFileAt(path string) (recordFile, error) {
	var f recordFile
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	return f, err
}

// readRecordFile returns what the record file at path keeps, failing t when
// it cannot be read.
func readRecordFile(t *testing.T, path string) recordFile {
	t.Helper()
	f, err := recordFileAt(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The record file keeps every record the agent wrote, with the index Nomad
// gave it, readable by the agent's user only.
func TestRecordFileKeepsEachWrite(t *testing.T) {
	e := newAgentEnv(t, nomadsim.Config{Clients: 1})
	o := e.options(&countingRebooter{ch: make(chan struct{}, 1)}, nil)
	o.RecordFile = filepath.Join(t.TempDir(), "state", "record.json")
	o.NotifiedPollEvery = o.PollEvery // the sentinel seen at once
	stop, _ := run(t, New(o))
	defer stop()
	rec := waitRecord(t, e.st, e.h.Name, "the first record", func(r store.HostRecord) bool { return r.BootID == e.bootID })
	if err := os.WriteFile(filepath.Join(e.h.Dir, "reboot-required"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rec = waitRecord(t, e.st, e.h.Name, "the need", func(r store.HostRecord) bool { return r.RebootRequired })
	waitFor(t, "the file to keep the need's write", func() bool {
		f, err := recordFileAt(o.RecordFile)
		return err == nil && f.Index == rec.ModifyIndex
	})
	f := readRecordFile(t, o.RecordFile)
	kept, err := store.HostFromItems("file", f.Items, f.Index)
	if err != nil || kept.Host != e.h.Name || !kept.Equal(rec) {
		t.Fatalf("file keeps %+v (err %v), want the stored record %+v", kept, err, rec)
	}
	if fi, err := os.Stat(o.RecordFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v (err %v), want 0600", fi.Mode(), err)
	}
}

// A record written since the file was kept (here a forged one) makes the
// start's write conflict: the agent reads the stored record then and writes
// its own over it. A file of another host, or one that does not decode, is
// not used: the record is read from Nomad, and the warning says why.
func TestRecordFileNotTrustedOverNomad(t *testing.T) {
	for _, tc := range []struct {
		name string
		file func(t *testing.T, e *agentEnv, path string, before store.HostRecord)
		warn string
	}{
		{"written since", func(t *testing.T, e *agentEnv, path string, before store.HostRecord) {
			New(Options{Host: e.h.Name, RecordFile: path}).keepRecord(before)
			forged := before
			forged.RebootRequired, forged.Reason = true, "forged"
			if _, err := e.st.PutHost(context.Background(), forged); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"another host", func(t *testing.T, e *agentEnv, path string, before store.HostRecord) {
			other := before
			other.Host = "someone-else"
			New(Options{Host: "someone-else", RecordFile: path}).keepRecord(other)
		}, "host record file of another host"},
		{"garbled", func(t *testing.T, _ *agentEnv, path string, _ store.HostRecord) {
			if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "host record file unreadable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newAgentEnv(t, nomadsim.Config{Clients: 1})
			before := store.HostRecord{Host: e.h.Name, NodeID: e.h.NodeID, BootID: "the-boot-before"}
			var err error
			if before.ModifyIndex, err = e.st.PutHost(context.Background(), before); err != nil {
				t.Fatal(err)
			}
			log := &syncbuf.Buffer{}
			o := e.options(&countingRebooter{ch: make(chan struct{}, 1)}, log)
			o.RecordFile = filepath.Join(t.TempDir(), "record.json")
			tc.file(t, e, o.RecordFile, before)
			stop, _ := run(t, New(o))
			defer stop()
			rec := waitRecord(t, e.st, e.h.Name, "the record of this boot", func(r store.HostRecord) bool { return r.BootID == e.bootID })
			if rec.RebootRequired || rec.Reason == "forged" {
				t.Fatalf("stored record %+v, want the agent's own (no need)", rec)
			}
			waitFor(t, "the file to keep the start's write", func() bool {
				f, err := recordFileAt(o.RecordFile)
				return err == nil && f.Index == rec.ModifyIndex // the garbled one until the agent writes
			})
			if tc.warn != "" && !strings.Contains(log.String(), tc.warn) {
				t.Fatalf("no warning %q in the log:\n%s", tc.warn, log.String())
			}
		})
	}
}

// A file that cannot be kept changes nothing else: the agent publishes, and
// says once why the next start reads the record from Nomad.
func TestRecordFileThatCannotBeKept(t *testing.T) {
	e := newAgentEnv(t, nomadsim.Config{Clients: 1})
	dir := t.TempDir()
	blocker := filepath.Join(dir, "not-a-dir")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	log := &syncbuf.Buffer{}
	o := e.options(&countingRebooter{ch: make(chan struct{}, 1)}, log)
	o.RecordFile = filepath.Join(blocker, "record.json")
	o.NotifiedPollEvery = o.PollEvery
	stop, _ := run(t, New(o))
	defer stop()
	waitRecord(t, e.st, e.h.Name, "the first record", func(r store.HostRecord) bool { return r.BootID == e.bootID })
	if err := os.WriteFile(filepath.Join(e.h.Dir, "reboot-required"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitRecord(t, e.st, e.h.Name, "the need", func(r store.HostRecord) bool { return r.RebootRequired })
	if n := strings.Count(log.String(), "cannot keep the host record file"); n != 1 {
		t.Fatalf("%d warnings about the file, want 1:\n%s", n, log.String())
	}
}

// waitFor waits up to 20 s for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A file that names this boot (a restart without a reboot), at an index
// Nomad has not reached, over a record Nomad does not have (Nomad's state
// restored from a snapshot older than the file, or a cluster built anew): the
// start has nothing to write, and the record's watch, had it started past the
// file's index, would have waited for Nomad's index to pass it. It reads the
// record first instead, finds it gone, and the agent writes it again.
func TestRecordFileAheadOfNomad(t *testing.T) {
	e := newAgentEnv(t, nomadsim.Config{Clients: 1})
	log := &syncbuf.Buffer{}
	o := e.options(&countingRebooter{ch: make(chan struct{}, 1)}, log)
	o.RecordFile = filepath.Join(t.TempDir(), "record.json")
	stop, _ := run(t, New(o))
	rec := waitRecord(t, e.st, e.h.Name, "the first record", func(r store.HostRecord) bool { return r.BootID == e.bootID })
	waitFor(t, "the file to keep it", func() bool {
		f, err := recordFileAt(o.RecordFile)
		return err == nil && f.Index == rec.ModifyIndex
	})
	stop()
	// The agent's record as a state of Nomad's ahead of this one keeps it.
	ahead := rec
	ahead.ModifyIndex += 1 << 40
	New(Options{Host: e.h.Name, RecordFile: o.RecordFile}).keepRecord(ahead)
	if err := e.st.DeleteHost(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	stop, _ = run(t, New(o))
	defer stop()
	again := waitRecord(t, e.st, e.h.Name, "the record written again", func(r store.HostRecord) bool { return r.BootID == e.bootID })
	if !again.Equal(rec) {
		t.Fatalf("stored record %+v, want the agent's own %+v", again, rec)
	}
	if !strings.Contains(log.String(), "restoring it") {
		t.Fatalf("no warning that the record was written again in the log:\n%s", log.String())
	}
}

// A record gone at an index of Nomad's behind the one the record's watch
// asks from (Nomad's state went back under a running agent) is offered to
// the loop as gone, once Nomad's wait runs out, instead of being waited for
// until Nomad's index passes the agent's.
func TestWatchRecordGoneBehindItsIndex(t *testing.T) {
	e := newAgentEnv(t, nomadsim.Config{Clients: 1})
	o := e.options(&countingRebooter{ch: make(chan struct{}, 1)}, nil)
	o.WatchWait = 100 * time.Millisecond
	a := New(o)
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan recordChange, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.watchRecord(ctx, changes, 1<<40) // the agent's last write, in a state Nomad no longer has
	}()
	defer func() { cancel(); <-done }()
	select {
	case ch := <-changes:
		if ch.index != 0 || ch.behind != 1<<40 {
			t.Fatalf("offered %+v, want the record gone behind index %d", ch, uint64(1<<40))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the record gone behind the watch's index was never offered")
	}
}
