package agent

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rollboot/rollboot/internal/store"
)

// The agent keeps the last record it wrote on the host's disk
// (Options.RecordFile, agent.record_file), so that its next start, the one
// after a reboot above all, takes the record from there instead of reading it
// back from Nomad: one request fewer per reboot, and one round trip fewer
// before the new boot is reported. The file is the agent's own copy of its
// own writes, each kept once Nomad took it, with the index Nomad gave it.
// It decides nothing the stored record would not: the start's write is
// check-and-set on that index, so a record written since by anyone (another
// token holder, `rollboot forget`, a write the file missed) makes it conflict,
// and the agent reads the stored record then, as it reads it when there is no
// file. Kept without a sync: a file lost or torn in a crash is one that does
// not decode, and the record is read instead.

// recordFile is what the file holds: the record as its variable's items, and
// the index Nomad gave that write.
type recordFile struct {
	Index uint64            `json:"index"`
	Items map[string]string `json:"items"`
}

// recordFromFile returns the record the file keeps, when there is one of
// this host that decodes.
func (a *Agent) recordFromFile() (store.HostRecord, bool) {
	path := a.opt.RecordFile
	if path == "" {
		return store.HostRecord{}, false
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return store.HostRecord{}, false
	}
	var f recordFile
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	var rec store.HostRecord
	if err == nil {
		rec, err = store.HostFromItems(path, f.Items, f.Index)
	}
	switch {
	case err != nil:
		a.log.Warn("host record file unreadable: reading the record from Nomad", "file", path, "err", err)
	case rec.Host != a.opt.Host || f.Index == 0:
		a.log.Warn("host record file of another host: reading the record from Nomad", "file", path, "file_host", rec.Host)
	default:
		return rec, true
	}
	return store.HostRecord{}, false
}

// keepRecord writes rec, just written to Nomad, to the file. A failure is
// logged when it differs from the last one; the next start reads the record
// from Nomad instead.
func (a *Agent) keepRecord(rec store.HostRecord) {
	path := a.opt.RecordFile
	if path == "" {
		return
	}
	b, err := json.Marshal(recordFile{Index: rec.ModifyIndex, Items: rec.Items()})
	if err == nil {
		err = replaceRecordFile(path, b)
	}
	switch {
	case err != nil && err.Error() != a.recordFileErr:
		a.log.Warn("cannot keep the host record file: the next start reads the record from Nomad", "file", path, "err", err)
		a.recordFileErr = err.Error()
	case err == nil && a.recordFileErr != "":
		a.log.Info("host record file kept again", "file", path)
		a.recordFileErr = ""
	}
}

// replaceRecordFile replaces the file at path with b, readable by the agent's
// user only: written beside it, then renamed over it, so that a reader finds
// the old record or the new one whole. The directory is made (0700) only when
// it is missing: a write costs the write and the rename, at every record the
// agent writes.
func replaceRecordFile(path string, b []byte) error {
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, b, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
			err = os.WriteFile(tmp, b, 0o600)
		}
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
