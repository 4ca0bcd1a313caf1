package drivertest

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
)

func testSendTxRollback[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1")

	tx, err := b.db.Begin(b.ctx, b.drv)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.client.SendTx(b.ctx, tx, []string{"r1"}, msg("rolled back"), &oncepush.SendOptions{DedupKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Queued != 1 {
		t.Fatalf("SendTx queued %d, want 1 inside the transaction", res.Queued)
	}
	if err := b.db.Rollback(b.ctx, tx); err != nil {
		t.Fatal(err)
	}
	b.drain()
	wantSends(t, b.fcm, 0, "a rolled-back send")
	if ds := b.deliveries("r1"); len(ds) != 0 {
		t.Fatalf("a rolled-back send left %d deliveries", len(ds))
	}

	// The same key is free: the rollback took the dedup row with it.
	tx, err = b.db.Begin(b.ctx, b.drv)
	if err != nil {
		t.Fatal(err)
	}
	if res, err = b.client.SendTx(b.ctx, tx, []string{"r1"}, msg("committed"), &oncepush.SendOptions{DedupKey: "k1"}); err != nil || res.Queued != 1 {
		t.Fatalf("SendTx after rollback: %+v, %v", res, err)
	}
	if err := b.db.Commit(b.ctx, tx); err != nil {
		t.Fatal(err)
	}
	b.drain()
	subs := b.fcm.Submissions()
	if len(subs) != 1 || subs[0].Title != "committed" {
		t.Fatalf("submissions = %+v, want the committed one only", subs)
	}
}

func testDedupSequential[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1", "r2")
	opts := &oncepush.SendOptions{DedupKey: "invoice:42"}

	first := b.send([]string{"r1", "r2", "r1"}, msg("first"), opts)
	if first.Queued != 2 || first.Duplicates != 1 || first.MessageID == 0 {
		t.Fatalf("first send = %+v, want 2 queued, 1 duplicate (r1 listed twice)", first)
	}
	second := b.send([]string{"r1", "r2"}, msg("second"), opts)
	if second.Queued != 0 || second.Duplicates != 2 || second.MessageID != 0 {
		t.Fatalf("second send = %+v, want nothing queued and no message kept", second)
	}
	// The key holds per recipient: r3 is new.
	b.register("r3", oncepush.TransportFCM)
	if third := b.send([]string{"r2", "r3"}, msg("third"), opts); third.Queued != 1 || third.Duplicates != 1 {
		t.Fatalf("third send = %+v, want r3 queued and r2 a duplicate", third)
	}
	b.drain()
	wantSends(t, b.fcm, 3, "one per recipient")
	for _, r := range []string{"r1", "r2", "r3"} {
		wantStatus(t, b.only(r), oncepush.StatusSent)
	}
	// Sending again after it was sent is still a duplicate (within retention).
	if again := b.send([]string{"r1"}, msg("again"), opts); again.Queued != 0 {
		t.Fatalf("send after delivery = %+v, want a duplicate", again)
	}
	// The notification id derives from the key, identically for every send.
	d := b.only("r1")
	if want := oncepush.NotificationID("test", "r1", map[string]any{"dedupKey": "invoice:42"}); d.NotificationID != want {
		t.Fatalf("notification id %s, want %s", d.NotificationID, want)
	}
}

func testDedupConcurrent[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1")
	const n = 20
	var wg sync.WaitGroup
	results := make([]oncepush.SendResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], errs[i] = b.client.Send(b.ctx, []string{"r1"}, msg("race"), &oncepush.SendOptions{DedupKey: "same-event"})
		})
	}
	close(start)
	wg.Wait()
	queued := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("send %d: %v", i, errs[i])
		}
		queued += results[i].Queued
	}
	if queued != 1 {
		t.Fatalf("%d concurrent sends with one key queued %d deliveries, want 1", n, queued)
	}
	b.drain()
	if c := b.fcm.Count(); c != 1 {
		t.Fatalf("provider got %d submissions, want 1", c)
	}
}

func testDedupFreedByRetention[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.Retention = 48 * time.Hour }, "r1")
	opts := &oncepush.SendOptions{DedupKey: "daily-digest"}
	b.send([]string{"r1"}, msg("one"), opts)
	b.drain()

	b.clock.Advance(47 * time.Hour)
	if st, err := b.client.Cleanup(b.ctx); err != nil || st.Deliveries != 0 {
		t.Fatalf("cleanup within retention: %+v, %v; want nothing deleted", st, err)
	}
	if res := b.send([]string{"r1"}, msg("two"), opts); res.Queued != 0 {
		t.Fatalf("key reused within retention: %+v", res)
	}

	b.clock.Advance(2 * time.Hour)
	st, err := b.client.Cleanup(b.ctx)
	if err != nil || st.Deliveries != 1 || st.Messages != 1 {
		t.Fatalf("cleanup past retention: %+v, %v; want 1 delivery and its message deleted", st, err)
	}
	if res := b.send([]string{"r1"}, msg("three"), opts); res.Queued != 1 {
		t.Fatalf("key not free after retention cleanup: %+v", res)
	}
	b.drain()
	wantSends(t, b.fcm, 2, "the first send and the one after retention freed its key")
}

func testValidation[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) {
		c.Categories = map[string]oncepush.Category{"news": {}}
	})
	b.register("r1", oncepush.TransportFCM)
	ok := msg("fine")
	big := map[string]any{"blob": strings.Repeat("x", 5000)}
	cases := []struct {
		name       string
		recipients []string
		msg        oncepush.Message
		opts       *oncepush.SendOptions
		field      string
	}{
		{"no recipients", nil, ok, nil, "recipients"},
		{"empty recipient", []string{"r1", ""}, ok, nil, "recipients[1]"},
		{"long recipient", []string{strings.Repeat("r", 201)}, ok, nil, "recipients[0]"},
		{"too many recipients", make([]string, oncepush.MaxRecipients+1), ok, nil, "recipients"},
		{"no title or body", []string{"r1"}, oncepush.Message{Title: " "}, nil, "title"},
		{"data too large", []string{"r1"}, oncepush.Message{Title: "t", Data: big}, nil, "data"},
		{"reserved data key", []string{"r1"}, oncepush.Message{Title: "t", Data: map[string]any{"oncepush_id": "x"}}, nil, "data"},
		// Names a provider refuses (FCM: any case, gcm…; APNs: aps) or writes
		// itself (oncepush_link): accepted, they failed at every device.
		{"FCM-reserved data key, capitalised", []string{"r1"}, oncepush.Message{Title: "t", Data: map[string]any{"From": "x"}}, nil, "data"},
		{"FCM-reserved data key, gcm…", []string{"r1"}, oncepush.Message{Title: "t", Data: map[string]any{"gcm.notification.title": "x"}}, nil, "data"},
		{"APNs-reserved data key", []string{"r1"}, oncepush.Message{Title: "t", Data: map[string]any{"aps": map[string]any{}}}, nil, "data"},
		{"data key a provider writes", []string{"r1"}, oncepush.Message{Title: "t", Data: map[string]any{"oncepush_link": "https://evil.example/"}}, nil, "data"},
		{"unencodable data", []string{"r1"}, oncepush.Message{Title: "t", Data: map[string]any{"f": func() {}}}, nil, "data"},
		{"relative link", []string{"r1"}, oncepush.Message{Title: "t", Link: "orders/1"}, nil, "link"},
		{"absolute URL link", []string{"r1"}, oncepush.Message{Title: "t", Link: "https://evil.example/x"}, nil, "link"},
		{"scheme-relative link", []string{"r1"}, oncepush.Message{Title: "t", Link: "//evil.example/x"}, nil, "link"},
		{"ftp image", []string{"r1"}, oncepush.Message{Title: "t", Image: "ftp://x/y.png"}, nil, "image"},
		{"payload too large", []string{"r1"}, oncepush.Message{Title: strings.Repeat("t", 3000), Body: strings.Repeat("b", 2000)}, nil, "title"},
		{"unknown category", []string{"r1"}, ok, &oncepush.SendOptions{Category: "spam"}, "category"},
		{"negative lifetime", []string{"r1"}, ok, &oncepush.SendOptions{Lifetime: -time.Second}, "lifetime"},
		{"lifetime too long", []string{"r1"}, ok, &oncepush.SendOptions{Lifetime: 30 * 24 * time.Hour}, "lifetime"},
		{"bad policy", []string{"r1"}, ok, &oncepush.SendOptions{Ambiguity: "twice"}, "ambiguity"},
		{"long dedup key", []string{"r1"}, ok, &oncepush.SendOptions{DedupKey: strings.Repeat("k", 201)}, "dedupKey"},
	}
	for _, tc := range cases {
		_, err := b.client.Send(b.ctx, tc.recipients, tc.msg, tc.opts)
		var ve *oncepush.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: err = %v, want a ValidationError", tc.name, err)
			continue
		}
		if ve.Field != tc.field {
			t.Errorf("%s: field %q, want %q (%v)", tc.name, ve.Field, tc.field, err)
		}
	}
	if ds := b.deliveries("r1"); len(ds) != 0 {
		t.Fatalf("refused sends left %d deliveries", len(ds))
	}
	// A declared category passes.
	if res := b.send([]string{"r1"}, ok, &oncepush.SendOptions{Category: "news"}); res.Queued != 1 {
		t.Fatalf("declared category: %+v", res)
	}
}

func testHTTPImageDropped[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1")
	m := msg("with image")
	m.Image = "http://storage.local/pic.png"
	if res := b.send([]string{"r1"}, m, nil); res.Queued != 1 {
		t.Fatalf("an http image failed the send: %+v", res)
	}
	if !b.logs.has("WARN", "image dropped", "http://storage.local/pic.png") {
		t.Fatalf("no warning naming the dropped image; logs:\n%s", b.logs.all())
	}
	m.Image = "https://cdn.example/pic.png"
	b.send([]string{"r1"}, m, nil)
	b.drain()
	images := map[string]bool{}
	for _, s := range b.fcm.Submissions() {
		images[s.Image] = true
	}
	if !images[""] || !images["https://cdn.example/pic.png"] || len(images) != 2 {
		t.Fatalf("images sent = %v, want the http one dropped and the https one kept", images)
	}
}

func testScheduled[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1")
	at := epoch.Add(time.Hour)
	b.send([]string{"r1"}, msg("later"), &oncepush.SendOptions{ScheduledAt: at})
	b.drain()
	wantSends(t, b.fcm, 0, "a scheduled push before its time")
	b.drainAfter(59 * time.Minute)
	wantSends(t, b.fcm, 0, "a scheduled push a minute early")
	b.drainAfter(time.Minute)
	wantSends(t, b.fcm, 1, "a scheduled push at its time")
	sub := b.fcm.Submissions()[0]
	if want := at.Add(oncepush.MessageLifetimeDefault); !sub.ExpiresAt.Equal(want) {
		t.Fatalf("expires at %s, want scheduled time + lifetime = %s", sub.ExpiresAt, want)
	}
}
