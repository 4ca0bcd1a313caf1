package drivertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/pushtest"
)

func testThrottle[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.ConcurrentSends = 1 })
	var names []string
	for i := range 5 {
		names = append(names, fmt.Sprintf("r%d", i))
		b.register(names[i], oncepush.TransportFCM)
	}
	b.register("apple", oncepush.TransportAPNs)
	b.fcm.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "429 RESOURCE_EXHAUSTED: project quota", RetryAfter: time.Minute, Throttle: true})
	b.send(append(names, "apple"), msg("quota"), nil)
	st := b.drain()
	if n := b.fcm.Count(); n != 1 {
		t.Fatalf("after a provider-wide 429, %d more sends went to it in the same run", n-1)
	}
	wantSends(t, b.apns, 1, "APNs, beside FCM's throttle")
	if st.Released != 4 {
		t.Fatalf("run stats %+v, want 4 released", st)
	}
	for _, r := range names {
		d := b.only(r)
		wantStatus(t, d, oncepush.StatusPending)
		if d.NextAttemptAt.Before(b.clock.Now().Add(50 * time.Second)) {
			t.Fatalf("%s due again at %s, before the provider's Retry-After", r, d.NextAttemptAt)
		}
	}
}

// testPausedRunStartsNothingLate: a run frozen for longer than its lease
// (SIGSTOP, a starved machine) must start no send when it wakes: not the
// pairs still queued behind the frozen send, and not a pair whose provider
// was about to write when the freeze began.
func testPausedRunStartsNothingLate[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.ConcurrentSends = 1 })
	lease := b.client.Config().Lease
	names := []string{"r1", "r2", "r3"}
	for _, r := range names {
		b.register(r, oncepush.TransportFCM)
	}
	b.send(names, msg("frozen"), nil)
	var calls atomic.Int32
	b.fcm.Answer(func(context.Context, *oncepush.Submission) oncepush.Result {
		if calls.Add(1) == 1 {
			b.clock.Advance(lease + time.Second) // frozen while the first request was out
		}
		return oncepush.Accepted("ok")
	})
	st, err := b.client.RunOnce(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := b.fcm.Count(); n != 1 || st.Submitted != 1 || st.Released != 2 {
		t.Fatalf("%d submissions, stats %+v: a run that woke past its lease kept sending", n, st)
	}
	for _, d := range b.deliveries("r2") {
		for _, a := range d.Devices {
			if a.Submissions != 0 {
				t.Fatalf("released pair counted as submitted: %+v", a)
			}
		}
	}
	b.drain()
	wantSends(t, b.fcm, 3, "each pair exactly once after the next run")

	// Frozen between the engine's check and the provider's write: the provider
	// asks CheckStart at its last instant, as the HTTP providers do.
	b.register("r4", oncepush.TransportFCM)
	b.send([]string{"r4"}, msg("frozen at the write"), nil)
	b.fcm.Answer(func(ctx context.Context, _ *oncepush.Submission) oncepush.Result {
		b.clock.Advance(lease + time.Second)
		if err := oncepush.CheckStart(ctx); err != nil {
			return oncepush.Result{Outcome: oncepush.OutcomeRetry, Unsent: true, Text: "not started: " + err.Error()}
		}
		return oncepush.Accepted("late")
	})
	st, err = b.client.RunOnce(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Submitted != 0 || st.Released != 1 {
		t.Fatalf("stats %+v: a send refused at the write must count as released", st)
	}
	d := b.only("r4")
	wantStatus(t, d, oncepush.StatusPending)
	if d.Attempts != 0 || len(d.Devices) != 1 || d.Devices[0].Submissions != 0 || d.Devices[0].State != oncepush.AttemptPending {
		t.Fatalf("refused send left %+v (attempts %d): the ledger must not count it", d.Devices, d.Attempts)
	}
}

// testKilledRunLeavesOnlyInFlightAmbiguous: under at-most-once, a run that
// dies with part of its batch in flight leaves exactly the in-flight pairs
// ambiguous; the next run sends the rest, and the ledger's submissions equal
// the requests the providers received.
func testKilledRunLeavesOnlyInFlightAmbiguous[TTx any](t *testing.T, h Harness[TTx]) {
	const n, window = 20, 4
	b := setup(t, h, func(c *oncepush.Config) { c.ConcurrentSends = window })
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("r%02d", i))
		b.register(names[i], oncepush.TransportFCM)
	}
	res := b.send(names, msg("once"), &oncepush.SendOptions{Ambiguity: oncepush.AmbiguityAtMostOnce})

	release := b.fcm.Hold() // run A's sends never answer while it is "dead"
	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		_, _ = b.client.Drain(context.WithoutCancel(b.ctx))
	}()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if !b.fcm.WaitCount(ctx, window) {
		t.Fatal("run A never filled its window")
	}

	fcmB := pushtest.NewProvider(oncepush.TransportFCM)
	clientB := b.newClient(b.db.Driver(t, 0), func(c *oncepush.Config) { c.Providers = []oncepush.Provider{fcmB} })
	b.clock.Advance(clientB.Config().Lease + time.Second)
	drain(t, clientB)
	release()
	<-doneA

	if got := b.fcm.Count(); got != window {
		t.Fatalf("run A submitted %d, want its window of %d", got, window)
	}
	if got := fcmB.Count(); got != n-window {
		t.Fatalf("run B submitted %d, want the %d pairs run A never sent", got, n-window)
	}
	ds, err := b.client.MessageDeliveries(b.ctx, res.MessageID, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	ambiguous, submissions := 0, 0
	for _, d := range ds {
		if d.Status == oncepush.StatusAmbiguous {
			ambiguous++
		}
		for _, a := range d.Devices {
			submissions += a.Submissions
		}
	}
	if ambiguous != window {
		t.Fatalf("%d deliveries ambiguous, want only the %d in flight when run A died", ambiguous, window)
	}
	if received := b.fcm.Count() + fcmB.Count(); submissions != received {
		t.Fatalf("ledger counts %d submissions, providers received %d", submissions, received)
	}
}
