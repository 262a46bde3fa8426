package workloadread

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/workload"
)

// scriptedDeployments answers each blocking list of deployments with the next
// of its answers, then blocks until the query ends; it counts the lists.
type scriptedDeployments struct {
	fakeAPI
	answers []func() ([]*api.Deployment, error)

	dmu   sync.Mutex
	lists int
}

func (s *scriptedDeployments) ListDeployments(q *api.QueryOptions) ([]*api.Deployment, *api.QueryMeta, error) {
	s.dmu.Lock()
	n := s.lists
	s.lists++
	s.dmu.Unlock()
	if n >= len(s.answers) {
		<-q.Context().Done()
		return nil, nil, q.Context().Err()
	}
	list, err := s.answers[n]()
	return list, &api.QueryMeta{LastIndex: uint64(n + 1)}, err
}

func (s *scriptedDeployments) count() int {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	return s.lists
}

func deployment(id, jobID, status string) *api.Deployment {
	return &api.Deployment{ID: id, Namespace: "default", JobID: jobID, Status: status, CreateIndex: 1, JobCreateIndex: 1}
}

// Following the deployments wakes the loop when one appears, ends or
// changes status, not at its progress; a failed query leaves no answer, so
// passes read the list themselves until the next one.
func TestDeploymentsFollowed(t *testing.T) {
	list := func(ds ...*api.Deployment) func() ([]*api.Deployment, error) {
		return func() ([]*api.Deployment, error) { return ds, nil }
	}
	running := deployment("d1", "web", "running")
	progressed := *running
	progressed.ModifyIndex = 9
	api := &scriptedDeployments{answers: []func() ([]*api.Deployment, error){
		list(),            // the first answer: a change
		list(running),     // appears
		list(&progressed), // progress only
		list(deployment("d1", "web", "successful")), // ends
		func() ([]*api.Deployment, error) { return nil, errors.New("500 boom") },
	}}
	var d Deployments
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	changes := 0
	done := make(chan struct{})
	go func() {
		d.Follow(ctx, api, func() { mu.Lock(); changes++; mu.Unlock() })
		close(done)
	}()
	for deadline := time.Now().Add(10 * time.Second); api.count() < len(api.answers)+1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d lists, want %d", api.count(), len(api.answers)+1)
		}
	}
	mu.Lock()
	got := changes
	mu.Unlock()
	if got != 3 {
		t.Errorf("%d wake-ups, want 3 (the first answer, the deployment's start and its end)", got)
	}
	if _, ok := d.Latest(); ok {
		// The failed query's retry is the blocked one: no answer since it.
		t.Error("an answer after a failed query")
	}
	cancel()
	<-done
	if _, ok := d.Latest(); ok {
		t.Error("an answer after the term ended")
	}
}

// A pass takes the followed deployments instead of listing them, and lists
// them while the watch has no answer.
func TestReaderTakesFollowedDeployments(t *testing.T) {
	hosts := []Host{{Name: "web-1", NodeID: "node-web-1", Pool: "web"}}
	for _, tc := range []struct {
		name   string
		follow *Deployments
		lists  int
	}{
		{"followed", func() *Deployments {
			d := &Deployments{}
			d.set(deploymentsOf([]*api.Deployment{deployment("d1", "web", "running")}), true)
			return d
		}(), 0},
		{"no answer", &Deployments{}, 1},
		{"no watch", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &scriptedDeployments{fakeAPI: fakeAPI{jobs: []*api.Job{job("web", "service", "web")}},
				answers: []func() ([]*api.Deployment, error){func() ([]*api.Deployment, error) {
					return []*api.Deployment{deployment("d1", "web", "running")}, nil
				}}}
			r := Reader{API: f, Settings: workload.Settings{Deployments: true}, Deployments: tc.follow}
			holds := r.Holds(context.Background(), hosts)
			if f.count() != tc.lists {
				t.Errorf("%d lists of the deployments, want %d", f.count(), tc.lists)
			}
			if w := holds["web-1"]; !strings.Contains(w.String(), "deployment") {
				t.Errorf("web-1 held by %q, want by the running deployment", w)
			}
		})
	}
}
