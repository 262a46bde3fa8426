package status

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/rollboot/rollboot/internal/store"
)

func TestPolicyText(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		want string
	}{
		{name: "no coordinator yet, none stored", p: Policy{}, want: "none stored"},
		{name: "no coordinator yet, stored", p: Policy{Stored: 2}, want: "version 2 stored"},
		{name: "the safe default", p: Policy{Leader: "h1"},
			want: `none stored: the safe default applies (one group "default", one host at a time, always open); rollboot policy apply FILE sets one`},
		{name: "enforced", p: Policy{Leader: "h1", Stored: 3, Enforced: 3}, want: "version 3 enforced"},
		{name: "not yet taken", p: Policy{Leader: "h1", Stored: 4, Enforced: 3}, want: "version 3 enforced, version 4 stored (not yet taken)"},
		{name: "invalid, last good kept", p: Policy{Leader: "h1", Stored: 5, Enforced: 4, Problem: "the stored policy (version 5) is invalid: p.hcl:1:1: x"},
			want: "HELD: no new reboot starts: the stored policy (version 5) is invalid: p.hcl:1:1: x; hosts in a cycle finish it with version 4"},
		{name: "invalid, never a good one", p: Policy{Leader: "h1", Problem: "the stored policy cannot be read: y"},
			want: "HELD: no new reboot starts: the stored policy cannot be read: y; hosts in a cycle finish it with the safe default rules"},
		{name: "unreadable for status", p: Policy{Leader: "h1", StoredError: "403"}, want: "the stored policy cannot be read: 403"},
		{name: "the leader is gone", p: Policy{Leader: "h1", LeaderGone: true, Stored: 3, Enforced: 3},
			want: "version 3 stored; nothing is enforced while no coordinator leads"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Text(); got != tt.want {
				t.Errorf("Text = %q\nwant %q", got, tt.want)
			}
		})
	}
}

type policyStore struct {
	rec     store.PolicyRecord
	recErr  error
	e       store.Enforcement
	eErr    error
	lock    uint64
	lockErr error
}

func (s policyStore) Policy(context.Context) (store.PolicyRecord, error)     { return s.rec, s.recErr }
func (s policyStore) Enforcement(context.Context) (store.Enforcement, error) { return s.e, s.eErr }
func (s policyStore) LeaderLockIndex(context.Context) (uint64, error)        { return s.lock, s.lockErr }

// Whether the coordinator that last said it leads still holds the election
// lock: the lock's index is the one it read at the start of its term.
func TestLeaderGone(t *testing.T) {
	e := store.Enforcement{Leader: "h1 (pid 9)", PolicyVersion: 2, LockIndex: 40}
	tests := []struct {
		name string
		st   policyStore
		gone bool
		err  string
		text string
	}{
		{"it holds the lock", policyStore{e: e, lock: 40}, false, "", "h1 (pid 9)"},
		{"released, expired or taken", policyStore{e: e, lock: 57}, true, "",
			"none leads that has said so: h1 (pid 9), the last to say it led, no longer holds the election lock (released, expired, or taken by a coordinator that has not said so yet)"},
		{"the lock's variable is gone", policyStore{e: e, lockErr: store.ErrNotFound}, true, "",
			"none leads that has said so: h1 (pid 9), the last to say it led, no longer holds the election lock (released, expired, or taken by a coordinator that has not said so yet)"},
		{"the lock cannot be read", policyStore{e: e, lockErr: errors.New("403 Permission denied")}, false, "403 Permission denied",
			"h1 (pid 9) (cannot tell whether it still holds the election lock: 403 Permission denied)"},
		{"a record without the index tells nothing", policyStore{e: store.Enforcement{Leader: "h1 (pid 9)"}, lock: 57}, false, "", "h1 (pid 9)"},
		{"it follows the nodes without the event stream", policyStore{e: store.Enforcement{Leader: "h1 (pid 9)", LockIndex: 40,
			NodeWatch: "blocking queries: the node event stream cannot be had (x)"}, lock: 40}, false, "",
			"h1 (pid 9); it follows the nodes with blocking queries: the node event stream cannot be had (x)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := readPolicy(context.Background(), tt.st)
			if p.LeaderGone != tt.gone || p.LockError != tt.err {
				t.Errorf("gone %v (%q), want %v (%q)", p.LeaderGone, p.LockError, tt.gone, tt.err)
			}
			if got := p.Coordinator(); got != tt.text {
				t.Errorf("Coordinator() = %q\nwant %q", got, tt.text)
			}
			var out bytes.Buffer
			text{w: &out, wide: true}.policy(p)
			if !bytes.HasPrefix(out.Bytes(), []byte("Coordinator: "+tt.text+"\n")) {
				t.Errorf("status text:\n%s", out.String())
			}
		})
	}
}

func TestReadPolicy(t *testing.T) {
	since := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	p := readPolicy(context.Background(), policyStore{rec: store.PolicyRecord{PolicyVersion: store.PolicyVersion{Version: 2}},
		e: store.Enforcement{Leader: "h1 (pid 9)", PolicyVersion: 2, Since: since}})
	if !reflect.DeepEqual(p, Policy{Stored: 2, Leader: "h1 (pid 9)", LeaderSince: since, Enforced: 2}) {
		t.Errorf("read %+v", p)
	}
	p = readPolicy(context.Background(), policyStore{recErr: store.ErrNotFound, eErr: errors.New("403 coordinator")})
	if !reflect.DeepEqual(p, Policy{ReadError: "403 coordinator"}) {
		t.Errorf("read %+v", p)
	}
	var b bytes.Buffer
	text{w: &b}.policy(p)
	if want := "Coordinator: cannot tell which policy it enforces: 403 coordinator\nPolicy: none stored\n\n"; b.String() != want {
		t.Errorf("text %q, want %q", b.String(), want)
	}
}
