package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/enginetest"
)

// The campaign promises (docs/architecture.md, "Campaigns"): started once
// however many starters race, every target reached by exactly one delivery
// however often the expansion fails or is resumed, malformed and duplicate
// tokens counted and never sent, nothing submitted after a cancel returns,
// pacing written into due times, totals from the rows.

func campaignTests[TTx any]() []testCase[TTx] {
	return []testCase[TTx]{
		{"CampaignLifecycle", testCampaignLifecycle[TTx]},
		{"CampaignPagesAreIdempotent", testCampaignPages[TTx]},
		{"CampaignStartsOnce", testCampaignStartsOnce[TTx]},
		{"CampaignScheduledStartsOnce", testCampaignScheduledStartsOnce[TTx]},
		{"CampaignResumesFromCursor", testCampaignResumesFromCursor[TTx]},
		{"CampaignInterruptedAfterTries", testCampaignInterrupted[TTx]},
		{"CampaignTryInFlightNotInterrupted", testCampaignTryInFlight[TTx]},
		{"CampaignAbandonedTryInterrupts", testCampaignAbandonedTry[TTx]},
		{"CampaignTokensCountedNeverSent", testCampaignTokens[TTx]},
		{"CampaignCountsAddUp", testCampaignCountsAddUp[TTx]},
		{"CampaignCancelStopsSubmissions", testCampaignCancel[TTx]},
		{"CampaignPacedByDueTimes", testCampaignPacing[TTx]},
		{"CampaignRecipientFillingABatch", testCampaignRecipientFillingABatch[TTx]},
		{"CampaignAtLocalTime", testCampaignAtLocalTime[TTx]},
		{"TransactionalSendsFirst", testTransactionalSendsFirst[TTx]},
		{"CampaignCeilingAcrossClients", testCampaignCeiling[TTx]},
		{"CampaignKeyUnreachable", testCampaignKeyUnreachable[TTx]},
		{"CampaignTokenMovedReachedOnce", testCampaignTokenMovedReachedOnce[TTx]},
		{"CampaignTokenInFlightHeld", testCampaignTokenInFlightHeld[TTx]},
	}
}

// campaignSpec is a campaign to an uploaded audience.
func campaignSpec(title string) oncepush.CampaignSpec {
	return oncepush.CampaignSpec{Name: "spring sale", Message: msg(title), Audience: oncepush.AudienceRecipients}
}

func (b *bundle[TTx]) createCampaign(spec oncepush.CampaignSpec) *oncepush.Campaign {
	b.t.Helper()
	c, err := b.client.CreateCampaign(b.ctx, spec)
	if err != nil {
		b.t.Fatalf("CreateCampaign: %v", err)
	}
	return c
}

// startCampaign creates a campaign to the recipients, uploaded as page 1,
// and starts it.
func (b *bundle[TTx]) startCampaign(spec oncepush.CampaignSpec, recipients ...string) *oncepush.Campaign {
	b.t.Helper()
	c := b.createCampaign(spec)
	b.upload(c.ID, 1, recipients...)
	started, err := b.client.StartCampaign(b.ctx, c.ID)
	if err != nil {
		b.t.Fatalf("StartCampaign: %v", err)
	}
	return started
}

func (b *bundle[TTx]) upload(id int64, page int, recipients ...string) oncepush.CampaignPageAdded {
	b.t.Helper()
	res, err := b.client.AddCampaignRecipients(b.ctx, id, page, recipients)
	if err != nil {
		b.t.Fatalf("AddCampaignRecipients(page %d): %v", page, err)
	}
	return res
}

func (b *bundle[TTx]) campaign(id int64) *oncepush.Campaign {
	b.t.Helper()
	c, err := b.client.Campaign(b.ctx, id)
	if err != nil {
		b.t.Fatalf("Campaign(%d): %v", id, err)
	}
	return c
}

func (b *bundle[TTx]) expand(c *oncepush.Client[TTx]) oncepush.CampaignStats {
	b.t.Helper()
	st, err := c.ExpandCampaigns(b.ctx)
	if err != nil {
		b.t.Fatalf("ExpandCampaigns: %v", err)
	}
	return st
}

// recipientsNamed returns n recipient ids with the prefix, each with an
// FCM device.
func (b *bundle[TTx]) recipientsNamed(prefix string, n int) []string {
	b.t.Helper()
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%04d", prefix, i)
		b.register(out[i], oncepush.TransportFCM)
	}
	return out
}

// deliveredOnce fails unless the fake FCM received exactly one submission
// per recipient, each of the campaign's message.
func (b *bundle[TTx]) deliveredOnce(subs []oncepush.Submission, title string, recipients []string) {
	t := b.t
	t.Helper()
	got := map[string]int{}
	for _, s := range subs {
		if s.Title != title {
			t.Fatalf("a submission of %q, want only %q", s.Title, title)
		}
		got[b.recipientOf(s)]++
	}
	for _, r := range recipients {
		if got[r] != 1 {
			t.Errorf("recipient %s: %d submissions, want 1", r, got[r])
		}
	}
	if len(subs) != len(recipients) {
		t.Fatalf("%d submissions for %d recipients", len(subs), len(recipients))
	}
}

func testCampaignLifecycle[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	rs := b.recipientsNamed("life-", 3)

	// Refusals name the field as the caller wrote it, and write nothing.
	for _, bad := range []struct {
		spec  oncepush.CampaignSpec
		field string
	}{
		{oncepush.CampaignSpec{Message: msg("x")}, "audience"},
		{oncepush.CampaignSpec{Message: oncepush.Message{}, Audience: oncepush.AudienceDevices}, "title"},
		{oncepush.CampaignSpec{Message: msg("x"), Audience: oncepush.AudienceDevices, Filter: oncepush.DeviceFilter{Tags: []string{"ok", "not ok"}}}, "filter.tags[1]"},
		{oncepush.CampaignSpec{Message: msg("x"), Audience: oncepush.AudienceDevices, Filter: oncepush.DeviceFilter{Transports: []oncepush.Transport{"pigeon"}}}, "filter.transports[0]"},
		{oncepush.CampaignSpec{Message: msg("x"), Audience: oncepush.AudienceDevices, RatePerMinute: -1}, "ratePerMinute"},
	} {
		_, err := b.client.CreateCampaign(b.ctx, bad.spec)
		var ve *oncepush.ValidationError
		if !errors.As(err, &ve) || ve.Field != bad.field {
			t.Errorf("CreateCampaign(%+v): %v, want a ValidationError naming %s", bad.spec, err, bad.field)
		}
	}
	if list, err := b.client.Campaigns(b.ctx, oncepush.CampaignQuery{}); err != nil || len(list.Campaigns) != 0 {
		t.Fatalf("after refusals: %+v, %v; want no campaign", list, err)
	}

	c := b.createCampaign(campaignSpec("draft one"))
	if c.Status != oncepush.CampaignDraft || c.ID == 0 || c.MessageID != 0 {
		t.Fatalf("created: %+v", c)
	}
	// One clock: the client's, like every other time it writes.
	if !c.CreatedAt.Equal(b.clock.Now()) {
		t.Fatalf("created at %s, want the client's clock, %s", c.CreatedAt, b.clock.Now())
	}
	spec := campaignSpec("draft two")
	spec.Filter.Transports = []oncepush.Transport{oncepush.TransportFCM}
	if c, err := b.client.UpdateCampaign(b.ctx, c.ID, spec); err != nil || c.Message.Title != "draft two" {
		t.Fatalf("UpdateCampaign: %+v, %v", c, err)
	}
	b.upload(c.ID, 1, rs...)
	// Cleanup's orphan sweep never takes a started campaign's message,
	// which has no delivery until the first batch.
	started, err := b.client.StartCampaign(b.ctx, c.ID)
	if err != nil || started.Status != oncepush.CampaignSending || started.MessageID == 0 {
		t.Fatalf("StartCampaign: %+v, %v", started, err)
	}
	if _, err := b.client.Cleanup(b.ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.Message(b.ctx, started.MessageID); err != nil {
		t.Fatalf("the campaign's message after cleanup: %v", err)
	}
	for _, op := range []func() error{
		func() error { _, err := b.client.UpdateCampaign(b.ctx, c.ID, spec); return err },
		func() error { _, err := b.client.AddCampaignRecipients(b.ctx, c.ID, 2, []string{"late"}); return err },
		func() error { _, err := b.client.StartCampaign(b.ctx, c.ID); return err },
		func() error { _, err := b.client.ScheduleCampaign(b.ctx, c.ID, epoch.Add(time.Hour)); return err },
		func() error { _, err := b.client.ResumeCampaign(b.ctx, c.ID); return err },
	} {
		var se *oncepush.CampaignStateError
		if err := op(); !errors.As(err, &se) || se.Status != oncepush.CampaignSending || !errors.Is(err, oncepush.ErrCampaignState) {
			t.Errorf("an operation on a sending campaign: %v, want a CampaignStateError (sending)", err)
		}
	}
	st := b.expand(b.client)
	if st.Written != 3 || st.Completed != 1 {
		t.Fatalf("ExpandCampaigns: %+v, want 3 written and 1 completed", st)
	}
	b.drain()
	b.deliveredOnce(b.fcm.Submissions(), "draft two", rs)
	got := b.campaign(c.ID)
	if got.Status != oncepush.CampaignCompleted || got.Written != 3 || got.Recipients != 3 || got.Cursor != rs[2] || got.FinishedAt.IsZero() {
		t.Fatalf("completed campaign: %+v", got)
	}
	if tt := *got.Totals; tt.Sent != 3 || tt.Queued != 0 || tt.Accepted != 3 {
		t.Fatalf("totals: %+v, want 3 sent, 3 accepted", tt)
	}
	if _, err := b.client.Campaign(b.ctx, 999999); !errors.Is(err, oncepush.ErrNotFound) {
		t.Fatalf("Campaign(absent): %v, want ErrNotFound", err)
	}

	// The list pages newest first.
	for i := range 4 {
		b.createCampaign(campaignSpec(fmt.Sprintf("more %d", i)))
	}
	var ids []int64
	for q := (oncepush.CampaignQuery{Limit: 2}); ; {
		page, err := b.client.Campaigns(b.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Campaigns {
			ids = append(ids, c.ID)
		}
		if page.Next == 0 {
			break
		}
		q.Before = page.Next
	}
	if len(ids) != 5 || !slices.IsSortedFunc(ids, func(a, b int64) int { return int(b - a) }) {
		t.Fatalf("paged list: %v, want 5 ids newest first", ids)
	}
	if page, err := b.client.Campaigns(b.ctx, oncepush.CampaignQuery{Status: oncepush.CampaignCompleted}); err != nil || len(page.Campaigns) != 1 {
		t.Fatalf("completed campaigns: %+v, %v", page, err)
	}

	// Deleting a recipient takes its place in uploaded audiences.
	d := b.createCampaign(campaignSpec("after delete"))
	b.upload(d.ID, 1, rs...)
	if err := b.client.DeleteRecipient(b.ctx, rs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.StartCampaign(b.ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	if st := b.expand(b.client); st.Written != 2 {
		t.Fatalf("after deleting a recipient: %d written, want 2", st.Written)
	}
}

func testCampaignPages[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	rs := b.recipientsNamed("page-", 5)
	c := b.createCampaign(campaignSpec("pages"))
	if res := b.upload(c.ID, 1, rs[0], rs[1], rs[2]); res.Added != 3 || res.Replayed {
		t.Fatalf("page 1: %+v", res)
	}
	// The same page again, in another order and with a repeat: nothing.
	if res := b.upload(c.ID, 1, rs[2], rs[0], rs[1], rs[0]); res.Added != 0 || !res.Replayed {
		t.Fatalf("page 1 again: %+v, want replayed", res)
	}
	// Another page under a used number is refused, and writes nothing.
	if _, err := b.client.AddCampaignRecipients(b.ctx, c.ID, 1, []string{rs[3]}); !errors.Is(err, oncepush.ErrCampaignPageConflict) {
		t.Fatalf("page 1 with other recipients: %v, want ErrCampaignPageConflict", err)
	}
	// A recipient in two pages is one member of the audience.
	if res := b.upload(c.ID, 2, rs[2], rs[3], rs[4]); res.Added != 2 {
		t.Fatalf("page 2: %+v, want 2 added", res)
	}
	for _, bad := range []struct {
		page       int
		recipients []string
		field      string
	}{
		{0, rs, "page"},
		{3, nil, "recipients"},
		{3, []string{"ok", ""}, "recipients[1]"},
	} {
		_, err := b.client.AddCampaignRecipients(b.ctx, c.ID, bad.page, bad.recipients)
		var ve *oncepush.ValidationError
		if !errors.As(err, &ve) || ve.Field != bad.field {
			t.Errorf("AddCampaignRecipients(%d, %q): %v, want a ValidationError naming %s", bad.page, bad.recipients, err, bad.field)
		}
	}
	dev := b.createCampaign(oncepush.CampaignSpec{Message: msg("devices"), Audience: oncepush.AudienceDevices})
	if _, err := b.client.AddCampaignRecipients(b.ctx, dev.ID, 1, rs); err == nil {
		t.Fatal("a page for a device audience was taken")
	}
	if got := b.campaign(c.ID); got.Recipients != 5 {
		t.Fatalf("audience size %d, want 5", got.Recipients)
	}
	if _, err := b.client.StartCampaign(b.ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	b.expand(b.client)
	b.drain()
	b.deliveredOnce(b.fcm.Submissions(), "pages", rs)
}

// testCampaignStartsOnce: a second starter that reaches the campaign while
// the first holds it finds it sending and does nothing; two clients
// expanding at once write each delivery once.
func testCampaignStartsOnce[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.CampaignBatch = 7 })
	rs := b.recipientsNamed("race-", 40)
	c := b.createCampaign(campaignSpec("race"))
	b.upload(c.ID, 1, rs...)

	// The first starter holds the row lock; the second is let go once it
	// is about to take it.
	firstHolds, secondLocking, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	first := enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnCampaignLocked: func(int64, string) {
		close(firstHolds)
		<-release
	}})
	second := enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnCampaignLocking: func(int64) { close(secondLocking) }})
	errs := make(chan error, 2)
	go func() { _, err := b.client.StartCampaign(first, c.ID); errs <- err }()
	<-firstHolds
	other := b.newClient(b.db.Driver(t, 0), nil)
	go func() { _, err := other.StartCampaign(second, c.ID); errs <- err }()
	<-secondLocking
	close(release)
	var won, lost int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			won++
		case errors.Is(err, oncepush.ErrCampaignState):
			lost++
		default:
			t.Fatalf("StartCampaign: %v", err)
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("two starters: %d started, %d refused; want 1 and 1", won, lost)
	}

	// Two clients expand at once, a batch at a time each.
	var wg sync.WaitGroup
	stats := make([]oncepush.CampaignStats, 2)
	for i, cl := range []*oncepush.Client[TTx]{b.client, other} {
		wg.Go(func() {
			st, err := cl.ExpandCampaigns(b.ctx)
			if err != nil {
				t.Errorf("ExpandCampaigns: %v", err)
			}
			stats[i] = st
		})
	}
	wg.Wait()
	if n := stats[0].Written + stats[1].Written; n != 40 {
		t.Fatalf("expanders wrote %d deliveries (%+v), want 40", n, stats)
	}
	b.drain()
	b.deliveredOnce(b.fcm.Submissions(), "race", rs)
	msgs, err := b.client.Messages(b.ctx, oncepush.MessageQuery{Limit: 10})
	if err != nil || len(msgs.Messages) != 1 {
		t.Fatalf("messages: %d (%v), want the campaign's one", len(msgs.Messages), err)
	}
}

// testCampaignScheduledStartsOnce: a scheduled campaign waits for its time;
// two clients' loops finding it due start it once.
func testCampaignScheduledStartsOnce[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	rs := b.recipientsNamed("sched-", 12)
	c := b.createCampaign(campaignSpec("scheduled"))
	b.upload(c.ID, 1, rs...)
	if c, err := b.client.ScheduleCampaign(b.ctx, c.ID, epoch.Add(time.Hour)); err != nil || c.Status != oncepush.CampaignScheduled || !c.StartAt.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("ScheduleCampaign: %+v, %v", c, err)
	}
	if st := b.expand(b.client); st.Steps != 0 {
		t.Fatalf("before its time: %+v, want nothing done", st)
	}
	b.clock.Advance(time.Hour)
	other := b.newClient(b.db.Driver(t, 0), nil)
	var wg sync.WaitGroup
	started := make([]int, 2)
	for i, cl := range []*oncepush.Client[TTx]{b.client, other} {
		wg.Go(func() {
			st, err := cl.ExpandCampaigns(b.ctx)
			if err != nil {
				t.Errorf("ExpandCampaigns: %v", err)
			}
			started[i] = st.Started
		})
	}
	wg.Wait()
	if started[0]+started[1] != 1 {
		t.Fatalf("started %v times, want once", started)
	}
	b.drain()
	b.deliveredOnce(b.fcm.Submissions(), "scheduled", rs)
}

// testCampaignResumesFromCursor: a batch that fails after k committed rolls
// back alone; the next try goes on from the cursor, and every target gets
// exactly one delivery.
func testCampaignResumesFromCursor[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.CampaignBatch = 10 })
	rs := b.recipientsNamed("resume-", 35)
	c := b.startCampaign(campaignSpec("resume"), rs...)
	injected := errors.New("injected: the expander dies after its batch's statements")
	batches := 0
	failThird := enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnCampaignBatch: func(int64, int) error {
		batches++
		if batches == 3 {
			return injected
		}
		return nil
	}})
	st, err := b.client.ExpandCampaigns(failThird)
	if !errors.Is(err, injected) || st.Written != 20 {
		t.Fatalf("ExpandCampaigns with batch 3 failing: %+v, %v; want 20 written and the injected error", st, err)
	}
	got := b.campaign(c.ID)
	if got.Status != oncepush.CampaignSending || got.Cursor != rs[19] || got.Written != 20 || got.Tries != 1 || !strings.Contains(got.LastError, "injected") {
		t.Fatalf("after the failure: status %s, cursor %q, written %d, tries %d, last error %q", got.Status, got.Cursor, got.Written, got.Tries, got.LastError)
	}
	// Another client resumes it.
	other := b.newClient(b.db.Driver(t, 0), nil)
	if st := b.expand(other); st.Written != 15 || st.Completed != 1 {
		t.Fatalf("resumed: %+v, want 15 written and completed", st)
	}
	b.drain()
	b.deliveredOnce(b.fcm.Submissions(), "resume", rs)
	if got := b.campaign(c.ID); got.Tries != 0 || got.Totals.Sent != 35 {
		t.Fatalf("completed: tries %d, totals %+v", got.Tries, *got.Totals)
	}
}

// testCampaignInterrupted: a batch that fails every time (as one that kills
// its process would, its try counted first) ends the campaign interrupted
// when the last try allowed fails, never left sending, with a last error
// that says why; resumed, it completes.
func testCampaignInterrupted[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.CampaignBatch = 4; c.CampaignMaxTries = 3 })
	rs := b.recipientsNamed("intr-", 10)
	c := b.startCampaign(campaignSpec("interrupted"), rs...)
	poisoned := enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnCampaignBatch: func(_ int64, _ int) error {
		return errors.New("injected: this batch always fails")
	}})
	for try := 1; try <= 2; try++ {
		if _, err := b.client.ExpandCampaigns(poisoned); err == nil {
			t.Fatalf("try %d: no error", try)
		}
		if got := b.campaign(c.ID); got.Status != oncepush.CampaignSending || got.Tries != try {
			t.Fatalf("after try %d: %s with %d tries", try, got.Status, got.Tries)
		}
	}
	st, err := b.client.ExpandCampaigns(poisoned)
	if err == nil || st.Interrupted != 1 {
		t.Fatalf("the last try: %+v, %v; want it failed and the campaign interrupted", st, err)
	}
	got := b.campaign(c.ID)
	if got.Status != oncepush.CampaignInterrupted || got.Written != 0 || !strings.Contains(got.LastError, "3 tries") ||
		!strings.Contains(got.LastError, "always fails") {
		t.Fatalf("interrupted: %+v; want its last error to say 3 tries failed, and how", got)
	}
	if st := b.expand(b.client); st.Steps != 0 {
		t.Fatalf("an interrupted campaign was worked on: %+v", st)
	}
	if c, err := b.client.ResumeCampaign(b.ctx, c.ID); err != nil || c.Status != oncepush.CampaignSending || c.Tries != 0 {
		t.Fatalf("ResumeCampaign: %+v, %v", c, err)
	}
	if st := b.expand(b.client); st.Written != 10 || st.Completed != 1 {
		t.Fatalf("resumed: %+v", st)
	}
	b.drain()
	b.deliveredOnce(b.fcm.Submissions(), "interrupted", rs)
}

// testCampaignTryInFlight: with one try allowed, another process's step
// that finds the campaign while the first process's try is counted but its
// step has not yet locked the row (the moment between the two) leaves it
// alone: no try failed, so the campaign is not interrupted, and the first
// step goes on to complete it.
func testCampaignTryInFlight[TTx any](t *testing.T, h Harness[TTx]) {
	oneTry := func(c *oncepush.Config) { c.CampaignBatch = 5; c.CampaignMaxTries = 1 }
	b := setup(t, h, oneTry)
	rs := b.recipientsNamed("gap-", 12)
	c := b.startCampaign(campaignSpec("gap"), rs...)

	// The first step is held between its counted try and its lock.
	inGap, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	first := enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnCampaignLocking: func(int64) {
		once.Do(func() {
			close(inGap)
			<-release
		})
	}})
	type expanded struct {
		st  oncepush.CampaignStats
		err error
	}
	done := make(chan expanded, 1)
	go func() {
		st, err := b.client.ExpandCampaigns(first)
		done <- expanded{st, err}
	}()
	<-inGap
	if got := b.campaign(c.ID); got.Tries != 1 || got.Status != oncepush.CampaignSending {
		close(release)
		t.Fatalf("in the gap: %s with %d tries; want sending with the first step's try counted", got.Status, got.Tries)
	}
	other := b.newClient(b.db.Driver(t, 0), oneTry)
	st, err := other.ExpandCampaigns(b.ctx)
	close(release)
	if err != nil || st.Interrupted != 0 {
		t.Fatalf("another process's step during the first's try: %+v, %v; want the campaign left alone", st, err)
	}
	d := <-done
	if d.err != nil || d.st.Written+st.Written != 12 || d.st.Completed+st.Completed != 1 {
		t.Fatalf("the first step: %+v, %v (the other: %+v); want 12 written and completed", d.st, d.err, st)
	}
	got := b.campaign(c.ID)
	if got.Status != oncepush.CampaignCompleted || got.Tries != 0 || got.LastError != "" {
		t.Fatalf("after: %s, %d tries, last error %q; want completed, no try failed", got.Status, got.Tries, got.LastError)
	}
	b.drain()
	b.deliveredOnce(b.fcm.Submissions(), "gap", rs)
}

// testCampaignAbandonedTry: a try counted by a process that died before its
// step ended (nothing recorded its failure) uses up the last try only once
// it can no longer be running — a lease after it began; the campaign is
// then interrupted with a last error that says so, and resumes whole.
func testCampaignAbandonedTry[TTx any](t *testing.T, h Harness[TTx]) {
	oneTry := func(c *oncepush.Config) { c.CampaignBatch = 5; c.CampaignMaxTries = 1 }
	b := setup(t, h, oneTry)
	rs := b.recipientsNamed("dead-", 7)
	c := b.startCampaign(campaignSpec("abandoned"), rs...)
	// The dead process's try: counted, then nothing.
	now := b.clock.Now()
	lease := b.client.Config().Lease
	if try, err := b.drv.Exec().CampaignTry(b.ctx, &driver.CampaignTryParams{Now: &now, MaxTries: 1, Lease: lease}); err != nil || !try.Found || try.Tries != 1 {
		t.Fatalf("the dead process's try: %+v, %v", try, err)
	}
	b.clock.Advance(lease - time.Second)
	if st := b.expand(b.client); st.Steps != 0 {
		t.Fatalf("within the lease of the last try: %+v; want the campaign left to it", st)
	}
	b.clock.Advance(time.Second)
	if st := b.expand(b.client); st.Interrupted != 1 || st.Written != 0 {
		t.Fatalf("a lease after the last try began: %+v; want it interrupted", st)
	}
	got := b.campaign(c.ID)
	if got.Status != oncepush.CampaignInterrupted || !strings.Contains(got.LastError, "did not finish") {
		t.Fatalf("interrupted: %s, last error %q; want interrupted, saying the try did not finish", got.Status, got.LastError)
	}
	if _, err := b.client.ResumeCampaign(b.ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if st := b.expand(b.client); st.Written != 7 || st.Completed != 1 {
		t.Fatalf("resumed: %+v", st)
	}
	b.drain()
	b.deliveredOnce(b.fcm.Submissions(), "abandoned", rs)
}

// testCampaignTokens: a device audience with a filter, a malformed token
// and a token registered twice in two spellings among valid ones: the bad
// ones counted, never sent; the campaign completes; a device registered
// after the expansion that the filter does not select is not reached.
func testCampaignTokens[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.CampaignBatch = 5 })
	var want []string
	for i := range 23 {
		r := fmt.Sprintf("tok-%04d", i)
		tags := []string{"plan:pro"}
		if i%4 == 0 {
			tags = []string{"plan:free"}
		}
		if _, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: r, Transport: oncepush.TransportFCM, Token: tokenFor(oncepush.TransportFCM, r), Tags: tags, Locale: "de-CH"}); err != nil {
			t.Fatal(err)
		}
		if i%4 != 0 {
			want = append(want, r)
		}
		// Every recipient also has an untagged APNs device, which the
		// filter leaves out.
		b.register(r, oncepush.TransportAPNs)
	}
	// A RuStore device the filter's transports leave out.
	if _, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "tok-rus", Transport: oncepush.TransportRuStore, Token: tokenFor(oncepush.TransportRuStore, "tok-rus"), Tags: []string{"plan:pro"}, Locale: "de"}); err != nil {
		t.Fatal(err)
	}
	// Rows no registration through the client would write: an old
	// version's malformed token, and one APNs token under two spellings.
	ex := b.drv.Exec()
	now := b.clock.Now()
	put := func(recipient, transport, token string) {
		t.Helper()
		if _, err := ex.DeviceRegister(b.ctx, &driver.DeviceRegisterParams{
			Now: &now, Recipient: recipient, Transport: transport, Token: token, TokenKey: token,
			Locale: "de", Tags: []string{"plan:pro"}, MaxPerRecipient: 10,
		}); err != nil {
			t.Fatal(err)
		}
	}
	twice := strings.Repeat("ab", 32)
	put("tok-bad", "fcm", "not a token!")
	put("tok-twice", "apns", twice)
	put("tok-twice", "apns", strings.ToUpper(twice))
	want = append(want, "tok-twice")
	slices.Sort(want)

	c := b.createCampaign(oncepush.CampaignSpec{
		Message: msg("tokens"), Audience: oncepush.AudienceDevices,
		Filter: oncepush.DeviceFilter{
			Transports: []oncepush.Transport{oncepush.TransportFCM, oncepush.TransportAPNs},
			Tags:       []string{"plan:pro"}, Locales: []string{"de"},
		},
	})
	if _, err := b.client.StartCampaign(b.ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	st := b.expand(b.client)
	if st.Completed != 1 || st.Written != len(want) {
		t.Fatalf("expansion: %+v, want %d written and completed", st, len(want))
	}
	// A free-plan device registered now is not reached by the pending
	// deliveries (the claim applies the filter too).
	if _, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: want[0], Transport: oncepush.TransportFCM, Token: tokenFor(oncepush.TransportFCM, "late"), Tags: []string{"plan:free"}}); err != nil {
		t.Fatal(err)
	}
	b.drain()
	b.deliveredOnce(append(b.fcm.Submissions(), b.apns.Submissions()...), "tokens", want)
	wantSends(t, b.rus, 0, "a RuStore device outside the filter")
	got := b.campaign(c.ID)
	if got.MalformedTokens != 1 || got.DuplicateTokens != 1 {
		t.Fatalf("token counts: %d malformed, %d duplicate; want 1 and 1", got.MalformedTokens, got.DuplicateTokens)
	}
	if got.Totals.Sent != len(want) || got.Totals.Accepted != len(want) {
		t.Fatalf("totals %+v, want %d sent and accepted, as the providers received", *got.Totals, len(want))
	}
}

// testCampaignCountsAddUp: every recipient of the audience the expansion
// passes is either written a delivery or counted under the reason it was
// not, once, in the batch that decided it — a batch that fails and is
// written again does not count twice — so written plus not written is the
// audience: uploaded recipients with devices, without, filtered out, with
// malformed tokens only, and with a token another recipient holds.
func testCampaignCountsAddUp[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.CampaignBatch = 3 })
	ex := b.drv.Exec()
	now := b.clock.Now()
	device := func(recipient string, tr oncepush.Transport, tag string) {
		t.Helper()
		if _, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: recipient, Transport: tr, Token: tokenFor(tr, recipient), Tags: []string{tag}}); err != nil {
			t.Fatal(err)
		}
	}
	// Rows no registration through the client would write: a malformed
	// token, and one APNs token under two spellings for two recipients.
	raw := func(recipient, transport, token, tag string) {
		t.Helper()
		if _, err := ex.DeviceRegister(b.ctx, &driver.DeviceRegisterParams{
			Now: &now, Recipient: recipient, Transport: transport, Token: token, TokenKey: token,
			Tags: []string{tag}, MaxPerRecipient: 10,
		}); err != nil {
			t.Fatal(err)
		}
	}
	written := []string{"cnt-a1", "cnt-a2", "cnt-a3", "cnt-e1"}
	for _, r := range written[:3] {
		device(r, oncepush.TransportFCM, "plan:pro")
	}
	device("cnt-c-free", oncepush.TransportFCM, "plan:free")
	raw("cnt-d-bad", "fcm", "not a token!", "plan:pro")
	twice := strings.Repeat("cd", 32)
	raw("cnt-e1", "apns", twice, "plan:pro")
	raw("cnt-e2", "apns", strings.ToUpper(twice), "plan:pro")
	// Filtered out and malformed: the furthest a device got decides.
	device("cnt-f-mixed", oncepush.TransportFCM, "plan:free")
	raw("cnt-f-mixed", "fcm", "also not a token!", "plan:pro")
	audience := []string{"cnt-a1", "cnt-a2", "cnt-a3", "cnt-b-none1", "cnt-b-none2", "cnt-c-free", "cnt-d-bad", "cnt-e1", "cnt-e2", "cnt-f-mixed"}
	want := oncepush.CampaignNotWritten{NoDevice: 2, FilteredOut: 1, MalformedTokens: 2, DuplicateTokens: 1}

	check := func(c *oncepush.Campaign, audience int64, want oncepush.CampaignNotWritten) {
		t.Helper()
		if c.Status != oncepush.CampaignCompleted || c.NotWritten != want || c.Written+c.NotWritten.Total() != audience {
			t.Fatalf("%s campaign: status %s, written %d, not written %+v; want completed, %d written and %+v (audience %d)",
				c.Audience, c.Status, c.Written, c.NotWritten, audience-want.Total(), want, audience)
		}
	}
	spec := campaignSpec("counts")
	spec.Filter = oncepush.DeviceFilter{Tags: []string{"plan:pro"}}
	c := b.startCampaign(spec, audience...)
	injected := errors.New("injected: the third batch fails once")
	batches := 0
	failThird := enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnCampaignBatch: func(int64, int) error {
		batches++
		if batches == 3 {
			return injected
		}
		return nil
	}})
	if _, err := b.client.ExpandCampaigns(failThird); !errors.Is(err, injected) {
		t.Fatalf("ExpandCampaigns with batch 3 failing: %v, want the injected error", err)
	}
	b.expand(b.client)
	got := b.campaign(c.ID)
	check(got, int64(len(audience)), want)
	if got.Recipients != int64(len(audience)) {
		t.Fatalf("recipients %d, want %d uploaded", got.Recipients, len(audience))
	}
	b.drain()
	b.deliveredOnce(append(b.fcm.Submissions(), b.apns.Submissions()...), "counts", written)

	// Every device's recipient is the audience of a devices campaign; none
	// lacks a device, and one batch holds both spellings of the token.
	big := b.newClient(b.db.Driver(t, 0), func(c *oncepush.Config) { c.CampaignBatch = 100 })
	spec = oncepush.CampaignSpec{Message: msg("counts 2"), Audience: oncepush.AudienceDevices, Filter: spec.Filter}
	c2 := b.createCampaign(spec)
	if _, err := b.client.StartCampaign(b.ctx, c2.ID); err != nil {
		t.Fatal(err)
	}
	b.expand(big)
	want.NoDevice = 0
	check(b.campaign(c2.ID), int64(len(audience)-2), want)
}

// testCampaignCancel: once CancelCampaign returns, nothing more of the
// campaign reaches the provider — checked against the provider's record,
// not the ledger; sends already in flight finish.
func testCampaignCancel[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.BatchSize = 5; c.ConcurrentSends = 2; c.PipelineDepth = 1 })
	rs := b.recipientsNamed("cancel-", 30)
	c := b.startCampaign(campaignSpec("cancel"), rs...)
	b.expand(b.client)
	release := b.fcm.Hold()
	defer release()
	drained := make(chan error, 1)
	go func() { _, err := b.client.Drain(b.ctx); drained <- err }()
	if !b.fcm.WaitCount(b.ctx, 2) {
		t.Fatal("the first sends never started")
	}
	canceled, err := b.client.CancelCampaign(b.ctx, c.ID)
	if err != nil || canceled.Status != oncepush.CampaignCanceled {
		t.Fatalf("CancelCampaign: %+v, %v", canceled, err)
	}
	inFlight := b.fcm.Count()
	// The answer says what was in flight, as CancelMessage's does: the
	// first wave, held at the provider.
	if canceled.Cancel == nil || *canceled.Cancel != (oncepush.CancelResult{Canceled: 30, InFlight: inFlight}) {
		t.Errorf("CancelCampaign's answer: cancel %+v; want 30 canceled, %d in flight", canceled.Cancel, inFlight)
	}
	release()
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if n := b.fcm.Count(); n != inFlight {
		t.Fatalf("the provider received %d submissions, %d of them after the cancel returned", n, n-inFlight)
	}
	// Every delivery ends canceled, those in flight too (a cancel wins over
	// an answer that comes after it); their attempts say what the provider
	// answered.
	got := b.campaign(c.ID)
	if got.Totals.Canceled != 30 || got.Totals.Accepted != inFlight {
		t.Fatalf("totals %+v, want 30 canceled and %d accepted", *got.Totals, inFlight)
	}
	if again, err := b.client.CancelCampaign(b.ctx, c.ID); err != nil || again.Status != oncepush.CampaignCanceled ||
		again.Cancel == nil || *again.Cancel != (oncepush.CancelResult{}) {
		t.Fatalf("cancel again: %+v, %v; want nothing more canceled", again, err)
	}
}

// testCampaignPacing: a campaign paced at R per minute has its deliveries
// fall due R per minute from its start; a transactional send meanwhile goes
// at once.
func testCampaignPacing[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	rs := b.recipientsNamed("paced-", 12)
	b.register("urgent", oncepush.TransportFCM)
	spec := campaignSpec("paced")
	spec.RatePerMinute = 60 // one a second
	b.startCampaign(spec, rs...)
	b.expand(b.client)
	b.drain()
	wantSends(t, b.fcm, 1, "at the start")
	b.send([]string{"urgent"}, msg("password reset"), nil)
	b.drain()
	if subs := b.fcm.Submissions(); len(subs) != 2 || subs[1].Title != "password reset" {
		t.Fatalf("the transactional send waited behind the campaign: %d submissions", len(subs))
	}
	for sec := 1; sec <= 11; sec++ {
		b.drainAfter(time.Second)
		if n := b.fcm.Count() - 1; n != sec+1 {
			t.Fatalf("after %d s: %d campaign sends, want %d", sec, n, sec+1)
		}
	}
	var campaign []oncepush.Submission
	for _, s := range b.fcm.Submissions() {
		if s.Title == "paced" {
			campaign = append(campaign, s)
		}
	}
	b.deliveredOnce(campaign, "paced", rs)
}

// testCampaignRecipientFillingABatch: a device audience read in pages
// smaller than one recipient's devices: no recipient is split across
// batches (each is judged on all its devices, and gets one delivery), and
// each device is submitted once.
func testCampaignRecipientFillingABatch[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.CampaignBatch = 3 })
	b.register("fill-a", oncepush.TransportFCM)
	b.register("fill-b", oncepush.TransportFCM, oncepush.TransportFCM, oncepush.TransportFCM, oncepush.TransportFCM, oncepush.TransportAPNs)
	b.register("fill-c", oncepush.TransportFCM, oncepush.TransportFCM)
	b.register("fill-d", oncepush.TransportFCM)
	c := b.createCampaign(oncepush.CampaignSpec{Message: msg("fill"), Audience: oncepush.AudienceDevices})
	if _, err := b.client.StartCampaign(b.ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if st := b.expand(b.client); st.Written != 4 || st.Completed != 1 {
		t.Fatalf("expansion: %+v, want 4 deliveries and completed", st)
	}
	b.drain()
	perDevice := map[string]int{}
	for _, s := range append(b.fcm.Submissions(), b.apns.Submissions()...) {
		perDevice[string(s.Token)]++
	}
	if len(perDevice) != 9 {
		t.Fatalf("%d devices reached, want 9: %v", len(perDevice), perDevice)
	}
	for tok, n := range perDevice {
		if n != 1 {
			t.Errorf("device %s: %d submissions", tok, n)
		}
	}
	for _, r := range []string{"fill-a", "fill-b", "fill-c", "fill-d"} {
		b.only(r)
	}
}

// testCampaignAtLocalTime: "02:30 on 2026-03-08" in each recipient's zone —
// the day New York springs forward at 02:00, so its 02:30 does not exist and
// is sent just after the gap, at 03:30 EDT — lands at each zone's instant
// and not before, on the test clock; a recipient whose devices give no zone
// gets the default's; the most recently registered device's zone wins.
func testCampaignAtLocalTime[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	b.clock.Set(time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC))
	reg := func(recipient, zone string) {
		t.Helper()
		if _, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: recipient, Transport: oncepush.TransportFCM, Token: tokenFor(oncepush.TransportFCM, recipient), TimeZone: zone}); err != nil {
			t.Fatal(err)
		}
	}
	reg("lt-tokyo", "Asia/Tokyo")
	reg("lt-berlin", "America/Los_Angeles") // moved since: the later registration's zone wins
	b.clock.Advance(time.Second)
	reg("lt-berlin", "Europe/Berlin")
	reg("lt-ny", "America/New_York")
	reg("lt-none", "")
	want := map[string]time.Time{
		"lt-tokyo":  time.Date(2026, 3, 7, 17, 30, 0, 0, time.UTC), // 02:30 JST
		"lt-berlin": time.Date(2026, 3, 8, 1, 30, 0, 0, time.UTC),  // 02:30 CET
		"lt-none":   time.Date(2026, 3, 8, 5, 30, 0, 0, time.UTC),  // 02:30 in São Paulo, UTC-3
		"lt-ny":     time.Date(2026, 3, 8, 7, 30, 0, 0, time.UTC),  // 03:30 EDT: 02:30 is in the gap
	}
	spec := campaignSpec("local")
	spec.LocalTime = &oncepush.LocalTime{Date: "2026-03-08", Time: "02:30", DefaultZone: "America/Sao_Paulo"}
	b.startCampaign(spec, "lt-tokyo", "lt-berlin", "lt-ny", "lt-none")
	b.expand(b.client)
	for _, r := range []string{"lt-tokyo", "lt-berlin", "lt-none", "lt-ny"} {
		if d := b.only(r); !d.NextAttemptAt.Equal(want[r]) {
			t.Errorf("%s falls due at %s, want %s", r, d.NextAttemptAt.UTC(), want[r])
		}
		b.clock.Set(want[r].Add(-time.Second))
		b.drain()
		if d := b.only(r); d.Status != oncepush.StatusPending {
			t.Fatalf("%s: %s a second before its moment", r, d.Status)
		}
		b.clock.Set(want[r])
		b.drain()
		wantStatus(t, b.only(r), oncepush.StatusSent)
	}
	// Five devices, lt-berlin's two among them: each submitted once.
	perDevice := map[oncepush.Token]int{}
	for _, s := range b.fcm.Submissions() {
		perDevice[s.Token]++
	}
	if len(perDevice) != 5 || b.fcm.Count() != 5 {
		t.Fatalf("%d submissions to %d devices, want 5 to 5", b.fcm.Count(), len(perDevice))
	}

	// Local time is a rule for the due time; so is pacing: not both.
	spec.RatePerMinute = 60
	if _, err := b.client.CreateCampaign(b.ctx, spec); err == nil || !strings.Contains(err.Error(), "localTime") {
		t.Fatalf("local time with pacing: %v, want a refusal naming localTime", err)
	}
	spec.RatePerMinute = 0
	spec.LocalTime = &oncepush.LocalTime{Date: "2026-02-30", Time: "09:00"}
	var ve *oncepush.ValidationError
	if _, err := b.client.CreateCampaign(b.ctx, spec); !errors.As(err, &ve) || ve.Field != "localTime.date" {
		t.Fatalf("a date that does not exist: %v, want a ValidationError naming localTime.date", err)
	}
}

// testTransactionalSendsFirst: a send made while a campaign's deliveries
// are all due — older than it — is claimed by the very next claim, not
// after them; the campaign's deliveries then follow.
func testTransactionalSendsFirst[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.BatchSize = 5; c.Workers = 1; c.PipelineDepth = 1 })
	rs := b.recipientsNamed("lane-", 20)
	b.register("urgent", oncepush.TransportFCM)
	b.startCampaign(campaignSpec("sale"), rs...)
	b.expand(b.client)
	b.clock.Advance(time.Minute) // the campaign's deliveries have waited a minute
	b.send([]string{"urgent"}, msg("password reset"), nil)

	// At the first claim's commit, the send is leased (due again at the
	// lease's end), and four campaign deliveries with it.
	var first sync.Once
	var urgentLeased bool
	var leased int
	ctx := enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnClaimCommitted: func(n, _ int) {
		first.Do(func() {
			leased = n
			d := b.only("urgent")
			urgentLeased = d.NextAttemptAt.After(b.clock.Now())
		})
	}})
	if _, err := b.client.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if !urgentLeased || leased != 5 {
		t.Fatalf("the first claim took %d deliveries, the transactional send among them: %v; want 5 with it", leased, urgentLeased)
	}
	if subs := b.fcm.Submissions(); len(subs) != 21 {
		t.Fatalf("%d submissions, want 21", len(subs))
	}
	wantStatus(t, b.only("urgent"), oncepush.StatusSent)
}

// testCampaignKeyUnreachable: a campaign's deliveries are deduplicated in a
// space no caller's input reaches. A send whose dedup key spells what the
// campaign used internally ("campaign:<id>") takes no target from it, before
// or after the expansion, shares no notification id with it, and a list of
// messages by that key does not find the campaign's.
func testCampaignKeyUnreachable[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	rs := b.recipientsNamed("key-", 3)
	c := b.createCampaign(campaignSpec("campaign"))
	key := fmt.Sprintf("campaign:%d", c.ID)
	if res := b.send(rs[:1], msg("plain before"), &oncepush.SendOptions{DedupKey: key}); res.Queued != 1 {
		t.Fatalf("a plain send under %q: %+v, want queued", key, res)
	}
	b.upload(c.ID, 1, rs...)
	if _, err := b.client.StartCampaign(b.ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	if st := b.expand(b.client); st.Written != len(rs) {
		t.Fatalf("expansion wrote %d deliveries, want %d: a plain send under %q took a target", st.Written, len(rs), key)
	}
	if res := b.send(rs[1:2], msg("plain after"), &oncepush.SendOptions{DedupKey: key}); res.Queued != 1 || res.Duplicates != 0 {
		t.Fatalf("a plain send under %q after the expansion: %+v, want queued, not a duplicate of the campaign's", key, res)
	}
	b.drain()
	ids := map[string]string{}
	for _, s := range b.fcm.Submissions() {
		if prev, dup := ids[s.NotificationID]; dup {
			t.Fatalf("%q and %q share notification id %s: a device's seen-set drops one", prev, s.Title, s.NotificationID)
		}
		ids[s.NotificationID] = s.Title
	}
	if len(ids) != 5 {
		t.Fatalf("%d distinct submissions, want 5 (3 campaign, 2 plain): %v", len(ids), ids)
	}
	page, err := b.client.Messages(b.ctx, oncepush.MessageQuery{DedupKey: key, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range page.Messages {
		if m.ID == b.campaign(c.ID).MessageID {
			t.Fatalf("messages listed under dedup key %q include the campaign's", key)
		}
	}
}

// testCampaignTokenMovedReachedOnce: one campaign reaches one token once,
// across batches. Between the campaign's two expansion batches, two tokens
// move from recipients of the first batch to a recipient of the second:
// one its first delivery has already had accepted, which the second must
// not send again (a second push with another oncepush_id, which no seen-set
// catches) and counts as a duplicate token; and one whose first submission
// the provider answered "retry later", which nobody has reached, so the
// second delivery takes it over rather than leave it unreached.
func testCampaignTokenMovedReachedOnce[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.CampaignBatch = 2 })
	reached := b.register("move-a", oncepush.TransportFCM)[0]
	retried := b.register("move-b", oncepush.TransportFCM)[0]
	own := b.register("move-z", oncepush.TransportFCM)[0]
	c := b.startCampaign(campaignSpec("moved"), "move-a", "move-b", "move-z")
	stop := errors.New("injected: the second batch waits")
	batches := 0
	firstOnly := enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnCampaignBatch: func(int64, int) error {
		if batches++; batches == 2 {
			return stop
		}
		return nil
	}})
	if st, err := b.client.ExpandCampaigns(firstOnly); !errors.Is(err, stop) || st.Written != 2 {
		t.Fatalf("the first batch: %+v, %v; want move-a and move-b written", st, err)
	}
	b.fcm.Answer(func(_ context.Context, s *oncepush.Submission) oncepush.Result {
		if s.Token == retried.Token {
			return oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "503 UNAVAILABLE"}
		}
		return oncepush.Accepted("accepted")
	})
	b.drain()
	b.fcm.Answer(nil)
	if n := b.fcm.Count(); n != 2 {
		t.Fatalf("the first batch's sends: %d, want 2", n)
	}

	// Both tokens change hands, then the second batch is written.
	for _, d := range []*oncepush.Device{reached, retried} {
		if _, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "move-z", Transport: d.Transport, Token: d.Token}); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.expand(b.client); st.Written != 1 || st.Completed != 1 {
		t.Fatalf("the second batch: %+v, want move-z written", st)
	}
	b.drainAfter(2 * time.Hour) // past move-b's backoff
	b.drain()

	accepted := map[oncepush.Token][]string{}
	answeredRetry := false
	for _, s := range b.fcm.Submissions() {
		if s.Token == retried.Token && !answeredRetry {
			answeredRetry = true // its first submission: not reached
			continue
		}
		accepted[s.Token] = append(accepted[s.Token], s.NotificationID)
	}
	for what, tok := range map[string]oncepush.Token{"the token reached before it moved": reached.Token,
		"the token answered retry before it moved": retried.Token, "move-z's own token": own.Token} {
		if got := accepted[tok]; len(got) != 1 {
			t.Errorf("%s: reached %d times by the campaign (oncepush_id %v), want once", what, len(got), got)
		}
	}
	got := b.campaign(c.ID)
	if got.DuplicateTokens != 1 {
		t.Errorf("duplicateTokens %d, want 1 (the token reached before it moved)", got.DuplicateTokens)
	}
	if got.Totals.Queued != 0 {
		t.Errorf("totals %+v: deliveries left queued", *got.Totals)
	}
}

// testCampaignTokenInFlightHeld: a token moves while the campaign's send
// to it is in flight. The new owner's delivery, claimed by another client
// meanwhile, does not send it (the mark finds the token held by a send that
// may yet succeed) and is put back, unsent; once that send is accepted, it
// is settled as a duplicate, never sent, and ends skipped, its only device
// having had the campaign.
func testCampaignTokenInFlightHeld[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.CampaignBatch = 1 })
	tok := b.register("held-a", oncepush.TransportFCM)[0].Token
	c := b.startCampaign(campaignSpec("held"), "held-a", "held-z")
	stop := errors.New("injected: the second batch waits")
	batches := 0
	firstOnly := enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnCampaignBatch: func(int64, int) error {
		if batches++; batches == 2 {
			return stop
		}
		return nil
	}})
	if st, err := b.client.ExpandCampaigns(firstOnly); !errors.Is(err, stop) || st.Written != 1 {
		t.Fatalf("the first batch: %+v, %v; want held-a written", st, err)
	}
	release := b.fcm.Hold()
	defer release()
	drained := make(chan error, 1)
	go func() { _, err := b.client.Drain(b.ctx); drained <- err }()
	if !b.fcm.WaitCount(b.ctx, 1) {
		t.Fatal("held-a's send never started")
	}
	// In flight: the token changes hands and held-z's delivery is written
	// and claimed by another client.
	if _, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "held-z", Transport: oncepush.TransportFCM, Token: tok}); err != nil {
		t.Fatal(err)
	}
	if st := b.expand(b.client); st.Written != 1 {
		t.Fatalf("the second batch: %+v, want held-z written", st)
	}
	other := b.newClient(b.db.Driver(t, 0), func(c *oncepush.Config) { c.Providers = []oncepush.Provider{b.fcm} })
	st := drain(t, other)
	if st.Claimed != 1 || st.Submitted != 0 || st.Released != 1 {
		t.Fatalf("held-z's run while held-a's send is in flight: %+v; want it claimed and put back unsent", st)
	}
	release()
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	b.drainAfter(time.Minute)
	if n := b.fcm.Count(); n != 1 {
		t.Fatalf("the token was submitted %d times, want once", n)
	}
	wantStatus(t, b.only("held-z"), oncepush.StatusSkipped)
	if got := b.campaign(c.ID); got.DuplicateTokens != 1 || got.Totals.Sent != 1 || got.Totals.Skipped != 1 {
		t.Fatalf("duplicateTokens %d, totals %+v; want 1 duplicate, 1 sent, 1 skipped", got.DuplicateTokens, *got.Totals)
	}
}
