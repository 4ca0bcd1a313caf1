// Package backoff computes retry delays: exponential from a minimum, capped at a
// maximum, with ±20 % jitter so that many deliveries failing together do not
// come back together.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Jitter is the relative spread of a delay: ±20 %.
const Jitter = 0.2

// Delay returns the wait before retry number attempt (1 = the first retry):
// min·2^(attempt-1), at most max, then multiplied by a factor in [0.8, 1.2).
// rnd returns a number in [0, 1); nil uses math/rand/v2.
func Delay(attempt int, min, max time.Duration, rnd func() float64) time.Duration {
	if rnd == nil {
		rnd = rand.Float64
	}
	base := min
	for i := 1; i < attempt && base < max; i++ {
		base *= 2
	}
	base = minDur(base, max)
	factor := 1 - Jitter + 2*Jitter*rnd()
	return time.Duration(float64(base) * factor)
}

func minDur(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}
