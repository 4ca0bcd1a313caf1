package oncepush

import (
	"fmt"
	"testing"
	"time"
)

func TestLogLimiter(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	var l logLimiter
	let := 0
	for i := range 20 {
		if ok, s := l.allow("retry fcm 503", t0.Add(time.Duration(i)*time.Second)); ok {
			let++
			if s != 0 {
				t.Fatalf("line %d: %d suppressed before any was withheld", i, s)
			}
		}
	}
	if let != logBurst {
		t.Fatalf("%d of 20 lines in one window let through, want %d", let, logBurst)
	}
	// Another answer has a budget of its own.
	if ok, _ := l.allow("retry fcm 500", t0.Add(20*time.Second)); !ok {
		t.Fatal("another text was withheld by the first one's budget")
	}
	// The next window's first line says how many were withheld.
	ok, s := l.allow("retry fcm 503", t0.Add(logWindow))
	if !ok || s != 20-logBurst {
		t.Fatalf("first line of the next window: ok %v, suppressed %d; want true, %d", ok, s, 20-logBurst)
	}
	if ok, s := l.allow("retry fcm 503", t0.Add(logWindow+time.Second)); !ok || s != 0 {
		t.Fatalf("second line of the next window: ok %v, suppressed %d; want true, 0", ok, s)
	}
	// A clock that goes back starts a new window rather than muting a key.
	if ok, _ := l.allow("retry fcm 500", t0.Add(-time.Hour)); !ok {
		t.Fatal("a clock that went back muted the key")
	}
}

func TestLogLimiterMemoryIsBounded(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	var l logLimiter
	for i := range 3 * logKeysMax {
		if ok, _ := l.allow(fmt.Sprint("text ", i), t0); !ok {
			t.Fatalf("key %d: a new text was withheld", i)
		}
	}
	if len(l.keys) > logKeysMax {
		t.Fatalf("%d keys kept, want at most %d", len(l.keys), logKeysMax)
	}
}
