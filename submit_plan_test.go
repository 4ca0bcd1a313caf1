package oncepush

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestSendBounds(t *testing.T) {
	t.Parallel()
	// Defaults: lease 100 s, budget 10 s, send timeout 15 s: the reserve is
	// (100 − 10 − 15) / 2 = 37.5 s, and a send needs 15 + 37.5 s of lease.
	lease, minLeft, reserve := 100*time.Second, 52500*time.Millisecond, 37500*time.Millisecond
	startBy, sendEnd := sendBounds(t0, t0.Add(10*time.Second), lease, minLeft, reserve)
	if !startBy.Equal(t0.Add(10*time.Second)) || !sendEnd.Equal(t0.Add(62500*time.Millisecond)) {
		t.Errorf("fresh batch: start by +%s, end by +%s; want the budget (+10s) and +1m2.5s", startBy.Sub(t0), sendEnd.Sub(t0))
	}
	// A batch claimed late in a long run: the lease bounds the start.
	startBy, _ = sendBounds(t0, t0.Add(time.Hour), lease, minLeft, reserve)
	if !startBy.Equal(t0.Add(47500 * time.Millisecond)) {
		t.Errorf("late batch: start by +%s, want the lease less a send and the reserve (+47.5s)", startBy.Sub(t0))
	}
}

// wavePairs makes n pairs per transport, in the order given.
func wavePairs(spec ...any) []*pair {
	var out []*pair
	id := int64(0)
	for i := 0; i < len(spec); i += 2 {
		tr, n := spec[i].(Transport), spec[i+1].(int)
		for range n {
			id++
			out = append(out, &pair{dev: Device{ID: id, Transport: tr}})
		}
	}
	return out
}

func waveString(wave []*pair) string {
	var s []string
	for _, p := range wave {
		s = append(s, fmt.Sprintf("%s%d", p.dev.Transport, p.dev.ID))
	}
	return strings.Join(s, " ")
}

func noThrottle(Transport) time.Duration { return 0 }

func TestWaves(t *testing.T) {
	t.Parallel()
	t.Run("a batch that fits the window is one wave", func(t *testing.T) {
		t.Parallel()
		w := newWaves(wavePairs(TransportFCM, 3, TransportAPNs, 2), newWindow(4))
		if !w.ready() {
			t.Fatal("nothing in flight, and not ready")
		}
		if got := waveString(w.next(noThrottle)); got != "fcm1 fcm2 fcm3 apns4 apns5" {
			t.Fatalf("wave %q", got)
		}
		if w.pending() {
			t.Fatal("pairs left after a wave that took all")
		}
	})
	t.Run("the window is per transport; a refill waits for half a window", func(t *testing.T) {
		t.Parallel()
		w := newWaves(wavePairs(TransportFCM, 6, TransportAPNs, 1), newWindow(4))
		wave := w.next(noThrottle)
		if got := waveString(wave); got != "fcm1 fcm2 fcm3 fcm4 apns7" {
			t.Fatalf("first wave %q, want 4 FCM (its window) and the APNs pair", got)
		}
		for _, p := range wave {
			w.started(p)
		}
		if w.inFlight() != 5 || !w.pending() {
			t.Fatalf("in flight %d, pending %v", w.inFlight(), w.pending())
		}
		if w.ready() {
			t.Fatal("ready with FCM's window full")
		}
		w.finished(wave[4]) // APNs ends: FCM's window is still full
		w.finished(wave[0]) // one FCM slot: less than half a window, fewer than the 2 left
		if w.ready() {
			t.Fatal("ready for a wave of one while a refill of two waits for half a window")
		}
		w.finished(wave[1])
		if !w.ready() {
			t.Fatal("half a window free and not ready")
		}
		if got := waveString(w.next(noThrottle)); got != "fcm5 fcm6" {
			t.Fatalf("refill %q", got)
		}
		if w.pending() {
			t.Fatal("pairs left")
		}
	})
	t.Run("a refill goes as soon as what is left fits", func(t *testing.T) {
		t.Parallel()
		w := newWaves(wavePairs(TransportFCM, 9), newWindow(8))
		wave := w.next(noThrottle)
		for _, p := range wave {
			w.started(p)
		}
		w.finished(wave[0])
		if !w.ready() {
			t.Fatal("one slot free and one pair left: not ready")
		}
		if got := waveString(w.next(noThrottle)); got != "fcm9" {
			t.Fatalf("refill %q", got)
		}
	})
	t.Run("a throttled transport's pairs are held, the others go", func(t *testing.T) {
		t.Parallel()
		pairs := wavePairs(TransportFCM, 3, TransportAPNs, 1)
		w := newWaves(pairs, newWindow(2))
		throttled := func(t Transport) time.Duration {
			if t == TransportFCM {
				return time.Minute
			}
			return 0
		}
		if got := waveString(w.next(throttled)); got != "apns4" {
			t.Fatalf("wave %q, want only APNs", got)
		}
		if w.pending() {
			t.Fatal("throttled pairs still queued: they would be marked in a later wave")
		}
		for _, p := range pairs[:3] {
			if p.releaseWait != time.Minute {
				t.Errorf("held pair %d: releaseWait %s, want the throttle's minute", p.dev.ID, p.releaseWait)
			}
		}
		if pairs[3].releaseWait != 0 {
			t.Error("an unthrottled pair carries a release wait")
		}
	})
	t.Run("a run's batches share one window", func(t *testing.T) {
		t.Parallel()
		win := newWindow(4)
		a, b := newWaves(wavePairs(TransportFCM, 4), win), newWaves(wavePairs(TransportFCM, 3, TransportAPNs, 1), win)
		first := a.next(noThrottle)
		for _, p := range first {
			a.started(p)
		}
		if got := waveString(b.next(noThrottle)); got != "apns4" {
			t.Fatalf("second batch's wave %q with the first's 4 FCM sends in flight; want only APNs", got)
		}
		if b.ready() {
			t.Fatal("second batch ready while the window's FCM slots are all the first's")
		}
		freed := win.changed()
		a.finished(first[0])
		select {
		case <-freed:
		default:
			t.Fatal("a slot given back did not signal the batches waiting for one")
		}
		if b.ready() {
			t.Fatal("ready with one FCM slot free: less than half a window, fewer than the 3 left")
		}
		a.finished(first[1])
		if got := waveString(b.next(noThrottle)); got != "fcm1 fcm2" {
			t.Fatalf("wave %q once two slots are free; want two FCM pairs", got)
		}
		p := wavePairs(TransportFCM, 1)[0]
		b.skipped(p) // a pair of the wave not started gives its slot back
		if got := win.room(TransportFCM); got != 1 {
			t.Fatalf("FCM room %d after a skipped pair; want 1", got)
		}
	})
	t.Run("every transport throttled: an empty wave and nothing left", func(t *testing.T) {
		t.Parallel()
		w := newWaves(wavePairs(TransportFCM, 2), newWindow(4))
		if wave := w.next(func(Transport) time.Duration { return time.Second }); len(wave) != 0 || w.pending() {
			t.Fatalf("wave %q, pending %v", waveString(wave), w.pending())
		}
	})
}

func TestNormalizeResult(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in, want Result
	}{
		{Result{Outcome: OutcomeAccepted, ProviderID: "x", Unsent: true}, Result{Outcome: OutcomeAccepted, ProviderID: "x"}},
		{Result{Outcome: OutcomeMaybeSent, Unsent: true}, Result{Outcome: OutcomeMaybeSent}},
		{Result{Outcome: OutcomeRetry, Unsent: true}, Result{Outcome: OutcomeRetry, Unsent: true}},
		{Result{Outcome: 0, Text: "?"}, Result{Outcome: OutcomeMaybeSent, Text: "provider returned no valid outcome (0): ?"}},
		{Result{Outcome: 42, Unsent: true}, Result{Outcome: OutcomeMaybeSent, Text: "provider returned no valid outcome (42): "}},
	} {
		if got := normalizeResult(tc.in); got != tc.want {
			t.Errorf("normalizeResult(%+v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestThrottleFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   Result
		want time.Duration
	}{
		{Result{Outcome: OutcomeRetry, RetryAfter: time.Minute, Throttle: true}, time.Minute},
		{Result{Outcome: OutcomeRetry, RetryAfter: time.Minute}, 0}, // one device's limit
		{Result{Outcome: OutcomeRetry, Throttle: true}, 0},          // no wait given: no pause
	} {
		if got := throttleFor(tc.in); got != tc.want {
			t.Errorf("throttleFor(%+v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
