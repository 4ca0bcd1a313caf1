package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/enginetest"
)

// Canceling a message (Client.CancelMessage): its pending deliveries end
// canceled, nothing more of it is submitted, and what was in flight is
// recorded.

// testCancelPending: a message not yet sent — due now or scheduled for
// later — ends canceled on every delivery and is never submitted; a second
// cancel, a message already delivered and an unknown one change nothing.
func testCancelPending[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1", "r2", "r3")
	now := b.send([]string{"r1", "r2"}, msg("due now"), nil)
	later := b.send([]string{"r3"}, msg("next year"), &oncepush.SendOptions{ScheduledAt: epoch.Add(365 * 24 * time.Hour),
		Lifetime: time.Hour})
	for _, m := range []struct {
		id   int64
		want int
	}{{now.MessageID, 2}, {later.MessageID, 1}} {
		res, err := b.client.CancelMessage(b.ctx, m.id)
		if err != nil || res != (oncepush.CancelResult{Canceled: m.want}) {
			t.Fatalf("CancelMessage(%d) = %+v, %v; want %d canceled, none in flight", m.id, res, err, m.want)
		}
	}
	b.clock.Advance(366 * 24 * time.Hour)
	if st := b.drain(); st.Claimed != 0 || b.fcm.Count() != 0 {
		t.Fatalf("canceled deliveries were claimed (%+v) or sent (%d)", st, b.fcm.Count())
	}
	for _, r := range []string{"r1", "r2", "r3"} {
		d := b.only(r)
		if d.Status != oncepush.StatusCanceled || d.LastError != "canceled" || d.FinishedAt == nil {
			t.Errorf("%s: %s (%q, finished %v); want canceled", r, d.Status, d.LastError, d.FinishedAt)
		}
	}
	if res, err := b.client.CancelMessage(b.ctx, now.MessageID); err != nil || res.Canceled != 0 {
		t.Errorf("a second cancel = %+v, %v; want nothing canceled", res, err)
	}
	done := b.send([]string{"r1"}, msg("delivered"), nil)
	b.drain()
	if res, err := b.client.CancelMessage(b.ctx, done.MessageID); err != nil || res.Canceled != 0 {
		t.Errorf("canceling a delivered message = %+v, %v; want nothing canceled", res, err)
	}
	if ds := b.deliveries("r1"); ds[len(ds)-1].Status != oncepush.StatusSent {
		t.Errorf("cancel changed a delivered message: %+v", ds[len(ds)-1])
	}
	if _, err := b.client.CancelMessage(b.ctx, done.MessageID+1000); !errors.Is(err, oncepush.ErrNotFound) {
		t.Errorf("canceling an unknown message: %v, want ErrNotFound", err)
	}
}

// testCancelInFlight: a message canceled while a run holds its deliveries,
// with a first wave of sends held at the provider. Those two were in flight:
// they reach the provider and their answers are recorded on their devices.
// No other device of the message is submitted after the cancel returns —
// counted at the provider, not only in the ledger — and every delivery
// stays canceled after the run records.
func testCancelInFlight[TTx any](t *testing.T, h Harness[TTx]) {
	recipients := []string{"r1", "r2", "r3", "r4", "r5", "r6"}
	b := setup(t, h, func(c *oncepush.Config) { c.ConcurrentSends = 2 }, recipients...)
	release := holdThen(b.fcm, oncepush.Accepted("got through"))
	defer release()
	sent := b.send(recipients, msg("cancel me"), nil)
	// A drain, not a started client: nothing stops the run between the
	// release and its next wave, which must then find the message canceled.
	type drainResult struct {
		st  oncepush.RunStats
		err error
	}
	drained := make(chan drainResult, 1)
	go func() {
		st, err := b.client.Drain(b.ctx)
		drained <- drainResult{st, err}
	}()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if !b.fcm.WaitCount(ctx, 2) {
		t.Fatal("the first wave never reached the provider")
	}
	res, err := b.client.CancelMessage(b.ctx, sent.MessageID)
	if err != nil || res != (oncepush.CancelResult{Canceled: 6, InFlight: 2}) {
		t.Fatalf("CancelMessage = %+v, %v; want 6 canceled, 2 in flight", res, err)
	}
	release()
	if d := <-drained; d.err != nil || d.st.Claimed != 6 || d.st.Submitted != 2 {
		t.Fatalf("the drain: %+v, %v; want the 6 claimed, 2 submitted", d.st, d.err)
	}
	if st := b.drain(); st.Claimed != 0 {
		t.Fatalf("canceled deliveries claimed again: %+v", st)
	}
	if n := b.fcm.Count(); n != 2 {
		t.Fatalf("the provider got %d submissions, want the 2 in flight at the cancel", n)
	}
	accepted := 0
	for _, r := range recipients {
		d := b.only(r)
		if d.Status != oncepush.StatusCanceled {
			t.Errorf("%s: %s after the run recorded, want canceled", r, d.Status)
		}
		for _, a := range d.Devices {
			switch a.State {
			case oncepush.AttemptAccepted:
				accepted++
			default:
				t.Errorf("%s: a device left %s", r, a.State)
			}
		}
	}
	if accepted != 2 {
		t.Errorf("%d devices recorded accepted, want the 2 that were in flight", accepted)
	}
}

// testCancelCampaignMessage: CancelMessage on the message behind a campaign
// — started with nothing written yet, running with a batch written, and
// completed with its deliveries still queued — must never answer as if the
// message were canceled while its campaign goes on writing and sending
// deliveries of it. It is refused, naming the campaign, and changes
// nothing: the campaign runs on, every target reached once; canceling the
// campaign is what stops it.
func testCancelCampaignMessage[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.CampaignBatch = 4 })
	rs := b.recipientsNamed("cm-", 10)
	c := b.startCampaign(campaignSpec("behind a campaign"), rs...)
	msgID := c.MessageID
	refused := func(when string) {
		t.Helper()
		res, err := b.client.CancelMessage(b.ctx, msgID)
		var ce *oncepush.CampaignMessageError
		if !errors.As(err, &ce) || !errors.Is(err, oncepush.ErrCampaignMessage) || ce.CampaignID != c.ID ||
			ce.MessageID != msgID || res != (oncepush.CancelResult{}) {
			before := b.fcm.Count()
			b.expand(b.client)
			b.drain()
			t.Fatalf("CancelMessage of campaign %d's message, %s: %+v, %v; want it refused naming the campaign "+
				"(after it returned, the campaign went on: %d submissions before, %d after, campaign %s)",
				c.ID, when, res, err, before, b.fcm.Count(), b.campaign(c.ID).Status)
		}
	}
	refused("before its first batch")

	// One batch written, the second held back: the campaign is running.
	batches := 0
	oneBatch := enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnCampaignBatch: func(int64, int) error {
		if batches++; batches == 2 {
			return errors.New("injected: the second batch waits")
		}
		return nil
	}})
	if st, err := b.client.ExpandCampaigns(oneBatch); err == nil || st.Written != 4 {
		t.Fatalf("the first batch: %+v, %v; want 4 written", st, err)
	}
	refused("with a batch written")

	if st := b.expand(b.client); st.Written != 6 || st.Completed != 1 {
		t.Fatalf("the rest: %+v; want 6 written and completed", st)
	}
	refused("completed, its deliveries queued")
	b.drain()
	b.deliveredOnce(b.fcm.Submissions(), "behind a campaign", rs)
	if got := b.campaign(c.ID); got.Status != oncepush.CampaignCompleted || got.Totals.Sent != 10 || got.Totals.Canceled != 0 {
		t.Fatalf("after the refused cancels: %s, totals %+v; want completed, all 10 sent", got.Status, *got.Totals)
	}
}
