package status

import (
	"bytes"
	"context"
	"errors"
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
	rec    store.PolicyRecord
	recErr error
	e      store.Enforcement
	eErr   error
}

func (s policyStore) Policy(context.Context) (store.PolicyRecord, error)     { return s.rec, s.recErr }
func (s policyStore) Enforcement(context.Context) (store.Enforcement, error) { return s.e, s.eErr }

func TestReadPolicy(t *testing.T) {
	since := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	p := readPolicy(context.Background(), policyStore{rec: store.PolicyRecord{PolicyVersion: store.PolicyVersion{Version: 2}},
		e: store.Enforcement{Leader: "h1 (pid 9)", PolicyVersion: 2, Since: since}})
	if p != (Policy{Stored: 2, Leader: "h1 (pid 9)", LeaderSince: since, Enforced: 2}) {
		t.Errorf("read %+v", p)
	}
	p = readPolicy(context.Background(), policyStore{recErr: store.ErrNotFound, eErr: errors.New("403 coordinator")})
	if p != (Policy{ReadError: "403 coordinator"}) {
		t.Errorf("read %+v", p)
	}
	var b bytes.Buffer
	writePolicy(&b, p)
	if want := "Coordinator: cannot tell which policy it enforces: 403 coordinator\nPolicy: none stored\n\n"; b.String() != want {
		t.Errorf("text %q, want %q", b.String(), want)
	}
}
