package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"
)

// slowVars answers reads after a short wait, counting how many run at once; a
// path in missing is not found, a path in failing fails.
type slowVars struct {
	Variables
	mu               sync.Mutex
	running, maxRuns int
	missing, failing map[string]bool
}

func (v *slowVars) Read(path string, q *api.QueryOptions) (*api.Variable, *api.QueryMeta, error) {
	v.mu.Lock()
	v.running++
	v.maxRuns = max(v.maxRuns, v.running)
	v.mu.Unlock()
	defer func() { v.mu.Lock(); v.running--; v.mu.Unlock() }()
	select {
	case <-time.After(2 * time.Millisecond):
	case <-q.Context().Done():
		return nil, nil, q.Context().Err()
	}
	switch {
	case v.missing[path]:
		return nil, &api.QueryMeta{}, api.ErrVariablePathNotFound
	case v.failing[path]:
		return nil, nil, errors.New("500 boom")
	}
	return &api.Variable{Path: path}, &api.QueryMeta{}, nil
}

// A new leader reads many variables at once, never more than ReadParallelism,
// each in its place; one deleted since the list is nil; a failure is returned.
func TestReadEachIsBoundedAndOrdered(t *testing.T) {
	paths := make([]string, 100)
	for i := range paths {
		paths[i] = fmt.Sprintf("rollboot/plan/h%03d", i)
	}
	vars := &slowVars{missing: map[string]bool{paths[7]: true}}
	s := New(vars, "rollboot", "")
	got, err := s.readEach(context.Background(), paths)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		switch {
		case i == 7 && v != nil:
			t.Errorf("a deleted variable was returned: %+v", v)
		case i != 7 && (v == nil || v.Path != paths[i]):
			t.Errorf("variable %d = %+v, want %s", i, v, paths[i])
		}
	}
	if vars.maxRuns > ReadParallelism || vars.maxRuns < 2 {
		t.Errorf("%d reads at once, want 2..%d", vars.maxRuns, ReadParallelism)
	}

	vars = &slowVars{failing: map[string]bool{paths[50]: true}}
	if _, err := New(vars, "rollboot", "").readEach(context.Background(), paths); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("err = %v, want the failed read's", err)
	}
	if got, err := s.readEach(context.Background(), nil); err != nil || len(got) != 0 {
		t.Errorf("no paths: %v, %v", got, err)
	}
}
