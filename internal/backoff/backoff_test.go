package backoff

import (
	"testing"
	"time"
)

func TestDelayDoublesAndCaps(t *testing.T) {
	t.Parallel()
	mid := func() float64 { return 0.5 } // factor exactly 1
	want := []time.Duration{15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute}
	for i, w := range want {
		if got := Delay(i+1, 15*time.Second, time.Hour, mid); got != w {
			t.Errorf("Delay(%d) = %s, want %s", i+1, got, w)
		}
	}
	if got := Delay(40, 15*time.Second, time.Hour, mid); got != time.Hour {
		t.Errorf("Delay(40) = %s, want the 1h cap", got)
	}
}

func TestDelayJitterBounds(t *testing.T) {
	t.Parallel()
	lo := Delay(1, 10*time.Second, time.Hour, func() float64 { return 0 })
	hi := Delay(1, 10*time.Second, time.Hour, func() float64 { return 0.999999 })
	if lo != 8*time.Second {
		t.Errorf("lowest = %s, want 8s", lo)
	}
	if hi < 11990*time.Millisecond || hi >= 12*time.Second {
		t.Errorf("highest = %s, want just under 12s", hi)
	}
	for range 1000 {
		d := Delay(3, 10*time.Second, time.Hour, nil)
		if d < 32*time.Second || d >= 48*time.Second {
			t.Fatalf("Delay(3) = %s, outside 40s ± 20%%", d)
		}
	}
}
