package pushtest

import (
	"sync"
	"time"
)

// Clock is a clock that moves only when the test moves it. Give it to
// oncepush.Config.Clock: a scheduled push is then sent when the test moves the
// clock to its time, a retry once the clock passes its backoff, and while the
// clock stands, neither happens.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at t (UTC, truncated to microseconds, the
// databases' resolution).
func NewClock(t time.Time) *Clock {
	return &Clock{t: t.UTC().Truncate(time.Microsecond)}
}

// Now implements oncepush.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d).Truncate(time.Microsecond)
	return c.t
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t.UTC().Truncate(time.Microsecond)
}
