//go:build !oncepush_failpoints

package wallclock

import "time"

// Now is time.Now: the clock is stepped only in a build with the tag
// oncepush_failpoints.
func Now() time.Time { return time.Now() }
