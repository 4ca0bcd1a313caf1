package drivertest

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
)

// Recorded requests (SendOptions.RequestHash): the engine's, since the send's
// own statement writes them and cleanup frees them with their key.

// testRecordedRequests: SendOptions.RequestHash — the first send with a key
// is recorded with its result; the same request again is replayed without
// writing; another request with the key is refused.
func testRecordedRequests[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1", "r2")
	h1, h2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	opts := func(key string, hash []byte) *oncepush.SendOptions {
		return &oncepush.SendOptions{DedupKey: key, RequestHash: hash}
	}
	first := b.send([]string{"r1", "r2", "r2"}, msg("first"), opts("k1", h1))
	if first.Replayed || first.Queued != 2 || first.Duplicates != 1 || first.MessageID == 0 {
		t.Fatalf("first: %+v", first)
	}
	again := b.send([]string{"r1", "r2", "r2"}, msg("first"), opts("k1", h1))
	if !again.Replayed || again.MessageID != first.MessageID || again.Queued != 2 || again.Duplicates != 1 {
		t.Fatalf("replay: %+v, want the first result replayed", again)
	}
	if _, err := b.client.Send(b.ctx, []string{"r1"}, msg("other"), opts("k1", h2)); !errors.Is(err, oncepush.ErrDedupConflict) {
		t.Fatalf("another request with the key: %v, want ErrDedupConflict", err)
	}
	if _, err := b.client.Send(b.ctx, []string{"r1"}, msg("x"), &oncepush.SendOptions{RequestHash: h1}); err == nil {
		t.Fatal("a recorded request without a dedup key was accepted")
	}
	for _, r := range []string{"r1", "r2"} {
		if ds := b.deliveries(r); len(ds) != 1 {
			t.Fatalf("%s has %d deliveries, want 1", r, len(ds))
		}
	}

	// 20 at once: one is recorded, 19 replay it.
	var wg sync.WaitGroup
	results := make([]oncepush.SendResult, 20)
	errs := make([]error, 20)
	for i := range 20 {
		wg.Go(func() { results[i], errs[i] = b.client.Send(b.ctx, []string{"r1"}, msg("race"), opts("k2", h1)) })
	}
	wg.Wait()
	recorded := 0
	for i := range 20 {
		if errs[i] != nil {
			t.Fatalf("concurrent send %d: %v", i, errs[i])
		}
		if !results[i].Replayed {
			recorded++
		}
		if results[i].MessageID != results[0].MessageID {
			t.Fatalf("concurrent sends answered different messages: %+v vs %+v", results[i], results[0])
		}
	}
	if recorded != 1 || len(b.deliveries("r1")) != 2 {
		t.Fatalf("%d sends recorded, r1 has %d deliveries; want 1 and 2", recorded, len(b.deliveries("r1")))
	}

	// Inside the caller's transaction a replay leaves the transaction usable.
	tx, err := b.db.Begin(b.ctx, b.drv)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.client.SendTx(b.ctx, tx, []string{"r1", "r2", "r2"}, msg("first"), opts("k1", h1))
	if err != nil || !res.Replayed {
		t.Fatalf("SendTx replay: %+v, %v", res, err)
	}
	if _, err := b.client.SendTx(b.ctx, tx, []string{"r1"}, msg("other"), opts("k1", h2)); !errors.Is(err, oncepush.ErrDedupConflict) {
		t.Fatalf("SendTx conflict: %v", err)
	}
	if _, err := b.client.SendTx(b.ctx, tx, []string{"r2"}, msg("after"), opts("k3", h1)); err != nil {
		t.Fatalf("the transaction was poisoned by a replay: %v", err)
	}
	if err := b.db.Commit(b.ctx, tx); err != nil {
		t.Fatal(err)
	}
	if ds := b.deliveries("r2"); len(ds) != 2 {
		t.Fatalf("r2 has %d deliveries after the transaction, want 2", len(ds))
	}

	// A different request racing an uncommitted first one waits for it and is refused.
	tx, err = b.db.Begin(b.ctx, b.drv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.SendTx(b.ctx, tx, []string{"r1"}, msg("slow"), opts("k4", h1)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.client.Send(b.ctx, []string{"r2"}, msg("racer"), opts("k4", h2))
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("a racing send finished while the first was uncommitted: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := b.db.Commit(b.ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, oncepush.ErrDedupConflict) {
		t.Fatalf("racing send: %v, want ErrDedupConflict", err)
	}

	b.drain() // keys hold while their deliveries are pending
	b.clock.Advance(b.client.Config().Retention + time.Hour)
	st, err := b.client.Cleanup(b.ctx)
	if err != nil || st.Idempotency != 4 {
		t.Fatalf("cleanup: %+v, %v; want the 4 records past retention deleted", st, err)
	}
	if again := b.send([]string{"r1"}, msg("fresh"), opts("k1", h2)); again.Replayed || again.Queued != 1 {
		t.Fatalf("key not free after retention: %+v", again)
	}
}

// testRecordLivesWithItsKey: a recorded request's record lives exactly as
// long as the dedup key it guards. A send scheduled past the retention period
// keeps its key (and so its record) while it waits: cleanup after 7 days must
// not let another request take the key, nor refuse the original's retry. The
// record goes with the last delivery holding the key, and then both are free.
func testRecordLivesWithItsKey[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1")
	retention := b.client.Config().Retention
	h1, h2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	at := epoch.Add(8 * 24 * time.Hour)
	opts := func(hash []byte) *oncepush.SendOptions {
		return &oncepush.SendOptions{DedupKey: "weekly:2026-02", RequestHash: hash, ScheduledAt: at}
	}
	first := b.send([]string{"r1"}, msg("weekly"), opts(h1))
	if first.Queued != 1 {
		t.Fatalf("first: %+v", first)
	}
	// Older than retention, still pending: the key holds, so its record does.
	b.clock.Advance(retention + time.Hour)
	if st, err := b.client.Cleanup(b.ctx); err != nil || st.Idempotency != 0 {
		t.Fatalf("cleanup while the delivery is pending: %+v, %v; want no record deleted", st, err)
	}
	if res, err := b.client.Send(b.ctx, []string{"r1"}, msg("other"), opts(h2)); !errors.Is(err, oncepush.ErrDedupConflict) {
		t.Fatalf("another request with a held key after cleanup: %+v, %v; want ErrDedupConflict", res, err)
	}
	if res := b.send([]string{"r1"}, msg("weekly"), opts(h1)); !res.Replayed || res.MessageID != first.MessageID {
		t.Fatalf("the original's retry after cleanup: %+v, want the first answer replayed", res)
	}

	// Sent at its time; the key then holds for the retention period.
	b.clock.Set(at)
	b.drain()
	wantStatus(t, b.only("r1"), oncepush.StatusSent)
	b.clock.Advance(retention - time.Hour)
	if st, err := b.client.Cleanup(b.ctx); err != nil || st.Deliveries != 0 || st.Idempotency != 0 {
		t.Fatalf("cleanup within retention of the send: %+v, %v; want nothing deleted", st, err)
	}
	if _, err := b.client.Send(b.ctx, []string{"r1"}, msg("other"), opts(h2)); !errors.Is(err, oncepush.ErrDedupConflict) {
		t.Fatalf("another request within retention of the send: %v; want ErrDedupConflict", err)
	}

	// Past retention, the delivery, its message and the record go together.
	b.clock.Advance(2 * time.Hour)
	st, err := b.client.Cleanup(b.ctx)
	if err != nil || st.Deliveries != 1 || st.Messages != 1 || st.Idempotency != 1 {
		t.Fatalf("cleanup past retention: %+v, %v; want the delivery, its message and its record deleted", st, err)
	}
	res, err := b.client.Send(b.ctx, []string{"r1"}, msg("other"), &oncepush.SendOptions{DedupKey: "weekly:2026-02", RequestHash: h2})
	if err != nil || res.Replayed || res.Queued != 1 {
		t.Fatalf("another request once the key is free: %+v, %v; want it queued", res, err)
	}
}

// testRecordFreedWithRecipients: deleting recipients frees their dedup keys,
// and a record goes when no delivery holds its key any more — not before.
func testRecordFreedWithRecipients[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1", "r2")
	h1, h2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	opts := func(hash []byte) *oncepush.SendOptions {
		return &oncepush.SendOptions{DedupKey: "welcome", RequestHash: hash}
	}
	first := b.send([]string{"r1", "r2"}, msg("welcome"), opts(h1))
	if err := b.client.DeleteRecipient(b.ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	// r2's delivery still holds the key.
	if _, err := b.client.Send(b.ctx, []string{"r2"}, msg("other"), opts(h2)); !errors.Is(err, oncepush.ErrDedupConflict) {
		t.Fatalf("another request while r2 holds the key: %v; want ErrDedupConflict", err)
	}
	if res := b.send([]string{"r1", "r2"}, msg("welcome"), opts(h1)); !res.Replayed || res.MessageID != first.MessageID {
		t.Fatalf("the original's retry: %+v, want a replay", res)
	}
	if err := b.client.DeleteRecipient(b.ctx, "r2"); err != nil {
		t.Fatal(err)
	}
	ex := b.drv.Exec()
	if rec, err := ex.IdempotencyGet(b.ctx, "welcome"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("the record outlived every delivery with its key: %+v, %v", rec, err)
	}
	b.register("r2", oncepush.TransportFCM)
	if res, err := b.client.Send(b.ctx, []string{"r2"}, msg("other"), opts(h2)); err != nil || res.Replayed || res.Queued != 1 {
		t.Fatalf("another request once the key is free: %+v, %v; want it queued", res, err)
	}
}
