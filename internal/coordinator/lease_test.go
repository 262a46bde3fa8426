package coordinator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/rollboot/rollboot/internal/election"
	"github.com/rollboot/rollboot/internal/phase"
)

// A coordinator that cannot be sure it still leads (it was paused past half its
// lock's TTL, say, and resumed with a pass half done) touches no node: neither a
// drain, nor a canceled drain, nor eligibility, nor a leadership hand-over. Its
// successor may be managing them. Plans are written with check-and-set and fail
// by themselves.
func TestApplyFencedByLease(t *testing.T) {
	ctx := election.WithLapsedLease(context.Background())
	for _, tc := range applyCases() {
		t.Run(tc.name, func(t *testing.T) {
			c, log, _, in := applyFixture(t, tc)
			log.reset(0)
			err := c.apply(ctx, in, phase.Step(in))
			var nodeWrites []string
			for _, w := range log.get() {
				if !strings.HasPrefix(w, "put ") && !strings.HasPrefix(w, "delete ") {
					nodeWrites = append(nodeWrites, w)
				}
			}
			wantNode := slices.ContainsFunc(tc.want, func(w string) bool {
				return !strings.HasPrefix(w, "put ") && !strings.HasPrefix(w, "delete ")
			})
			if len(nodeWrites) > 0 {
				t.Errorf("node writes %q with a lapsed lease", nodeWrites)
			}
			if wantNode && !errors.Is(err, election.ErrLeaseLapsed) {
				t.Errorf("apply = %v, want election.ErrLeaseLapsed", err)
			}
			if !wantNode && err != nil {
				t.Errorf("apply = %v: a decision without node writes needs no lease", err)
			}
		})
	}
}
