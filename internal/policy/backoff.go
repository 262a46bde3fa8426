package policy

import (
	"math"
	"time"
)

// Backoff returns how long to wait after the attempt-th consecutive failure:
// base for the first (attempt 1, and also 0 or less), doubling with each
// further attempt, and never more than maxWait. A maxWait of 0 or less means no cap
// other than the largest time.Duration. It never overflows, whatever attempt
// is. A base of 0 or less gives 0.
func Backoff(base, maxWait time.Duration, attempt int) time.Duration {
	if base <= 0 {
		return 0
	}
	limit := maxWait
	if limit <= 0 {
		limit = math.MaxInt64
	}
	d := base
	for i := 1; i < attempt && d < limit; i++ {
		if d > limit/2 {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}
