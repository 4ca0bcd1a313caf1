package oncepush

import (
	"context"
	"time"
)

// loop is the shape of the engine's three background loops (delivery
// workers, campaigns, cleanup): run step when the timer fires or wake
// receives, then wait as long as step says, until ctx ends. A nil wake never
// receives. idle, if set, runs before every wait but the first, so a test can
// tell that the loop has nothing left to do.
func loop(ctx context.Context, first time.Duration, wake <-chan struct{}, idle func(), step func() time.Duration) {
	t := time.NewTimer(first)
	defer t.Stop()
	for first := true; ; first = false {
		if !first && idle != nil {
			idle()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		// A tick that fired while step ran after a wake is discarded by
		// Reset (Go 1.23 timers), so the next wait is the one step asked for.
		t.Reset(step())
	}
}
