package drivertest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/oncepush/oncepush/driver"
)

// RunMethods runs the per-method layer of the suite: the promises package
// driver's comments make about single methods, each tested by calling the
// driver's executor directly, with no engine in between. A failure names
// the method and the promise it broke (Method/DeliveryUpdateMany/LeaseGuard),
// so a driver's author knows where to look before reading Run's
// failures, which name the engine's behaviour instead.
func RunMethods[TTx any](t *testing.T, h Harness[TTx]) {
	t.Run("Method", func(t *testing.T) {
		runParallel(t, h, []testCase[TTx]{
			{"DeliveryUpdateMany/LeaseGuard", testUpdateLeaseGuard[TTx]},
			{"DeliveryUpdateMany/CanceledWhileLeased", testUpdateCanceledWhileLeased[TTx]},
			{"DeviceAttemptMarkSending/LeaseGuard", testMarkLeaseGuard[TTx]},
			{"DeviceAttemptMarkSending/MinLeaseLeft", testMarkMinLeaseLeft[TTx]},
			{"DeviceAttemptMarkSending/CanceledWhileLeased", testMarkCanceledWhileLeased[TTx]},
			{"CampaignTry/MaxTries", testCampaignTryMaxTries[TTx]},
			{"CampaignPageAdd/Digest", testCampaignPageAddDigest[TTx]},
		})
	})
}

// methodLease is the lease of the deliveries methodSetup claims.
const methodLease = time.Minute

// methodBundle is what a per-method test works with: an executor of its
// own database, and one delivery to recipient "r" leased to lease 1 at
// epoch, whose recipient has one FCM device.
type methodBundle struct {
	t        *testing.T
	ex       driver.Executor
	message  int64
	delivery int64
	device   *driver.Device
}

func methodSetup[TTx any](t *testing.T, h Harness[TTx]) *methodBundle {
	t.Helper()
	ctx := t.Context()
	ex := h.NewDB(t).Driver(t, 0).Exec()
	now := epoch
	dev, err := ex.DeviceRegister(ctx, &driver.DeviceRegisterParams{Now: &now, Recipient: "r",
		Transport: "fcm", Token: "tok-r", TokenKey: "tok-r", MaxPerRecipient: 10})
	if err != nil {
		t.Fatalf("DeviceRegister: %v", err)
	}
	msg, n, err := ex.MessageInsert(ctx, &driver.MessageInsertParams{Now: &now, Type: "t", Title: "m",
		Ambiguity: "resend", Lifetime: time.Hour, Recipients: []string{"r"}, NotificationIDs: []string{"n-r"}})
	if err != nil || n != 1 {
		t.Fatalf("MessageInsert: %d inserted, %v", n, err)
	}
	b := &methodBundle{t: t, ex: ex, message: msg, device: dev}
	rows := b.claim(1, now)
	if len(rows) != 1 {
		t.Fatalf("DeliveryClaim at %s leased %d deliveries, want 1", now, len(rows))
	}
	b.delivery = rows[0].ID
	return b
}

// claim leases what is due at now to lease.
func (b *methodBundle) claim(lease int64, now time.Time) []*driver.ClaimedDelivery {
	b.t.Helper()
	res, err := b.ex.DeliveryClaim(b.t.Context(), &driver.DeliveryClaimParams{Now: &now, Max: 10, LeaseID: lease, Lease: methodLease})
	if err != nil {
		b.t.Fatalf("DeliveryClaim: %v", err)
	}
	return res.Rows
}

// update asks for the delivery to end sent, under lease, at now.
func (b *methodBundle) update(lease int64, now time.Time) []driver.UpdatedDelivery {
	b.t.Helper()
	text := "sent by lease"
	got, err := b.ex.DeliveryUpdateMany(b.t.Context(), &driver.DeliveryUpdateManyParams{Now: &now, LeaseID: lease,
		Updates: []driver.DeliveryUpdate{{ID: b.delivery, Status: driver.StatusSent, Attempts: 1, LastError: &text}}})
	if err != nil {
		b.t.Fatalf("DeliveryUpdateMany: %v", err)
	}
	return got
}

// mark asks for the delivery's one pair to be marked sending, under lease,
// at now, with at least minLeft of the lease left.
func (b *methodBundle) mark(lease int64, now time.Time, minLeft time.Duration) []driver.MarkedPair {
	b.t.Helper()
	got, err := b.ex.DeviceAttemptMarkSending(b.t.Context(), &driver.DeviceAttemptMarkSendingParams{
		Now: &now, LeaseID: lease, MinLeaseLeft: minLeft,
		Pairs: []driver.DeviceAttemptKey{{DeliveryID: b.delivery, DeviceID: b.device.ID, Transport: b.device.Transport, TokenKey: b.device.TokenKey}},
	})
	if err != nil {
		b.t.Fatalf("DeviceAttemptMarkSending: %v", err)
	}
	return got
}

// get reads the delivery with its ledger.
func (b *methodBundle) get() *driver.Delivery {
	b.t.Helper()
	d, err := b.ex.DeliveryGet(b.t.Context(), b.delivery)
	if err != nil {
		b.t.Fatalf("DeliveryGet: %v", err)
	}
	return d
}

// cancel cancels the message.
func (b *methodBundle) cancel(now time.Time) {
	b.t.Helper()
	res, err := b.ex.MessageCancel(b.t.Context(), &driver.MessageCancelParams{Now: &now, MessageID: b.message})
	if err != nil || res.Canceled != 1 {
		b.t.Fatalf("MessageCancel: %+v, %v; want 1 canceled", res, err)
	}
}

// testUpdateLeaseGuard: an update from a run whose lease was lost (the
// lease expired and another run claimed the delivery) writes nothing and
// is absent from the answer; the new holder's update is applied.
func testUpdateLeaseGuard[TTx any](t *testing.T, h Harness[TTx]) {
	b := methodSetup(t, h)
	later := epoch.Add(2 * methodLease)
	if rows := b.claim(2, later); len(rows) != 1 || rows[0].PrevLeaseID != 1 {
		t.Fatalf("a claim after lease 1 expired leased %+v, want the delivery, previously leased to 1", rows)
	}
	if got := b.update(1, later); len(got) != 0 {
		t.Fatalf("the update of lost lease 1 answered %+v, want nothing", got)
	}
	if d := b.get(); d.Status != driver.StatusPending || d.LeaseID != 2 || d.LastError != "" || d.Attempts != 0 {
		t.Fatalf("after the update of lost lease 1 the delivery is %s, lease %d, attempts %d, error %q; want it pending under lease 2, untouched",
			d.Status, d.LeaseID, d.Attempts, d.LastError)
	}
	if got := b.update(2, later); !slices.Equal(got, []driver.UpdatedDelivery{{ID: b.delivery, Status: driver.StatusSent}}) {
		t.Fatalf("the holder's update answered %+v, want the delivery sent", got)
	}
	if d := b.get(); d.Status != driver.StatusSent || d.LeaseID != 0 {
		t.Fatalf("after the holder's update the delivery is %s under lease %d, want sent and unleased", d.Status, d.LeaseID)
	}
}

// testUpdateCanceledWhileLeased: a delivery canceled while leased keeps its
// status, last error and finish time under its holder's update, which
// releases its lease and answers it as canceled.
func testUpdateCanceledWhileLeased[TTx any](t *testing.T, h Harness[TTx]) {
	b := methodSetup(t, h)
	b.cancel(epoch.Add(time.Second))
	before := b.get()
	if before.Status != driver.StatusCanceled || before.LeaseID != 1 {
		t.Fatalf("canceled while leased: %s under lease %d, want canceled, still leased to 1", before.Status, before.LeaseID)
	}
	got := b.update(1, epoch.Add(2*time.Second))
	if !slices.Equal(got, []driver.UpdatedDelivery{{ID: b.delivery, Status: driver.StatusCanceled}}) {
		t.Fatalf("the holder's update answered %+v, want the delivery as canceled", got)
	}
	after := b.get()
	if after.Status != driver.StatusCanceled || after.LeaseID != 0 || after.LastError != before.LastError ||
		after.FinishedAt == nil || before.FinishedAt == nil || !after.FinishedAt.Equal(*before.FinishedAt) {
		t.Fatalf("after the holder's update: %s, lease %d, error %q, finished %v; want canceled, unleased, error %q, finished %v",
			after.Status, after.LeaseID, after.LastError, after.FinishedAt, before.LastError, before.FinishedAt)
	}
}

// testMarkLeaseGuard: pairs of a delivery leased to another run are
// neither marked nor answered.
func testMarkLeaseGuard[TTx any](t *testing.T, h Harness[TTx]) {
	b := methodSetup(t, h)
	if got := b.mark(2, epoch, 0); len(got) != 0 {
		t.Fatalf("marking under lease 2 a delivery leased to 1 answered %+v, want nothing", got)
	}
	if d := b.get(); len(d.Devices) != 0 {
		t.Fatalf("marking under the wrong lease wrote ledger rows %+v", d.Devices)
	}
}

// testMarkMinLeaseLeft: a pair is marked only when its delivery's lease
// ends at least MinLeaseLeft after now: a run that could not record the
// answer in time must not start the send.
func testMarkMinLeaseLeft[TTx any](t *testing.T, h Harness[TTx]) {
	b := methodSetup(t, h)
	now := epoch.Add(methodLease / 2) // half the lease left
	if got := b.mark(1, now, methodLease/2+time.Second); len(got) != 0 {
		t.Fatalf("marking with less lease left than MinLeaseLeft answered %+v, want nothing", got)
	}
	if d := b.get(); len(d.Devices) != 0 {
		t.Fatalf("marking with too little lease left wrote ledger rows %+v", d.Devices)
	}
	got := b.mark(1, now, methodLease/2)
	if len(got) != 1 || got[0].State != driver.AttemptSending || got[0].DeliveryID != b.delivery {
		t.Fatalf("marking with exactly MinLeaseLeft left answered %+v, want the pair sending", got)
	}
	if d := b.get(); len(d.Devices) != 1 || d.Devices[0].State != driver.AttemptSending || d.Devices[0].Submissions != 1 {
		t.Fatalf("after the mark the ledger is %+v, want one row sending, one submission", d.Devices)
	}
}

// testMarkCanceledWhileLeased: once its delivery is canceled, its holder
// marks nothing more of it, though the lease is still its own.
func testMarkCanceledWhileLeased[TTx any](t *testing.T, h Harness[TTx]) {
	b := methodSetup(t, h)
	b.cancel(epoch.Add(time.Second))
	if got := b.mark(1, epoch.Add(2*time.Second), 0); len(got) != 0 {
		t.Fatalf("marking a delivery canceled while leased answered %+v, want nothing", got)
	}
	if d := b.get(); len(d.Devices) != 0 {
		t.Fatalf("marking a canceled delivery wrote ledger rows %+v", d.Devices)
	}
}

// testCampaignTryMaxTries: CampaignTry counts at most MaxTries; then it
// skips the campaign for Lease after its last try began, and then
// interrupts it, LastError the abandonment followed by the error it had.
func testCampaignTryMaxTries[TTx any](t *testing.T, h Harness[TTx]) {
	ctx := t.Context()
	ex := h.NewDB(t).Driver(t, 0).Exec()
	now := epoch
	c, err := ex.CampaignInsert(ctx, &driver.Campaign{Name: "c", Status: driver.CampaignSending,
		Content: []byte(`{}`), Audience: driver.AudienceRecipients, CreatedAt: now})
	if err != nil {
		t.Fatalf("CampaignInsert: %v", err)
	}
	const abandoned = "abandoned"
	try := func(at time.Time) *driver.CampaignTryResult {
		t.Helper()
		res, err := ex.CampaignTry(ctx, &driver.CampaignTryParams{Now: &at, MaxTries: 2, Lease: time.Minute, Abandoned: abandoned})
		if err != nil {
			t.Fatalf("CampaignTry at %s: %v", at, err)
		}
		return res
	}
	for i := 1; i <= 2; i++ {
		if res := try(now); !res.Found || res.ID != c.ID || res.Tries != i || res.Interrupted {
			t.Fatalf("try %d: %+v, want campaign %d with %d tries counted", i, res, c.ID, i)
		}
	}
	// The step of the last try failed and said why.
	saved, err := ex.CampaignGet(ctx, c.ID)
	if err != nil {
		t.Fatalf("CampaignGet: %v", err)
	}
	saved.LastError = "step failed"
	if err := ex.CampaignSave(ctx, saved, &now); err != nil {
		t.Fatalf("CampaignSave: %v", err)
	}
	if res := try(now.Add(time.Minute - time.Second)); res.Found {
		t.Fatalf("a try within the lease of the last one: %+v, want none (the last may still be running)", res)
	}
	if res := try(now.Add(time.Minute)); !res.Found || res.ID != c.ID || !res.Interrupted || res.Tries != 2 {
		t.Fatalf("a try a lease after the last one: %+v, want campaign %d interrupted, still 2 tries", res, c.ID)
	}
	got, err := ex.CampaignGet(ctx, c.ID)
	if err != nil {
		t.Fatalf("CampaignGet: %v", err)
	}
	if want := abandoned + "; before it: step failed"; got.Status != driver.CampaignInterrupted || got.Tries != 2 || got.LastError != want {
		t.Fatalf("after the tries ran out: %s, %d tries, error %q; want interrupted, 2 tries, %q", got.Status, got.Tries, got.LastError, want)
	}
	if res := try(now.Add(time.Hour)); res.Found {
		t.Fatalf("a try of an interrupted campaign: %+v, want none", res)
	}
}

// testCampaignPageAddDigest: a page number is taken once: the same page
// again (same digest) writes nothing and says Replayed, another page under
// the number is refused with ErrPageConflict and writes nothing, and
// recipients already in the audience are not added twice.
func testCampaignPageAddDigest[TTx any](t *testing.T, h Harness[TTx]) {
	ctx := t.Context()
	ex := h.NewDB(t).Driver(t, 0).Exec()
	c, err := ex.CampaignInsert(ctx, &driver.Campaign{Name: "c", Status: driver.CampaignDraft,
		Content: []byte(`{}`), Audience: driver.AudienceRecipients})
	if err != nil {
		t.Fatalf("CampaignInsert: %v", err)
	}
	add := func(page int, digest string, recipients ...string) (int, bool, error) {
		return ex.CampaignPageAdd(ctx, &driver.CampaignPageParams{CampaignID: c.ID, Page: page, Digest: []byte(digest), Recipients: recipients})
	}
	if n, replayed, err := add(1, "d1", "a", "b"); n != 2 || replayed || err != nil {
		t.Fatalf("page 1: added %d, replayed %v, %v; want 2 added", n, replayed, err)
	}
	if n, replayed, err := add(1, "d1", "a", "b"); n != 0 || !replayed || err != nil {
		t.Fatalf("page 1 again: added %d, replayed %v, %v; want nothing added, replayed", n, replayed, err)
	}
	if n, replayed, err := add(1, "other", "x", "y"); !errors.Is(err, driver.ErrPageConflict) || n != 0 || replayed {
		t.Fatalf("another page numbered 1: added %d, replayed %v, %v; want ErrPageConflict", n, replayed, err)
	}
	if n, replayed, err := add(2, "d2", "b", "c"); n != 1 || replayed || err != nil {
		t.Fatalf("page 2 (b again, c new): added %d, replayed %v, %v; want 1 added", n, replayed, err)
	}
	got, err := ex.CampaignRecipientsAfter(ctx, c.ID, "", 10)
	if err != nil {
		t.Fatalf("CampaignRecipientsAfter: %v", err)
	}
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("audience %v, want %v (nothing of the refused page)", got, want)
	}
	cg, err := ex.CampaignGet(ctx, c.ID)
	if err != nil {
		t.Fatalf("CampaignGet: %v", err)
	}
	if cg.Recipients != 3 {
		t.Fatalf("campaign counts %d recipients, want 3", cg.Recipients)
	}
}
