package store

import (
	"context"
	"errors"
	"sync"

	"github.com/hashicorp/nomad/api"

	"github.com/rollboot/rollboot/internal/parallel"
)

// ReadParallelism bounds the variables read at once when many must be read (a
// new leader loading every plan and host record, the two side by side): one GET
// per variable in sequence makes a new leader wait a round trip per host, and
// an unbounded burst would put thousands of requests on the Nomad servers at
// once, past the connections Nomad accepts from one client (100 by default).
const ReadParallelism = 32

// readEach reads the variables at paths, at most ReadParallelism at a time, and
// returns them in the order of paths; a variable deleted since it was listed is
// nil. The first error other than ErrNotFound is returned (the reads not started
// yet are skipped then). Every worker has returned when it returns.
func (s *Store) readEach(ctx context.Context, paths []string) ([]*api.Variable, error) {
	out := make([]*api.Variable, len(paths))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
	)
	parallel.Each(len(paths), ReadParallelism, func() bool { return ctx.Err() != nil }, func(i int) {
		v, _, err := s.read(ctx, paths[i], 0, 0)
		if err == nil {
			out[i] = v
			return
		}
		if errors.Is(err, ErrNotFound) {
			return
		}
		mu.Lock()
		if first == nil {
			first = err
			cancel()
		}
		mu.Unlock()
	})
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return out, first
}
