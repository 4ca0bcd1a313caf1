package drivertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/pushtest"
)

func testCleanup[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1", "r2")
	b.send([]string{"r1"}, msg("old"), nil)
	b.drain()

	// r2's delivery is claimed by a run that dies (never records).
	b.send([]string{"r2"}, msg("stuck"), nil)
	finish := abandon(t, b, b.client, b.fcm, oncepush.Accepted("late"))
	defer finish()

	st, err := b.client.Cleanup(b.ctx)
	if err != nil || !st.Ran || st.Deliveries != 0 || st.Overdue != 0 {
		t.Fatalf("fresh cleanup: %+v, %v; want it to run and find nothing", st, err)
	}
	lease := b.client.Config().Lease
	b.clock.Advance(lease + 2*time.Minute)
	st, err = b.client.Cleanup(b.ctx)
	if err != nil || st.Overdue != 1 {
		t.Fatalf("cleanup after the lease: %+v, %v; want 1 overdue", st, err)
	}
	if !b.logs.has("overdue") {
		t.Fatalf("overdue work not logged:\n%s", b.logs.all())
	}
	// Recovery: the next run picks the overdue delivery up.
	other := pushtest.NewProvider(oncepush.TransportFCM)
	drain(t, b.newClient(b.db.Driver(t, 0), func(c *oncepush.Config) { c.Providers = []oncepush.Provider{other} }))
	wantStatus(t, b.only("r2"), oncepush.StatusSent)
	if other.Count() != 1 {
		t.Fatalf("overdue delivery recovered with %d submissions, want 1", other.Count())
	}

	b.clock.Advance(oncepush.RetentionDefault + time.Hour)
	st, err = b.client.Cleanup(b.ctx)
	if err != nil || st.Deliveries != 2 || st.Messages != 2 || st.Overdue != 0 {
		t.Fatalf("cleanup past retention: %+v, %v; want both deliveries and messages gone", st, err)
	}
	if ds := b.deliveries("r1"); len(ds) != 0 {
		t.Fatalf("retention left %d deliveries", len(ds))
	}
}

func testCleanupLock[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	other := b.newClient(b.db.Driver(t, 0), nil)
	st, err := b.client.Cleanup(b.ctx)
	if err != nil || !st.Ran {
		t.Fatalf("first cleanup: %+v, %v", st, err)
	}
	if st, err = other.Cleanup(b.ctx); err != nil || st.Ran {
		t.Fatalf("a second process ran cleanup while the first held the lock: %+v, %v", st, err)
	}
	b.clock.Advance(oncepush.CleanupIntervalDefault + time.Second)
	if st, err = other.Cleanup(b.ctx); err != nil || !st.Ran {
		t.Fatalf("cleanup lock not free after its interval: %+v, %v", st, err)
	}
}

// testCleanupOrphans: a message goes with its last delivery — by retention
// or by recipient deletion, in the same transaction — and one left without
// deliveries otherwise (an all-duplicate send interrupted before it deleted
// its message again) is found by the sweep of the next cleanup round.
func testCleanupOrphans[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1", "r2")
	ex := b.drv.Exec()
	gone := func(id int64) bool {
		t.Helper()
		_, err := ex.MessageGet(b.ctx, id)
		if err != nil && !errors.Is(err, driver.ErrNotFound) {
			t.Fatal(err)
		}
		return errors.Is(err, driver.ErrNotFound)
	}
	shared := b.send([]string{"r1", "r2"}, msg("shared"), nil)
	own := b.send([]string{"r1"}, msg("r1 only"), &oncepush.SendOptions{DedupKey: "k"})

	if err := b.client.DeleteRecipient(b.ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if !gone(own.MessageID) {
		t.Fatal("deleting the only recipient of a message kept the message")
	}
	if gone(shared.MessageID) {
		t.Fatal("deleting one recipient deleted a message another still has")
	}

	// The engine's all-duplicate send, stopped between its two statements:
	// the message is written, its one delivery is a duplicate, and it is
	// never deleted again.
	b.register("r1", oncepush.TransportFCM)
	b.send([]string{"r1"}, msg("holds k"), &oncepush.SendOptions{DedupKey: "k"})
	now := b.clock.Now()
	orphan, n, err := ex.MessageInsert(b.ctx, &driver.MessageInsertParams{
		Now: &now, Title: "dup", Ambiguity: string(oncepush.AmbiguityResend), Lifetime: time.Hour,
		Recipients: []string{"r1"}, NotificationIDs: []string{"n"}, DedupKey: "k",
	})
	if err != nil || n != 0 {
		t.Fatalf("MessageInsert = %d, %d, %v; want a message with no delivery", orphan, n, err)
	}
	st, err := b.client.Cleanup(b.ctx)
	if err != nil || st.Messages != 1 || !gone(orphan) {
		t.Fatalf("cleanup: %+v, %v; want the orphan found and deleted", st, err)
	}
	if gone(shared.MessageID) {
		t.Fatal("the sweep deleted a message with deliveries")
	}

	// Past retention the shared message goes with r2's delivery, at once.
	b.drain()
	b.clock.Advance(b.client.Config().Retention + time.Hour)
	if st, err = b.client.Cleanup(b.ctx); err != nil || st.Deliveries != 2 || st.Messages != 2 || !gone(shared.MessageID) {
		t.Fatalf("cleanup past retention: %+v, %v; want both deliveries and their messages deleted", st, err)
	}
}

// testSweepOrphansInBatches: MessageSweepOrphans looks at Limit messages
// after AfterID, deletes those without deliveries, and says where it stopped.
func testSweepOrphansInBatches[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	ex := b.drv.Exec()
	now := b.clock.Now()
	var ids []int64
	for i := range 5 {
		// Messages 0, 2 and 4 lose their only delivery to a duplicate key.
		key := ""
		if i%2 == 0 {
			key = "held"
		}
		id, _, err := ex.MessageInsert(b.ctx, &driver.MessageInsertParams{
			Now: &now, Title: "m", Ambiguity: string(oncepush.AmbiguityResend), Lifetime: time.Hour,
			Recipients: []string{"r1"}, NotificationIDs: []string{fmt.Sprint(i)}, DedupKey: key,
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	// Message 0's delivery holds the key; 2 and 4 are orphans.
	var deleted int
	after := int64(0)
	var lasts []int64
	for {
		n, last, err := ex.MessageSweepOrphans(b.ctx, &driver.SweepParams{AfterID: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		deleted += n
		if last == 0 {
			break
		}
		lasts = append(lasts, last)
		after = last
	}
	if want := []int64{ids[1], ids[3], ids[4]}; !slices.Equal(lasts, want) || deleted != 2 {
		t.Fatalf("sweep stopped at %v and deleted %d; want %v and 2 (messages %v)", lasts, deleted, want, ids)
	}
	for i, id := range ids {
		_, err := ex.MessageGet(b.ctx, id)
		if orphan := i == 2 || i == 4; orphan != errors.Is(err, driver.ErrNotFound) {
			t.Errorf("message %d (orphan: %v): %v", i, orphan, err)
		}
	}
}

// testRevocationOutlivesRetention: a revoked session stays revoked. Cleanup
// used to forget revocations after retention; a registration racing the
// revocation (or an old app instance registering again with its stale
// session) then started receiving pushes.
func testRevocationOutlivesRetention[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	if err := b.client.RevokeSession(b.ctx, "sess-old"); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(b.client.Config().Retention + 24*time.Hour)
	if _, err := b.client.Cleanup(b.ctx); err != nil {
		t.Fatal(err)
	}
	_, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "r1", Transport: oncepush.TransportFCM, Token: tokenFor(oncepush.TransportFCM, "r1"), Session: "sess-old"})
	if !errors.Is(err, oncepush.ErrSessionRevoked) {
		t.Fatalf("registering under a session revoked long ago: %v, want ErrSessionRevoked", err)
	}
}
