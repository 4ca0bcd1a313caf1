package drivertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/enginetest"
	"github.com/oncepush/oncepush/pushtest"
)

// testRunBudget: the budget is checked before each send, on the engine's
// clock. Each send here takes 100 ms of that clock (the provider moves it), so
// a 300 ms budget admits exactly three, however fast or slow the machine is:
// no real time is read, and the engine's own count of started sends (its
// hook) must agree with the provider's.
func testRunBudget[TTx any](t *testing.T, h Harness[TTx]) {
	var clock *pushtest.Clock
	b := setup(t, h, func(c *oncepush.Config) {
		c.RunBudget = 300 * time.Millisecond
		c.ConcurrentSends = 1
	})
	clock = b.clock
	const n = 40
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("r%02d", i))
		b.register(names[i], oncepush.TransportFCM)
	}
	res := b.send(names, msg("slow"), nil)
	b.fcm.Answer(func(ctx context.Context, s *oncepush.Submission) oncepush.Result {
		clock.Advance(100 * time.Millisecond)
		return oncepush.Accepted("slow")
	})
	var starts enginetest.Counter
	st, err := b.client.RunOnce(enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnSendStarting: func(int64) { starts.Add() }}))
	if err != nil {
		t.Fatal(err)
	}
	if !st.BudgetSpent || st.Submitted != 3 || st.Submitted+st.Released != n {
		t.Fatalf("run stats %+v: want the budget to end the run after 3 sends", st)
	}
	if got := b.fcm.Count(); got != st.Submitted || starts.Count() != st.Submitted {
		t.Fatalf("provider got %d, the engine started %d, run says it submitted %d", got, starts.Count(), st.Submitted)
	}
	ds, err := b.client.MessageDeliveries(b.ctx, res.MessageID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	sent, untouched := 0, 0
	for _, d := range ds {
		switch d.Status {
		case oncepush.StatusSent:
			sent++
		case oncepush.StatusPending:
			untouched++
			if d.Attempts != 0 || d.NextAttemptAt.After(b.clock.Now()) {
				t.Fatalf("released delivery touched: %+v", d)
			}
			for _, a := range d.Devices {
				if a.Submissions != 0 || a.State != oncepush.AttemptPending || a.FirstSentAt != nil {
					t.Fatalf("released pair's ledger says it was sent: %+v", a)
				}
			}
		default:
			t.Fatalf("unexpected status %s", d.Status)
		}
	}
	if sent != st.Submitted || untouched != st.Released {
		t.Fatalf("%d sent and %d untouched, run stats %+v", sent, untouched, st)
	}
	b.fcm.Answer(nil)
	b.drain()
	if got := b.fcm.Count(); got != n {
		t.Fatalf("after the next runs: %d submissions, want exactly %d", got, n)
	}
}

func testOneConnection[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	one := b.newClient(b.db.Driver(t, 1), func(c *oncepush.Config) { c.Providers = []oncepush.Provider{b.fcm} })
	b.register("r1", oncepush.TransportFCM)
	b.send([]string{"r1"}, msg("held"), nil)
	finish := abandon(t, b, one, b.fcm, oncepush.Accepted("ok"))
	defer finish()
	// The provider holds its answer; the client's one connection must be free.
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	if _, err := one.Devices(ctx, "r1"); err != nil {
		t.Fatalf("pool of one connection blocked while a provider held its answer: %v", err)
	}
	if _, err := one.Send(ctx, []string{"r1"}, msg("meanwhile"), nil); err != nil {
		t.Fatalf("send through the pool of one while a send is in flight: %v", err)
	}
	finish()
	drain(t, one)
	wantSends(t, b.fcm, 2, "both sends, the first held while the pool of one served the second")
}
