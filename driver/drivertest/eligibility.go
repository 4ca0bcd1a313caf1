package drivertest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/oncepush/oncepush"
)

// perMessage makes a batch rule of a rule written per message, as most of
// these tests' rules are: asked about a batch, it asks rule about each
// message in turn, and fails the whole call on the first error, as a rule
// whose one query failed would (the engine then asks message by message).
func perMessage(rule func(context.Context, oncepush.Notice, []string) (map[string]oncepush.Decision, error)) oncepush.Eligibility {
	return func(ctx context.Context, asks []oncepush.Ask) ([]oncepush.Answer, error) {
		out := make([]oncepush.Answer, len(asks))
		for i, a := range asks {
			d, err := rule(ctx, a.Notice, a.Recipients)
			if err != nil {
				return nil, err
			}
			out[i].Decisions = d
		}
		return out, nil
	}
}

func testEligibility[TTx any](t *testing.T, h Harness[TTx]) {
	var mu sync.Mutex
	var calls [][]string
	quietEnd := epoch.Add(time.Hour)
	elig := func(_ context.Context, n oncepush.Notice, recipients []string) (map[string]oncepush.Decision, error) {
		mu.Lock()
		calls = append(calls, append([]string(nil), recipients...))
		mu.Unlock()
		out := map[string]oncepush.Decision{}
		for _, r := range recipients {
			switch {
			case r == "skip":
				out[r] = oncepush.DecisionSkip
			case r == "late":
				out[r] = oncepush.DelayUntil(n.Now.Add(48 * time.Hour))
			case r == "quiet" && n.Now.Before(quietEnd):
				out[r] = oncepush.DelayUntil(quietEnd)
			}
		}
		return out, nil
	}
	b := setup(t, h, func(c *oncepush.Config) { c.Eligibility = perMessage(elig) })
	for _, r := range []string{"send", "skip", "quiet", "late"} {
		b.register(r, oncepush.TransportFCM)
	}
	b.send([]string{"send", "skip", "quiet", "late"}, msg("news"), &oncepush.SendOptions{DedupKey: "news:1", Category: "news"})
	b.drain()

	if len(calls) != 1 || len(calls[0]) != 4 {
		t.Fatalf("eligibility calls %v, want one call with all four recipients", calls)
	}
	wantStatus(t, b.only("send"), oncepush.StatusSent)
	wantStatus(t, b.only("skip"), oncepush.StatusSkipped)
	wantStatus(t, b.only("late"), oncepush.StatusExpired)
	q := b.only("quiet")
	wantStatus(t, q, oncepush.StatusPending)
	if !q.NextAttemptAt.Equal(quietEnd) || q.Attempts != 0 {
		t.Fatalf("delayed delivery: next %s attempts %d; want %s and 0", q.NextAttemptAt, q.Attempts, quietEnd)
	}
	wantSends(t, b.fcm, 1, "the deliveries eligibility let through")
	b.drainAfter(59 * time.Minute)
	wantSends(t, b.fcm, 1, "a delayed delivery before its time")
	b.drainAfter(time.Minute)
	wantStatus(t, b.only("quiet"), oncepush.StatusSent)
	wantSends(t, b.fcm, 2, "the delayed delivery at its time")
	// A skipped delivery keeps its dedup key.
	if res := b.send([]string{"skip"}, msg("news"), &oncepush.SendOptions{DedupKey: "news:1"}); res.Queued != 0 {
		t.Fatalf("skip freed the dedup key: %+v", res)
	}
}

func testEligibilityStranger[TTx any](t *testing.T, h Harness[TTx]) {
	elig := func(_ context.Context, n oncepush.Notice, recipients []string) (map[string]oncepush.Decision, error) {
		if n.Type == "bad" {
			return map[string]oncepush.Decision{"stranger": oncepush.DecisionSkip}, nil
		}
		return nil, nil
	}
	b := setup(t, h, func(c *oncepush.Config) { c.Eligibility = perMessage(elig) }, "r1", "r2")
	d := b.badThenGood()
	if d.Attempts != 1 || !strings.Contains(d.LastError, `eligibility: answered about recipient "stranger", who was not asked about`) {
		t.Fatalf("bad message's delivery: attempts %d, error %q", d.Attempts, d.LastError)
	}
	if d.NextAttemptAt.Before(b.clock.Now().Add(12 * time.Second)) {
		t.Fatalf("bad message's delivery retries without backoff: %s", d.NextAttemptAt)
	}
	wantSends(t, b.fcm, 1, "only the good message")
}

// testEligibilityAnswerErr: an Answer's Err fails only its own message, in
// the one call the batch makes (no asking again); a rule that answers a
// number of asks other than it was given is asked again message by message,
// and every message it then decides goes out.
func testEligibilityAnswerErr[TTx any](t *testing.T, h Harness[TTx]) {
	var calls []int
	elig := func(_ context.Context, asks []oncepush.Ask) ([]oncepush.Answer, error) {
		calls = append(calls, len(asks))
		out := make([]oncepush.Answer, len(asks))
		for i, a := range asks {
			if a.Notice.Type == "bad" {
				out[i].Err = errors.New("no such category")
			}
		}
		return out, nil
	}
	b := setup(t, h, func(c *oncepush.Config) { c.Eligibility = elig }, "r1", "r2")
	d := b.badThenGood()
	if d.Attempts != 1 || !strings.Contains(d.LastError, "eligibility: no such category") {
		t.Fatalf("bad message's delivery: attempts %d, error %q", d.Attempts, d.LastError)
	}
	if len(calls) != 1 || calls[0] != 2 {
		t.Fatalf("rule calls %v (asks per call); want one call about both messages", calls)
	}

	calls = nil
	short := func(_ context.Context, asks []oncepush.Ask) ([]oncepush.Answer, error) {
		calls = append(calls, len(asks))
		return make([]oncepush.Answer, 1), nil // right only when asked alone
	}
	b = setup(t, h, func(c *oncepush.Config) { c.Eligibility = short }, "r1", "r2", "r3")
	b.send([]string{"r1", "r2", "r3"}, msg("x"), nil)
	b.send([]string{"r1"}, msg("y"), nil)
	b.drain()
	wantSends(t, b.fcm, 4, "every delivery, once the rule was asked per message")
	if !slices.Equal(calls, []int{2, 1, 1}) {
		t.Fatalf("rule calls %v (asks per call); want the batch, then each message alone", calls)
	}
}

// badThenGood sends a message of type "bad" to r1, then one of type "good"
// to r2, and drains: the good one must be sent whatever the rule made of the
// bad one, which stays pending. It returns r1's delivery.
func (b *bundle[TTx]) badThenGood() oncepush.Delivery {
	b.t.Helper()
	b.send([]string{"r1"}, oncepush.Message{Type: "bad", Title: "bad"}, nil)
	b.send([]string{"r2"}, oncepush.Message{Type: "good", Title: "good"}, nil)
	b.drain()
	wantStatus(b.t, b.only("r2"), oncepush.StatusSent)
	d := b.only("r1")
	wantStatus(b.t, d, oncepush.StatusPending)
	return d
}

// testEligibilityFailingQuery: a rule that reads the application's rows
// through the claim transaction, and one whose query fails; the failing query
// must not abort the claim of other messages.
func testEligibilityFailingQuery[TTx any](t *testing.T, h Harness[TTx]) {
	var db DB[TTx]
	elig := func(ctx context.Context, n oncepush.Notice, recipients []string) (map[string]oncepush.Decision, error) {
		tx, ok := oncepush.ClaimTx[TTx](ctx)
		if !ok {
			return nil, errors.New("no claim transaction in context")
		}
		if n.Type == "bad" {
			return nil, db.Exec(ctx, tx, "SELECT no_such_column FROM oncepush_device")
		}
		return nil, db.Exec(ctx, tx, "SELECT count(*) FROM oncepush_device")
	}
	b := setup(t, h, func(c *oncepush.Config) { c.Eligibility = perMessage(elig) }, "r1", "r2")
	db = b.db
	d := b.badThenGood()
	if d.Attempts != 1 || !strings.Contains(d.LastError, "eligibility:") {
		t.Fatalf("failing rule's delivery: attempts %d, error %q", d.Attempts, d.LastError)
	}
}

// testEligibilityHostileText: a rule whose error (or panic) text holds a NUL
// byte and invalid UTF-8 — text PostgreSQL refuses — must back off only its
// own message; the claim must still lease, and messages behind it go out.
func testEligibilityHostileText[TTx any](t *testing.T, h Harness[TTx]) {
	elig := func(_ context.Context, n oncepush.Notice, _ []string) (map[string]oncepush.Decision, error) {
		switch n.Type {
		case "bad":
			return nil, errors.New("rule broke on \x00 byte and \xff\xfe")
		case "panic":
			panic("rule panicked with \x00 and \xc3")
		}
		return nil, nil
	}
	b := setup(t, h, func(c *oncepush.Config) { c.Eligibility = perMessage(elig) }, "bad", "panic", "good")
	// Oldest first: the hostile messages are claimed before the good one.
	b.send([]string{"bad"}, oncepush.Message{Type: "bad", Title: "bad"}, nil)
	b.send([]string{"panic"}, oncepush.Message{Type: "panic", Title: "panic"}, nil)
	b.send([]string{"good"}, oncepush.Message{Type: "good", Title: "good"}, nil)
	if _, err := b.client.Drain(b.ctx); err != nil {
		t.Fatalf("a rule's hostile text failed the run: %v", err)
	}
	wantStatus(t, b.only("good"), oncepush.StatusSent)
	for _, r := range []string{"bad", "panic"} {
		d := b.only(r)
		wantStatus(t, d, oncepush.StatusPending)
		if d.Attempts != 1 || !strings.Contains(d.LastError, "eligibility") {
			t.Fatalf("%s: attempts %d, last error %q; want one counted retry naming eligibility", r, d.Attempts, d.LastError)
		}
		if !utf8.ValidString(d.LastError) || strings.ContainsRune(d.LastError, 0) {
			t.Fatalf("%s: recorded text is not storable as it came: %q", r, d.LastError)
		}
		if !d.NextAttemptAt.After(b.clock.Now()) {
			t.Fatalf("%s: due again at once (%s): it would be claimed first again", r, d.NextAttemptAt)
		}
	}
}
