package drivertest

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
)

// Campaign totals are a tally the database keeps with the rows (D95): these
// tests change campaign rows every way the engine does — the expansion, the
// claim, every provider outcome, retries, lost answers, cancel, a
// recipient's deletion, cleanup — and compare the tally with a recount of
// the rows after each, and with what the fake providers received.

func campaignTotalsTests[TTx any]() []testCase[TTx] {
	return []testCase[TTx]{
		{"CampaignTotalsAreTheRows", testCampaignTotalsAreTheRows[TTx]},
		{"CampaignTotalsUnderConcurrentWriters", testCampaignTotalsConcurrent[TTx]},
	}
}

// recount counts a message's rows the slow way, in the tally's states.
func (b *bundle[TTx]) recount(messageID int64) map[string]int {
	b.t.Helper()
	ex := b.drv.Exec()
	out := map[string]int{}
	byStatus, err := ex.DeliveryCountByStatus(b.ctx, messageID)
	if err != nil {
		b.t.Fatal(err)
	}
	maps.Copy(out, byStatus)
	tex, err := testExecutor(ex)
	if err != nil {
		b.t.Fatal(err)
	}
	byState, err := tex.DeviceAttemptCountByState(b.ctx, messageID)
	if err != nil {
		b.t.Fatal(err)
	}
	for _, s := range []string{driver.AttemptAccepted, driver.AttemptInvalid, driver.AttemptRejected} {
		out["attempt:"+s] = byState[s]
	}
	if out["attempt:ambiguous"], err = ex.DeviceAttemptAmbiguousCount(b.ctx, messageID); err != nil {
		b.t.Fatal(err)
	}
	return nonZero(out)
}

func (b *bundle[TTx]) tally(messageID int64) map[string]int {
	b.t.Helper()
	got, err := b.drv.Exec().CampaignTally(b.ctx, messageID)
	if err != nil {
		b.t.Fatal(err)
	}
	return nonZero(got)
}

func nonZero(m map[string]int) map[string]int {
	maps.DeleteFunc(m, func(_ string, n int) bool { return n == 0 })
	return m
}

// tallyIsRecount fails unless the campaign's tally equals a recount of its
// rows, and returns the tally.
func (b *bundle[TTx]) tallyIsRecount(step string, messageID int64) map[string]int {
	b.t.Helper()
	got, want := b.tally(messageID), b.recount(messageID)
	if !maps.Equal(got, want) {
		b.t.Fatalf("%s: tally %v, rows %v", step, got, want)
	}
	return got
}

func testCampaignTotalsAreTheRows[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.CampaignBatch = 7; c.BatchSize = 5 })
	rs := b.recipientsNamed("tot-", 40)
	for _, r := range rs[:10] {
		b.register(r, oncepush.TransportAPNs)
	}
	// Every outcome, by recipient: a dead token, a refusal, an answer lost
	// (resent later and accepted), a retry (accepted the next time).
	owner := map[oncepush.Token]string{}
	for _, r := range rs {
		for _, d := range b.devicesOf(r) {
			owner[d.Token] = r
		}
	}
	var mu sync.Mutex
	tries := map[string]int{}
	b.fcm.Answer(func(_ context.Context, s *oncepush.Submission) oncepush.Result {
		if s.Title != "totals" {
			return oncepush.Accepted("fcm-other")
		}
		mu.Lock()
		defer mu.Unlock()
		r := owner[s.Token]
		tries[r]++
		var i int
		fmt.Sscanf(r, "tot-%d", &i)
		switch {
		case i%8 == 1:
			return oncepush.Result{Outcome: oncepush.OutcomeInvalidToken, Text: "404 UNREGISTERED"}
		case i%8 == 2:
			return oncepush.Result{Outcome: oncepush.OutcomeRejected, Text: "400 INVALID_ARGUMENT"}
		case i%8 == 3 && tries[r] == 1:
			return oncepush.Result{Outcome: oncepush.OutcomeMaybeSent, Text: "timeout"}
		case i%8 == 4 && tries[r] == 1:
			return oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "503 UNAVAILABLE"}
		}
		return oncepush.Accepted("fcm-" + r)
	})
	// Transactional sends to the same people are not the campaign's.
	if _, err := b.client.Send(b.ctx, rs[:20], msg("not the campaign"), nil); err != nil {
		t.Fatal(err)
	}

	c := b.startCampaign(campaignSpec("totals"), rs...)
	b.expand(b.client)
	msgID := b.campaign(c.ID).MessageID
	if got := b.tallyIsRecount("expanded", msgID); got[driver.StatusPending] != 40 || len(got) != 1 {
		t.Fatalf("expanded: tally %v, want 40 pending only", got)
	}
	b.drain()
	b.tallyIsRecount("first drain", msgID)
	for range 10 { // the retries and the resends, each after its backoff
		b.drainAfter(2 * time.Hour)
		b.tallyIsRecount("later drain", msgID)
	}
	got := b.campaign(c.ID).Totals
	// 5 of every 8 FCM devices end accepted, plus the 10 APNs devices.
	wantAccepted := 0
	for _, r := range rs {
		var i int
		fmt.Sscanf(r, "tot-%d", &i)
		if i%8 != 1 && i%8 != 2 {
			wantAccepted++
		}
	}
	wantAccepted += 10
	if got.Accepted != wantAccepted || got.InvalidTokens != 5 || got.Rejected != 5 || got.AmbiguousAttempts != 5 || got.Queued != 0 {
		t.Fatalf("totals %+v; want %d accepted, 5 invalid, 5 rejected, 5 ambiguous once, none queued", *got, wantAccepted)
	}
	if got.Sent+got.Failed+got.Ambiguous != 40 {
		t.Fatalf("totals %+v: want every one of 40 deliveries finished", *got)
	}
	received := 0
	for _, s := range append(b.fcm.Submissions(), b.apns.Submissions()...) {
		if s.Title == "totals" {
			received++
		}
	}
	// Each recipient's devices were submitted once, but the lost answers
	// (resent) and the retries (tried again).
	if want := 40 + 10 + 5 + 5; received != want {
		t.Fatalf("the providers received %d submissions of the campaign, want %d", received, want)
	}

	// A second campaign: canceled mid-way, one recipient deleted while
	// pending, then every row removed by retention.
	c2 := b.startCampaign(campaignSpec("totals 2"), rs...)
	b.expand(b.client)
	msg2 := b.campaign(c2.ID).MessageID
	// The recipients whose only device was the dead token get none.
	queued := b.tallyIsRecount("expanded", msg2)[driver.StatusPending]
	if queued != 37 {
		t.Fatalf("second campaign: %d queued, want 37 (3 recipients lost their only device)", queued)
	}
	if err := b.client.DeleteRecipient(b.ctx, rs[39]); err != nil {
		t.Fatal(err)
	}
	if got := b.tallyIsRecount("recipient deleted", msg2); got[driver.StatusPending] != queued-1 {
		t.Fatalf("after a recipient's deletion: tally %v, want %d pending", got, queued-1)
	}
	if _, err := b.client.CancelCampaign(b.ctx, c2.ID); err != nil {
		t.Fatal(err)
	}
	if got := b.tallyIsRecount("canceled", msg2); got[driver.StatusCanceled] != queued-1 || len(got) != 1 {
		t.Fatalf("canceled: tally %v, want %d canceled only", got, queued-1)
	}

	// Retention deletes the finished rows; the totals outlive them.
	before := b.tally(msgID)
	b.clock.Advance(oncepush.RetentionDefault + time.Hour)
	if _, err := b.client.Cleanup(b.ctx); err != nil {
		t.Fatal(err)
	}
	if left := b.recount(msgID); left[driver.StatusSent] != 0 {
		t.Fatalf("cleanup kept rows %v; the test needs them gone", left)
	}
	if after := b.tally(msgID); !maps.Equal(before, after) {
		t.Fatalf("cleanup changed the totals: %v, then %v", before, after)
	}
}

// testCampaignTotalsConcurrent: two clients drain one campaign at once
// while the tally is folded over and over; the tally ends equal to the rows
// and to what the provider received.
func testCampaignTotalsConcurrent[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.CampaignBatch = 50; c.BatchSize = 10 })
	rs := b.recipientsNamed("conc-", 300)
	c := b.startCampaign(campaignSpec("concurrent"), rs...)
	b.expand(b.client)
	msgID := b.campaign(c.ID).MessageID
	other := b.newClient(b.db.Driver(t, 0), func(c *oncepush.Config) {
		c.BatchSize = 10
		c.Providers = []oncepush.Provider{b.fcm}
	})

	var wg sync.WaitGroup
	done := make(chan struct{})
	folds := 0
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := b.drv.Exec().CampaignTallyCompact(b.ctx, 2); err != nil {
				t.Error(err)
				return
			}
			folds++
		}
	})
	errs := make(chan error, 2)
	for _, cl := range []*oncepush.Client[TTx]{b.client, other} {
		go func() { _, err := cl.Drain(b.ctx); errs <- err }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	got := b.tallyIsRecount("drained", msgID)
	if got[driver.StatusSent] != 300 || got["attempt:accepted"] != b.fcm.Count() || b.fcm.Count() != 300 {
		t.Fatalf("tally %v, provider received %d; want 300 sent and accepted (%d folds ran meanwhile)", got, b.fcm.Count(), folds)
	}
}
