package pushtest

import "context"

// WaitStats blocks until cond holds for the fake's stats, or ctx ends, and
// reports whether it got there: a test waits for a request to settle (say, as
// abandoned) on the fake's own signal rather than polling. Compiled only into
// this package's tests.
func (s *FakeServer) WaitStats(ctx context.Context, cond func(FakeStats) bool) bool {
	for {
		s.mu.Lock()
		next := s.notify
		s.mu.Unlock()
		// Read after taking the channel: a change in between closes it.
		st := s.Stats()
		if cond(st) {
			return true
		}
		select {
		case <-next:
		case <-ctx.Done():
			return false
		}
	}
}
