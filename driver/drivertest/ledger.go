package drivertest

import (
	"encoding/json"
	"errors"
	"slices"
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

// testMessageList: Client.Messages lists messages newest first, each filter
// selecting exactly its messages, and a walk page by page — across messages
// created in the same instant — returns each once, in order.
func testMessageList[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1", "r2")
	at := func(i int) time.Time { return epoch.Add(time.Duration(i) * time.Minute) }
	send := func(i int, title, category, key string, opts *oncepush.SendOptions) int64 {
		b.clock.Set(at(i))
		if opts == nil {
			opts = &oncepush.SendOptions{}
		}
		opts.Category, opts.DedupKey = category, key
		return b.send([]string{"r1"}, msg(title), opts).MessageID
	}
	m1 := send(1, "pending news", "news", "", &oncepush.SendOptions{ScheduledAt: at(100)})
	m2 := send(2, "billing", "billing", "", nil)
	m3 := send(3, "news with a key", "news", "k3", nil)
	m4 := send(4, "later news", "news", "", &oncepush.SendOptions{ScheduledAt: at(100)})
	m5 := send(4, "same instant", "", "", &oncepush.SendOptions{ScheduledAt: at(100)}) // created with m4
	b.clock.Set(at(5))
	b.drain() // m2 and m3 are sent; the others wait for at(100)

	list := func(q oncepush.MessageQuery) []int64 {
		t.Helper()
		q.Limit = 100
		page, err := b.client.Messages(b.ctx, q)
		if err != nil {
			t.Fatalf("Messages(%+v): %v", q, err)
		}
		if page.Next != "" {
			t.Fatalf("Messages(%+v): a next page after all of them", q)
		}
		var ids []int64
		for _, m := range page.Messages {
			ids = append(ids, m.ID)
		}
		return ids
	}
	for name, tc := range map[string]struct {
		q    oncepush.MessageQuery
		want []int64
	}{
		"all":             {oncepush.MessageQuery{}, []int64{m5, m4, m3, m2, m1}},
		"category":        {oncepush.MessageQuery{Category: "news"}, []int64{m4, m3, m1}},
		"pending":         {oncepush.MessageQuery{Status: oncepush.MessagePending}, []int64{m5, m4, m1}},
		"done":            {oncepush.MessageQuery{Status: oncepush.MessageDone}, []int64{m3, m2}},
		"pending news":    {oncepush.MessageQuery{Status: oncepush.MessagePending, Category: "news"}, []int64{m4, m1}},
		"dedup key":       {oncepush.MessageQuery{DedupKey: "k3"}, []int64{m3}},
		"key, other cat.": {oncepush.MessageQuery{DedupKey: "k3", Category: "billing"}, nil},
		"unknown key":     {oncepush.MessageQuery{DedupKey: "nobody"}, nil},
		"key, done":       {oncepush.MessageQuery{DedupKey: "k3", Status: oncepush.MessageDone}, []int64{m3}},
		"key, pending":    {oncepush.MessageQuery{DedupKey: "k3", Status: oncepush.MessagePending}, nil},
		"sent":            {oncepush.MessageQuery{Status: oncepush.MessageStatus(oncepush.StatusSent)}, []int64{m3, m2}},
		"sent news":       {oncepush.MessageQuery{Status: oncepush.MessageStatus(oncepush.StatusSent), Category: "news"}, []int64{m3}},
		"failed":          {oncepush.MessageQuery{Status: oncepush.MessageStatus(oncepush.StatusFailed)}, nil},
		"key, sent":       {oncepush.MessageQuery{DedupKey: "k3", Status: oncepush.MessageStatus(oncepush.StatusSent)}, []int64{m3}},
		"key, created":    {oncepush.MessageQuery{DedupKey: "k3", CreatedFrom: at(4)}, nil},
		"created range":   {oncepush.MessageQuery{CreatedFrom: at(2), CreatedTo: at(4)}, []int64{m3, m2}},
		"from":            {oncepush.MessageQuery{CreatedFrom: at(4)}, []int64{m5, m4}},
	} {
		if got := list(tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}

	// Page by page, one at a time: every message once, newest first; m4
	// and m5 share their creation instant, so the cursor must order by id.
	var walked []int64
	q := oncepush.MessageQuery{Limit: 1}
	for range 10 {
		page, err := b.client.Messages(b.ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			walked = append(walked, m.ID)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	if want := []int64{m5, m4, m3, m2, m1}; !slices.Equal(walked, want) {
		t.Errorf("walked %v, want %v", walked, want)
	}

	for _, bad := range []oncepush.MessageQuery{{Limit: 0}, {Limit: 10, Cursor: "not-a-cursor"}, {Limit: 10, Status: "delivered"}} {
		var ve *oncepush.ValidationError
		if _, err := b.client.Messages(b.ctx, bad); !errors.As(err, &ve) {
			t.Errorf("Messages(%+v): %v, want a ValidationError", bad, err)
		}
	}
}

// testBacklogPerLane: the backlog is read per lane, each capped on its own
// and with its own oldest age, so that a campaign's due deliveries — all due
// at its start, and claimed only after the transactional lane — are not
// taken for the wait of a send, which joins the transactional lane.
func testBacklogPerLane[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1")
	rs := b.recipientsNamed("lane-", 4)
	b.startCampaign(campaignSpec("sale"), rs...)
	b.expand(b.client)
	b.clock.Advance(2 * time.Minute)
	bl, err := b.client.Backlog(b.ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := oncepush.Backlog{Due: 3, OldestAge: 2 * time.Minute, Campaign: oncepush.BacklogLane{Due: 3, OldestAge: 2 * time.Minute}}
	if bl != want {
		t.Fatalf("a campaign's deliveries due for 2m: Backlog = %+v, want %+v", bl, want)
	}
	b.send([]string{"r1"}, msg("password reset"), nil)
	b.clock.Advance(30 * time.Second)
	bl, err = b.client.Backlog(b.ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	want = oncepush.Backlog{Due: 5, OldestAge: 150 * time.Second,
		Transactional: oncepush.BacklogLane{Due: 1, OldestAge: 30 * time.Second},
		Campaign:      oncepush.BacklogLane{Due: 4, OldestAge: 150 * time.Second}}
	if bl != want {
		t.Fatalf("and a send due for 30s: Backlog = %+v, want %+v", bl, want)
	}
}
