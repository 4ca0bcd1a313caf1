package fakepush

import "context"

// WaitCount blocks until read reports at least n, or ctx ends, and reports
// whether it got there. read returns the current count and a channel that is
// closed at the next arrival (both read under the caller's lock).
func WaitCount(ctx context.Context, n int, read func() (int, <-chan struct{})) bool {
	for {
		got, next := read()
		if got >= n {
			return true
		}
		select {
		case <-next:
		case <-ctx.Done():
			return false
		}
	}
}

// WaitStats blocks until cond holds for the fake's stats, or ctx ends, and
// reports whether it got there: a test waits for a request to settle (say, as
// abandoned) on the fake's own signal rather than polling.
func (s *Server) WaitStats(ctx context.Context, cond func(Stats) bool) bool {
	for {
		s.mu.Lock()
		next := s.notify
		s.mu.Unlock()
		// Read after taking the channel: a change in between closes it.
		if cond(s.Stats()) {
			return true
		}
		select {
		case <-next:
		case <-ctx.Done():
			return false
		}
	}
}
