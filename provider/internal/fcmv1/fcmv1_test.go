package fcmv1

import (
	"testing"
	"time"
)

func TestPayloadSizeCountsOnlyWhatIsThere(t *testing.T) {
	t.Parallel()
	type note struct {
		Title string `json:"title"`
	}
	if n := PayloadSize[note](nil, nil); n != 0 {
		t.Errorf("no notification, no data: %d bytes, want 0", n)
	}
	// {"title":"Hi"} is 14 bytes, {"k":"v"} 9.
	if n := PayloadSize(&note{Title: "Hi"}, map[string]string{"k": "v"}); n != 14+9 {
		t.Errorf("notification and data: %d bytes, want 23", n)
	}
}

func TestTTLSecondsIsClamped(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 14, 7, 0, 0, time.UTC)
	for _, tt := range []struct {
		expires time.Time
		want    int64
	}{
		{now.Add(50*time.Minute + 900*time.Millisecond), 3000}, // whole seconds
		{now.Add(-time.Minute), 0},                             // past
		{now.Add(100 * 24 * time.Hour), 3600},                  // at most the limit
	} {
		if got := TTLSeconds(now, tt.expires, time.Hour); got != tt.want {
			t.Errorf("TTLSeconds(now, now+%s, 1h) = %d, want %d", tt.expires.Sub(now), got, tt.want)
		}
	}
}
