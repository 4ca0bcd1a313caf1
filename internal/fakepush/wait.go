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
