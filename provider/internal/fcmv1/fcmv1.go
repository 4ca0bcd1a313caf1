// Package fcmv1 holds the rules of FCM's HTTP v1 message that RuStore's push
// API copies: how much of a message counts against the payload limit, and
// the time to live it carries. The two providers build their own messages
// (the fields differ); what they measure is the same.
package fcmv1

import (
	"encoding/json"
	"time"
)

// PayloadSize is what counts against the payload limit: the notification
// and data objects, JSON-encoded. The rest of the request (token, platform
// blocks) is not part of what the device receives.
func PayloadSize[N any](n *N, data map[string]string) int {
	size := 0
	if n != nil {
		b, _ := json.Marshal(n)
		size += len(b)
	}
	if len(data) > 0 {
		b, _ := json.Marshal(data)
		size += len(b)
	}
	return size
}

// TTLSeconds is how long a message expiring at expires is worth keeping, in
// whole seconds from now: 0 once past, at most limit.
func TTLSeconds(now, expires time.Time, limit time.Duration) int64 {
	d := expires.Sub(now).Truncate(time.Second)
	return int64(min(max(d, 0), limit) / time.Second)
}
