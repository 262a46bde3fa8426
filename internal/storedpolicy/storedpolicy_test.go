package storedpolicy

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/config"
	"github.com/rollboot/rollboot/internal/nomadsim"
	"github.com/rollboot/rollboot/internal/simtest"
	"github.com/rollboot/rollboot/internal/store"
)

func newSim(t *testing.T) (*store.Store, *api.Client) {
	t.Helper()
	_, c := simtest.Start(t, nomadsim.Config{Clients: 3, ClientPools: []string{"web", "batch"}}, nil)
	return store.New(c.Variables(), "rollboot", ""), c
}

const webPolicy = `group "web" {
  filter      = "NodePool == \"web\""
  concurrency = 2
}
`

func apply(t *testing.T, st *store.Store, c *api.Client, src string) (*Change, store.PolicyRecord) {
	t.Helper()
	ch, err := Prepare(context.Background(), st, c.Nodes(), []byte(src), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := ch.Apply(context.Background(), st, "tester", time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return ch, rec
}

func TestApplyDiffAndHistory(t *testing.T) {
	st, c := newSim(t)
	ch, rec := apply(t, st, c, webPolicy)
	if rec.Version != 1 || len(rec.History) != 0 {
		t.Fatalf("first apply: %+v", rec)
	}
	var b bytes.Buffer
	WriteDiff(&b, ch)
	for _, want := range []string{
		"No policy is stored (the safe default applies): this file becomes version 1.",
		`  + group "web".filter = "NodePool == \"web\""`,
		`  + group "web".concurrency = 2`,
		"Hosts whose group changes:\n",
		": default => web\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("diff lacks %q:\n%s", want, b.String())
		}
	}
	if n := strings.Count(b.String(), "=> web"); n != 2 {
		t.Errorf("%d hosts move to web, want the 2 of pool web:\n%s", n, b.String())
	}

	ch, rec = apply(t, st, c, strings.Replace(webPolicy, "concurrency = 2", "concurrency = 1", 1)+"drain {\n  deadline = \"30m\"\n}\n")
	if rec.Version != 2 || len(rec.History) != 1 || rec.History[0].Version != 1 || rec.History[0].Source != webPolicy {
		t.Fatalf("second apply: %+v", rec)
	}
	b.Reset()
	WriteDiff(&b, ch)
	for _, want := range []string{
		"Stored policy: version 1, applied by tester at ",
		`  ~ drain.deadline: "1h" => "30m"`,
		`  ~ group "web".concurrency: 2 => 1`,
		"Hosts: no host changes group.",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("diff lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "filter") {
		t.Errorf("an unchanged setting is shown:\n%s", b.String())
	}
}

// Someone who applied between the read and the write wins: the late writer is
// refused and the stored policy is the other's.
func TestApplyCheckAndSet(t *testing.T) {
	st, c := newSim(t)
	ctx := context.Background()
	_, first := apply(t, st, c, webPolicy)
	late, err := Prepare(ctx, st, c.Nodes(), []byte("group \"late\" {}\n"), "late.hcl")
	if err != nil {
		t.Fatal(err)
	}
	_, other := apply(t, st, c, "group \"other\" {}\n")
	if _, err := late.Apply(ctx, st, "late", time.Now(), nil); !errors.Is(err, store.ErrConflict) ||
		!strings.Contains(err.Error(), "someone applied another version") {
		t.Fatalf("a late apply: %v", err)
	}
	// -check-index: only the given index is accepted.
	stale := first.ModifyIndex
	if _, err := late.Apply(ctx, st, "late", time.Now(), &stale); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a stale -check-index: %v", err)
	}
	zero := uint64(0)
	if _, err := late.Apply(ctx, st, "late", time.Now(), &zero); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("-check-index 0 with a stored policy: %v", err)
	}
	got, err := st.Policy(ctx)
	if err != nil || got.Version != other.Version || got.Source != "group \"other\" {}\n" {
		t.Fatalf("stored: %+v, %v", got, err)
	}
	fresh, err := Prepare(ctx, st, nil, []byte("group \"late\" {}\n"), "late.hcl")
	if err != nil {
		t.Fatal(err)
	}
	idx := got.ModifyIndex
	if rec, err := fresh.Apply(ctx, st, "late", time.Now(), &idx); err != nil || rec.Version != 3 {
		t.Fatalf("apply with the current index: %+v, %v", rec, err)
	}
}

// A file that does not pass its checks is never stored: the stored policy stays.
func TestInvalidFileIsNotStored(t *testing.T) {
	st, c := newSim(t)
	ctx := context.Background()
	_, rec := apply(t, st, c, webPolicy)
	_, err := Prepare(ctx, st, c.Nodes(), []byte("group \"web\" {\n  concurrency = 0\n}\nnomad {}\n"), "bad.hcl")
	var errs config.Errors
	if !errors.As(err, &errs) || len(errs) != 2 || !strings.Contains(err.Error(), "bad.hcl:2:17: group \"web\".concurrency: must be at least 1") ||
		!strings.Contains(err.Error(), "bad.hcl:4:1: nomad block is a local setting") {
		t.Fatalf("error = %v", err)
	}
	got, err := st.Policy(ctx)
	if err != nil || got.Version != rec.Version || got.ModifyIndex != rec.ModifyIndex {
		t.Fatalf("stored policy changed: %+v, %v", got, err)
	}
}

// A stored policy written by hand that does not compile is compared as the
// safe default, and replaced by a good one.
func TestApplyOverAnInvalidStoredPolicy(t *testing.T) {
	st, c := newSim(t)
	ctx := context.Background()
	if _, _, err := c.Variables().Create(&api.Variable{Path: "rollboot/policy", Items: map[string]string{
		"policy_version": "4", "source": "group {", "filename": "hand.hcl"}}, nil); err != nil {
		t.Fatal(err)
	}
	ch, err := Prepare(ctx, st, c.Nodes(), []byte(webPolicy), "p.hcl")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	WriteDiff(&b, ch)
	if !strings.Contains(b.String(), "The stored policy (version 4) cannot be used: hand.hcl:1:") || !strings.Contains(b.String(), "becomes version 5") {
		t.Errorf("diff:\n%s", b.String())
	}
	if rec, err := ch.Apply(ctx, st, "fixer", time.Now(), nil); err != nil || rec.Version != 5 {
		t.Fatalf("apply: %+v, %v", rec, err)
	}
}

// A setting of a block in a block is named with both: a group's drain
// deadline is not the top-level drain's, and the blocks after it are read as
// what they are.
func TestDiffNestedSettings(t *testing.T) {
	old, err := Check([]byte("group \"web\" {\n  concurrency = 1\n}\n"), "old.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := Check([]byte("group \"web\" {\n  concurrency = 2\n  drain {\n    deadline = \"3h\"\n  }\n}\n"), "new.hcl")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]SettingChange{}
	for _, c := range DiffSettings(old, cur) {
		got[c.Key] = c
	}
	if c, ok := got[`group "web".drain.deadline`]; !ok || c.New != `"3h"` {
		t.Errorf("changes %+v: want group \"web\".drain.deadline set to \"3h\"", got)
	}
	if _, ok := got["drain.deadline"]; ok {
		t.Errorf("changes %+v: the top-level drain.deadline did not change", got)
	}
	if c, ok := got[`group "web".concurrency`]; !ok || c.Old != "1" || c.New != "2" {
		t.Errorf("changes %+v: want group \"web\".concurrency 1 → 2", got)
	}
}

// Windowing one group changes the windows of a group that names none: it
// inherits every window of the file. The diff shows each group's effective
// windows, so that change is not silent.
func TestDiffEffectiveWindows(t *testing.T) {
	old, err := Check([]byte("group \"a\" {\n  filter = \"NodePool == \\\"a\\\"\"\n}\ngroup \"b\" {\n  concurrency = 1\n}\n"), "old.hcl")
	if err != nil {
		t.Fatal(err)
	}
	cur, err := Check([]byte(`window "night" {
  days  = ["mon"]
  start = "22:00"
  end   = "04:00"
}
group "a" {
  filter  = "NodePool == \"a\""
  windows = ["night"]
}
group "b" {
  concurrency = 1
}
`), "new.hcl")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]SettingChange{}
	for _, c := range DiffSettings(old, cur) {
		got[c.Key] = c
	}
	for _, g := range []string{"a", "b"} {
		k := `group "` + g + `".effective_windows`
		if c, ok := got[k]; !ok || c.Old != "any time (no window)" || c.New != `["night"]` {
			t.Errorf("%s: %+v, want any time (no window) → [\"night\"]", k, got[k])
		}
	}
	if c := DiffSettings(cur, cur); len(c) != 0 {
		t.Errorf("a policy compared with itself: %+v", c)
	}
}
