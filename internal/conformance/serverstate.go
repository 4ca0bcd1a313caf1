package conformance

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
)

// The server's state (migration 2): API keys, preferences, idempotency records.

func testAPIKeys[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	ex := b.drv.Exec()
	k := &driver.APIKey{ID: "k1abcdef", Name: "backend", Hash: bytes.Repeat([]byte{1}, 32), Scopes: []string{"send", "read"}}
	if err := ex.APIKeyInsert(b.ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := ex.APIKeyInsert(b.ctx, &driver.APIKey{ID: "k2", Name: "dup", Hash: k.Hash, Scopes: []string{"send"}}); err == nil {
		t.Fatal("a second key with the same hash was stored")
	}
	got, err := ex.APIKeyGetByHash(b.ctx, k.Hash)
	if err != nil || got.ID != k.ID || got.Name != "backend" || !slices.Equal(got.Scopes, []string{"send", "read"}) || got.RevokedAt != nil {
		t.Fatalf("APIKeyGetByHash = %+v, %v", got, err)
	}
	if _, err := ex.APIKeyGetByHash(b.ctx, []byte("nope")); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("unknown hash: %v", err)
	}
	now := b.clock.Now()
	if ok, err := ex.APIKeyRevoke(b.ctx, k.ID, &now); err != nil || !ok {
		t.Fatalf("revoke: %v, %v", ok, err)
	}
	if ok, err := ex.APIKeyRevoke(b.ctx, k.ID, &now); err != nil || ok {
		t.Fatalf("revoking twice: %v, %v; want false", ok, err)
	}
	got, err = ex.APIKeyGetByHash(b.ctx, k.Hash)
	if err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(now) {
		t.Fatalf("revoked key: %+v, %v", got, err)
	}
	if err := ex.APIKeyInsert(b.ctx, &driver.APIKey{ID: "k2", Name: "other", Hash: bytes.Repeat([]byte{2}, 32), Scopes: []string{"admin"}}); err != nil {
		t.Fatal(err)
	}
	list, err := ex.APIKeyList(b.ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("APIKeyList = %+v, %v", list, err)
	}
}

func testPreferences[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	ex := b.drv.Exec()
	if _, err := ex.PreferenceGet(b.ctx, "r1"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("no preferences yet: %v", err)
	}
	p := &driver.Preference{Recipient: "r1", OptOut: []string{"news", "promo"}, QuietStart: "22:00", QuietEnd: "07:00", TimeZone: "Europe/Zurich"}
	if err := ex.PreferencePut(b.ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	if err := ex.PreferencePut(b.ctx, &driver.Preference{Recipient: "r2"}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := ex.PreferenceGet(b.ctx, "r1")
	if err != nil || !slices.Equal(got.OptOut, p.OptOut) || got.QuietStart != "22:00" || got.QuietEnd != "07:00" || got.TimeZone != "Europe/Zurich" {
		t.Fatalf("PreferenceGet = %+v, %v", got, err)
	}
	// Put replaces.
	if err := ex.PreferencePut(b.ctx, &driver.Preference{Recipient: "r1", OptOut: []string{"news"}}, nil); err != nil {
		t.Fatal(err)
	}
	many, err := ex.PreferenceGetMany(b.ctx, []string{"r1", "r2", "r3"})
	if err != nil || len(many) != 2 {
		t.Fatalf("PreferenceGetMany = %+v, %v", many, err)
	}
	for _, m := range many {
		if m.Recipient == "r1" && (!slices.Equal(m.OptOut, []string{"news"}) || m.QuietStart != "") {
			t.Fatalf("replaced preferences: %+v", m)
		}
		if m.Recipient == "r2" && len(m.OptOut) != 0 {
			t.Fatalf("empty preferences: %+v", m)
		}
	}
	if err := b.client.DeleteRecipient(b.ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.PreferenceGet(b.ctx, "r1"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("deleting a recipient kept its preferences: %v", err)
	}
}

func testIdempotencyRecords[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	ex := b.drv.Exec()
	hash := bytes.Repeat([]byte{7}, 32)
	now := b.clock.Now()
	if ok, err := ex.IdempotencyClaim(b.ctx, "key-1", hash, &now); err != nil || !ok {
		t.Fatalf("first claim: %v, %v", ok, err)
	}
	if ok, err := ex.IdempotencyClaim(b.ctx, "key-1", []byte("other"), &now); err != nil || ok {
		t.Fatalf("second claim: %v, %v; want false", ok, err)
	}
	rec, err := ex.IdempotencyGet(b.ctx, "key-1")
	if err != nil || !bytes.Equal(rec.RequestHash, hash) || rec.Response != nil {
		t.Fatalf("record before finish: %+v, %v", rec, err)
	}
	if err := ex.IdempotencyFinish(b.ctx, "key-1", []byte(`{"id":1}`)); err != nil {
		t.Fatal(err)
	}
	if rec, err = ex.IdempotencyGet(b.ctx, "key-1"); err != nil || string(rec.Response) != `{"id":1}` {
		t.Fatalf("record after finish: %+v, %v", rec, err)
	}
	if _, err := ex.IdempotencyGet(b.ctx, "key-2"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("unknown key: %v", err)
	}

	// A claim racing an uncommitted one waits for it, then sees it.
	first := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	var firstErr error
	wg.Go(func() {
		firstErr = b.drv.InTx(b.ctx, func(ctx context.Context, _ TTx, ex driver.Executor) error {
			if ok, err := ex.IdempotencyClaim(ctx, "key-race", hash, &now); err != nil || !ok {
				return errors.Join(err, errors.New("first claim failed"))
			}
			close(first)
			<-release
			return ex.IdempotencyFinish(ctx, "key-race", []byte("first"))
		})
	})
	<-first
	secondDone := make(chan bool, 1)
	var secondErr error
	go func() {
		var won bool
		secondErr = b.drv.InTx(b.ctx, func(ctx context.Context, _ TTx, ex driver.Executor) error {
			var err error
			won, err = ex.IdempotencyClaim(ctx, "key-race", hash, &now)
			return err
		})
		secondDone <- won
	}()
	select {
	case <-secondDone:
		t.Fatal("a second claim finished while the first was uncommitted")
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	wg.Wait()
	if won := <-secondDone; won || secondErr != nil || firstErr != nil {
		t.Fatalf("second claim: won %v, err %v (first: %v); want it to lose", won, secondErr, firstErr)
	}
	if rec, err := ex.IdempotencyGet(b.ctx, "key-race"); err != nil || string(rec.Response) != "first" {
		t.Fatalf("raced record: %+v, %v", rec, err)
	}

	b.clock.Advance(b.client.Config().Retention + time.Hour)
	st, err := b.client.Cleanup(b.ctx)
	if err != nil || st.Idempotency != 2 {
		t.Fatalf("cleanup: %+v, %v; want both records past retention deleted", st, err)
	}
}

func testMessageReads[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	b.register("r1", oncepush.TransportFCM)
	res := b.send([]string{"r1"}, oncepush.Message{Type: "t", Title: "hello", Body: "b", Link: "/x", Data: map[string]any{"k": "v"}},
		&oncepush.SendOptions{Category: "news"})
	b.fcm.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeMaybeSent, Text: "lost"})
	b.drain()
	ex := b.drv.Exec()
	m, err := ex.MessageGet(b.ctx, res.MessageID)
	if err != nil || m.Title != "hello" || m.Category != "news" || m.Link != "/x" || string(m.Data) == "" {
		t.Fatalf("MessageGet = %+v, %v", m, err)
	}
	if _, err := ex.MessageGet(b.ctx, res.MessageID+1000); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("unknown message: %v", err)
	}
	if n, err := ex.DeviceAttemptAmbiguousCount(b.ctx, res.MessageID); err != nil || n != 1 {
		t.Fatalf("ambiguous count = %d, %v; want 1", n, err)
	}
}
