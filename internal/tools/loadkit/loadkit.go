// Package loadkit is what the load tools (internal/tools/loadgen and
// internal/tools/bench) share: the notification id a fake provider sees for
// a send, and percentiles of measured durations.
package loadkit

import (
	"slices"
	"time"

	"github.com/oncepush/oncepush"
)

// Percentile returns the p-quantile (0 < p ≤ 1) of d, rounded to 100 µs;
// zero for no durations. sorted must be in ascending order (Sorted).
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))].Round(100 * time.Microsecond)
}

// Sorted returns a sorted copy of d.
func Sorted(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

// Max returns the longest of d (zero for none), rounded as Percentile.
func Max(d []time.Duration) time.Duration {
	return slices.Max(append(d, 0)).Round(100 * time.Microsecond)
}

// NotificationID is the oncepush_id a provider is sent for a notification
// of type typ to recipient, posted with dedupeKey (POST /v1/notifications
// keys the notification by it).
func NotificationID(typ, recipient, dedupeKey string) string {
	return oncepush.NotificationID(typ, recipient, map[string]any{"dedupKey": dedupeKey})
}
