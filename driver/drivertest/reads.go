package drivertest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
)

// testMessageReads: what the server and a console read about a message, in
// the driver and through the Client.
func testMessageReads[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1")

	// The backlog: due pending deliveries on the client's clock, capped.
	if bl, err := b.client.Backlog(b.ctx, 10); err != nil || bl.Due != 0 || bl.OldestAge != 0 {
		t.Fatalf("Backlog with nothing due = %+v, %v", bl, err)
	}
	b.register("r2", oncepush.TransportFCM)
	b.send([]string{"r1", "r2"}, msg("due"), nil)
	b.clock.Advance(30 * time.Second)
	b.send([]string{"r2"}, msg("due later"), nil)
	if bl, err := b.client.Backlog(b.ctx, 10); err != nil || bl.Due != 3 || bl.OldestAge != 30*time.Second {
		t.Fatalf("Backlog = %+v, %v; want 3 due, the oldest for 30s", bl, err)
	}
	if bl, err := b.client.Backlog(b.ctx, 2); err != nil || bl.Due != 2 {
		t.Fatalf("Backlog capped at 2 = %+v, %v", bl, err)
	}
	if _, err := b.client.Backlog(b.ctx, 0); err == nil {
		t.Fatal("Backlog accepted a limit of 0")
	}
	b.drain()
	if bl, err := b.client.Backlog(b.ctx, 10); err != nil || bl.Due != 0 {
		t.Fatalf("Backlog once drained = %+v, %v", bl, err)
	}

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

	// The same through the Client, which is how the server and a console read.
	sm, err := b.client.Message(b.ctx, res.MessageID)
	if err != nil || sm.ID != res.MessageID || sm.Title != "hello" || sm.Category != "news" || sm.Link != "/x" ||
		sm.Ambiguity != oncepush.AmbiguityResend || !sm.ExpiresAt.After(sm.ScheduledAt) || string(sm.Data) == "" {
		t.Fatalf("Client.Message = %+v, %v", sm, err)
	}
	var data map[string]any
	if err := json.Unmarshal(sm.Data, &data); err != nil || data["k"] != "v" {
		t.Fatalf("Client.Message data %s: %v", sm.Data, err)
	}
	if _, err := b.client.Message(b.ctx, res.MessageID+1000); !errors.Is(err, oncepush.ErrNotFound) {
		t.Fatalf("Client.Message of an unknown message: %v, want ErrNotFound", err)
	}
	if n, err := b.client.AmbiguousAttempts(b.ctx, res.MessageID); err != nil || n != 1 {
		t.Fatalf("Client.AmbiguousAttempts = %d, %v; want 1", n, err)
	}
}
