package drivertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/enginetest"
	"github.com/oncepush/oncepush/pushtest"
)

// testConcurrentClients: four independent clients, each on its own pool,
// drain 2,000 deliveries × 3 devices; every pair is submitted exactly once and
// nothing is left pending.
func testConcurrentClients[TTx any](t *testing.T, h Harness[TTx]) {
	if testing.Short() {
		t.Skip("long: 6,000 sends through four clients")
	}
	b := setup(t, h, nil)
	const recipients, devices = 2000, 3
	transports := []oncepush.Transport{oncepush.TransportFCM, oncepush.TransportAPNs, oncepush.TransportRuStore}
	names, err := registerMany(b.ctx, b.client, "u%04d", recipients, transports)
	if err != nil {
		t.Fatal(err)
	}
	var msgIDs []int64
	for i := 0; i < recipients; i += 100 {
		res := b.send(names[i:i+100], msg(fmt.Sprintf("batch %d", i/100)), nil)
		msgIDs = append(msgIDs, res.MessageID)
	}

	// One set of providers shared by all clients, answering with jitter so that
	// runs interleave.
	jitter := func(ctx context.Context, s *oncepush.Submission) oncepush.Result {
		select {
		case <-time.After(time.Duration(rand.IntN(2000)) * time.Microsecond):
		case <-ctx.Done():
		}
		return oncepush.Accepted("ok")
	}
	provs := make([]oncepush.Provider, 0, devices)
	fakes := make([]*pushtest.Provider, 0, devices)
	for _, tr := range transports {
		p := pushtest.NewProvider(tr)
		p.Answer(jitter)
		provs = append(provs, p)
		fakes = append(fakes, p)
	}
	var clients []*oncepush.Client[TTx]
	for range 4 {
		c := b.newClient(b.db.Driver(t, 4), func(c *oncepush.Config) {
			c.Providers = provs
			c.BatchSize = 50
			c.Workers = 2
		})
		clients = append(clients, c)
	}
	// The race this test names: several clients holding batches at once.
	var mu sync.Mutex
	claims := make([]int, len(clients))
	open, mostOpen := 0, 0
	for i, c := range clients {
		hooks := &enginetest.Hooks{
			OnClaimCommitted: func(_, pairs int) {
				mu.Lock()
				defer mu.Unlock()
				claims[i]++
				if pairs > 0 {
					open++
					mostOpen = max(mostOpen, open)
				}
			},
			OnRecordCommitting: func(int) {
				mu.Lock()
				defer mu.Unlock()
				open--
			},
		}
		if err := c.Start(enginetest.WithHooks(b.ctx, hooks)); err != nil {
			t.Fatal(err)
		}
	}
	// No bound of its own: how long 6,000 sends take depends on the machine,
	// and the test binary's -timeout bounds a hang.
	for _, p := range fakes {
		if !p.WaitCount(b.ctx, recipients) {
			t.Fatalf("%s received %d submissions, want %d", p.Transport(), p.Count(), recipients)
		}
	}
	for _, c := range clients {
		if err := c.Stop(b.ctx); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	claimed := 0
	for _, n := range claims {
		if n > 0 {
			claimed++
		}
	}
	if claimed < 2 || mostOpen < 2 {
		t.Fatalf("batches claimed per client %v, at most %d batches open at once: the clients never raced", claims, mostOpen)
	}
	mu.Unlock()
	seen := map[string]int{}
	for _, p := range fakes {
		for _, s := range p.Submissions() {
			seen[s.SubmissionID]++
		}
	}
	if len(seen) != recipients*devices {
		t.Fatalf("%d distinct pairs submitted, want %d", len(seen), recipients*devices)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("pair %s submitted %d times", id, n)
		}
	}
	for _, id := range msgIDs {
		counts, err := b.client.DeliveryCounts(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if counts[oncepush.StatusSent] != 100 || len(counts) != 1 {
			t.Fatalf("message %d: counts %v, want 100 sent and nothing else", id, counts)
		}
	}
}

// holdThen makes the provider block every send until release, then answer r.
func holdThen(p *pushtest.Provider, r oncepush.Result) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	p.Answer(func(ctx context.Context, s *oncepush.Submission) oncepush.Result {
		select {
		case <-ch:
			return r
		case <-ctx.Done():
			return oncepush.Result{Outcome: oncepush.OutcomeMaybeSent, Text: "no answer: " + ctx.Err().Error()}
		}
	})
	return func() { once.Do(func() { close(ch) }) }
}

// abandon starts a drain of client whose provider holds its answer, waits until
// the provider has the submission, and returns a function that lets the
// provider answer r and waits for the drain to end.
func abandon[TTx any](t *testing.T, b *bundle[TTx], client *oncepush.Client[TTx], p *pushtest.Provider, r oncepush.Result) (finish func()) {
	t.Helper()
	already := p.Count()
	release := holdThen(p, r)
	done := make(chan error, 1)
	go func() {
		_, err := client.Drain(context.WithoutCancel(b.ctx))
		done <- err
	}()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if !p.WaitCount(ctx, already+1) {
		release()
		t.Fatal("the abandoned run never called its provider")
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			release()
			if err := <-done; err != nil {
				t.Errorf("abandoned run: %v", err)
			}
		})
	}
}

func testAbandonedResend[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	dev := b.register("r1", oncepush.TransportFCM)[0]
	b.send([]string{"r1"}, msg("hello"), nil)

	// Run A claims, marks sending, submits, and never records: its answer is
	// lost and it outlives its lease. When it finally answers it says
	// "rejected", which would change the record if it were allowed to.
	finishA := abandon(t, b, b.client, b.fcm, oncepush.Result{Outcome: oncepush.OutcomeRejected, Text: "400 late answer"})
	first := b.fcm.Submissions()[0]

	d := b.only("r1")
	if a := attempt(t, d, dev.ID); a.State != oncepush.AttemptSending || a.Submissions != 1 {
		t.Fatalf("before the provider answered: %+v, want sending with 1 submission", a)
	}

	// While the lease holds, nobody else sends.
	fcmB := pushtest.NewProvider(oncepush.TransportFCM)
	clientB := b.newClient(b.db.Driver(t, 0), func(c *oncepush.Config) { c.Providers = []oncepush.Provider{fcmB} })
	drain(t, clientB)
	wantSends(t, fcmB, 0, "a second client while the first held the lease")

	b.clock.Advance(clientB.Config().Lease + time.Second)
	drain(t, clientB)
	subs := fcmB.Submissions()
	if len(subs) != 1 {
		t.Fatalf("after the lease expired, resend submitted %d times, want 1", len(subs))
	}
	again := subs[0]
	if again.CollapseID != first.CollapseID || again.SubmissionID != first.SubmissionID || again.NotificationID != first.NotificationID {
		t.Fatalf("resend identity changed: first %s/%s, again %s/%s", first.CollapseID, first.SubmissionID, again.CollapseID, again.SubmissionID)
	}
	if !again.Resend {
		t.Fatal("resend not marked as such")
	}
	d = b.only("r1")
	wantStatus(t, d, oncepush.StatusSent)
	a := attempt(t, d, dev.ID)
	if a.State != oncepush.AttemptAccepted || a.Submissions != 2 || a.Ambiguous != 1 || d.Attempts != 1 {
		t.Fatalf("ledger after resend: %+v, delivery attempts %d; want accepted, 2 submissions, 1 ambiguous, 1 attempt", a, d.Attempts)
	}

	// Run A answers at last. Its lease was taken: it must change nothing.
	finishA()
	after := b.only("r1")
	wantStatus(t, after, oncepush.StatusSent)
	if a2 := attempt(t, after, dev.ID); fmt.Sprintf("%+v", a2) != fmt.Sprintf("%+v", a) {
		t.Fatalf("a run that lost its lease changed the ledger:\nbefore %+v\nafter  %+v", a, a2)
	}
	if !b.logs.has("lease lost") {
		t.Fatalf("the lost lease was not logged; logs:\n%s", b.logs.all())
	}
}

func testAbandonedAtMostOnce[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	dev := b.register("r1", oncepush.TransportFCM)[0]
	b.send([]string{"r1"}, msg("once"), &oncepush.SendOptions{Ambiguity: oncepush.AmbiguityAtMostOnce})
	finishA := abandon(t, b, b.client, b.fcm, oncepush.Accepted("late"))

	fcmB := pushtest.NewProvider(oncepush.TransportFCM)
	clientB := b.newClient(b.db.Driver(t, 0), func(c *oncepush.Config) { c.Providers = []oncepush.Provider{fcmB} })
	b.clock.Advance(clientB.Config().Lease + time.Second)
	drain(t, clientB)
	b.clock.Advance(24 * time.Hour)
	drain(t, clientB)
	wantSends(t, fcmB, 0, "an ambiguous at-most-once pair again")
	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusAmbiguous)
	a := attempt(t, d, dev.ID)
	if a.State != oncepush.AttemptAmbiguous || a.Submissions != 1 || a.Ambiguous != 1 {
		t.Fatalf("ledger: %+v, want ambiguous with 1 submission", a)
	}
	finishA()
	after := b.only("r1")
	wantStatus(t, after, oncepush.StatusAmbiguous)
	if b.fcm.Count()+fcmB.Count() != 1 {
		t.Fatalf("pair submitted %d times in all, want exactly 1", b.fcm.Count()+fcmB.Count())
	}
}

// testMaybeSent: a send with no answer after the request was written is
// resent (same identity) under resend, and never again under at-most-once.
func testMaybeSent[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	dev1 := b.register("resend", oncepush.TransportFCM)[0]
	dev2 := b.register("once", oncepush.TransportFCM)[0]
	var mu sync.Mutex
	seen := map[string]int{}
	b.fcm.Answer(func(_ context.Context, s *oncepush.Submission) oncepush.Result {
		mu.Lock()
		defer mu.Unlock()
		seen[s.SubmissionID]++
		if seen[s.SubmissionID] == 1 {
			return oncepush.Result{Outcome: oncepush.OutcomeMaybeSent, Text: "no answer after the request was written: timeout"}
		}
		return oncepush.Accepted("second")
	})
	b.send([]string{"resend"}, msg("r"), nil)
	b.send([]string{"once"}, msg("o"), &oncepush.SendOptions{Ambiguity: oncepush.AmbiguityAtMostOnce})
	b.drain()

	d := b.only("resend")
	wantStatus(t, d, oncepush.StatusPending)
	if d.Attempts != 1 || !strings.Contains(d.LastError, "no answer after the request was written") {
		t.Fatalf("resend delivery after a lost answer: attempts %d, error %q", d.Attempts, d.LastError)
	}
	wantStatus(t, b.only("once"), oncepush.StatusAmbiguous)

	b.drainAfter(time.Hour)
	d = b.only("resend")
	wantStatus(t, d, oncepush.StatusSent)
	if a := attempt(t, d, dev1.ID); a.Submissions != 2 || a.Ambiguous != 1 || a.ProviderID != "second" {
		t.Fatalf("resend ledger: %+v", a)
	}
	if a := attempt(t, b.only("once"), dev2.ID); a.Submissions != 1 || a.State != oncepush.AttemptAmbiguous {
		t.Fatalf("at-most-once ledger: %+v", a)
	}
	subs := b.fcm.Submissions()
	if len(subs) != 3 {
		t.Fatalf("%d submissions, want 3 (resend twice, at-most-once once)", len(subs))
	}
}

func testProviderFailures[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.MaxAttempts = 3 })
	dev := b.register("r1", oncepush.TransportFCM)[0]
	b.fcm.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "503 UNAVAILABLE: The service is unavailable."})
	b.send([]string{"r1"}, msg("flaky"), nil)
	b.drain()

	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusPending)
	wantErr := fmt.Sprintf("fcm device %d: 503 UNAVAILABLE: The service is unavailable.", dev.ID)
	if d.Attempts != 1 || d.LastError != wantErr {
		t.Fatalf("after one failure: attempts %d, error %q; want 1 and %q", d.Attempts, d.LastError, wantErr)
	}
	if a := attempt(t, d, dev.ID); a.State != oncepush.AttemptRetry || a.Error != "fcm 503 UNAVAILABLE: The service is unavailable." {
		t.Fatalf("device ledger: %+v", a)
	}
	// Backoff: 15 s ± 20 % from the clock's now.
	now := b.clock.Now()
	if lo, hi := now.Add(12*time.Second), now.Add(18*time.Second); d.NextAttemptAt.Before(lo) || d.NextAttemptAt.After(hi) {
		t.Fatalf("next attempt at %s, want within [%s, %s]", d.NextAttemptAt, lo, hi)
	}
	// While the clock stands, no retry.
	b.drain()
	b.drainAfter(11 * time.Second)
	wantSends(t, b.fcm, 1, "before the backoff passed")
	b.clock.Advance(8 * time.Second)
	// A Retry-After longer than the backoff wins.
	b.fcm.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "429 QUOTA_EXCEEDED: slow down", RetryAfter: 10 * time.Minute})
	b.drain()
	wantSends(t, b.fcm, 2, "retried after the backoff")
	d = b.only("r1")
	if min := b.clock.Now().Add(10 * time.Minute); d.Attempts != 2 || d.NextAttemptAt.Before(min) {
		t.Fatalf("after Retry-After 10m: attempts %d, next %s; want 2 and not before %s", d.Attempts, d.NextAttemptAt, min)
	}
	b.drainAfter(5 * time.Minute)
	wantSends(t, b.fcm, 2, "before Retry-After passed")
	b.drainAfter(6 * time.Minute)
	d = b.only("r1")
	wantStatus(t, d, oncepush.StatusFailed)
	if d.Attempts != 3 || !strings.Contains(d.LastError, "429 QUOTA_EXCEEDED: slow down") || d.FinishedAt == nil {
		t.Fatalf("after the last attempt: %+v", d)
	}
	b.drainAfter(24 * time.Hour)
	wantSends(t, b.fcm, 3, "a failed delivery a day later")
}

// testProviderTextIsStorable: a provider answering bytes that are not UTF-8
// (or NULs, or a novel) is still recorded, not turned into a failed record.
func testProviderTextStorable[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	dev := b.register("r1", oncepush.TransportFCM)[0]
	b.fcm.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRejected, Text: "400 bad \xff\xfe bytes\x00 " + strings.Repeat("é", 2000)})
	b.send([]string{"r1"}, msg("x"), nil)
	b.drain()
	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusFailed)
	a := attempt(t, d, dev.ID)
	if a.State != oncepush.AttemptRejected || !strings.HasPrefix(a.Error, "fcm 400 bad \uFFFD bytes ") || len(a.Error) > 1100 {
		t.Fatalf("ledger: state %s, error %q (%d bytes)", a.State, a.Error[:min(60, len(a.Error))], len(a.Error))
	}
}

func testInvalidToken[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	// The same token string under two transports is two devices.
	fcmDev, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "r1", Transport: oncepush.TransportFCM, Token: "shared-token-123"})
	if err != nil {
		t.Fatal(err)
	}
	rusDev, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "r1", Transport: oncepush.TransportRuStore, Token: "shared-token-123"})
	if err != nil {
		t.Fatal(err)
	}
	if fcmDev.ID == rusDev.ID {
		t.Fatal("one token under two transports shares a device")
	}
	b.fcm.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeInvalidToken, Text: "404 UNREGISTERED: Requested entity was not found."})
	b.send([]string{"r1"}, msg("hi"), nil)
	b.drain()

	devs, err := b.client.Devices(b.ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].ID != rusDev.ID {
		t.Fatalf("devices after an invalid FCM token: %+v; want only the RuStore one", devs)
	}
	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusSent)
	if a := attempt(t, d, fcmDev.ID); a.State != oncepush.AttemptInvalid || a.Error != "fcm 404 UNREGISTERED: Requested entity was not found." {
		t.Fatalf("fcm ledger: %+v", a)
	}
	if want := fmt.Sprintf("fcm device %d: 404 UNREGISTERED: Requested entity was not found.", fcmDev.ID); d.LastError != want {
		t.Fatalf("last error %q, want %q", d.LastError, want)
	}
	if d.Attempts != 0 {
		t.Fatalf("an invalid token counted as an attempt (%d)", d.Attempts)
	}
}

// testInvalidMovedToken: a token moves to another recipient while a send to
// its old owner is in flight; the provider's "invalid" about the old
// registration must not delete the new owner's.
func testInvalidMovedToken[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	old, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "seller", Transport: oncepush.TransportFCM, Token: "phone-token-1"})
	if err != nil {
		t.Fatal(err)
	}
	b.send([]string{"seller"}, msg("to the seller"), nil)
	finish := abandon(t, b, b.client, b.fcm, oncepush.Result{Outcome: oncepush.OutcomeInvalidToken, Text: "404 UNREGISTERED"})
	moved, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "buyer", Transport: oncepush.TransportFCM, Token: "phone-token-1"})
	if err != nil {
		t.Fatal(err)
	}
	if moved.ID == old.ID {
		t.Fatal("a token that moved to another recipient kept its device id")
	}
	finish()
	devs, err := b.client.Devices(b.ctx, "buyer")
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].ID != moved.ID {
		t.Fatalf("the new owner's registration was deleted by an answer about the old one: %+v", devs)
	}
	if devs, _ := b.client.Devices(b.ctx, "seller"); len(devs) != 0 {
		t.Fatalf("the old owner still has the token: %+v", devs)
	}
}

func testNoDevicesNoProvider[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	onlyFCM := b.newClient(b.drv, func(c *oncepush.Config) { c.Providers = []oncepush.Provider{b.fcm} })
	apnsDev := b.register("apple", oncepush.TransportAPNs)[0]
	b.send([]string{"nobody", "apple"}, msg("x"), nil)
	drain(t, onlyFCM)
	wantStatus(t, b.only("nobody"), oncepush.StatusNoDevices)
	d := b.only("apple")
	wantStatus(t, d, oncepush.StatusFailed)
	if a := attempt(t, d, apnsDev.ID); a.State != oncepush.AttemptRejected || !strings.Contains(a.Error, `no provider configured for transport "apns"`) {
		t.Fatalf("ledger: %+v", a)
	}
	if !strings.Contains(d.LastError, fmt.Sprintf("apns device %d: no provider configured", apnsDev.ID)) {
		t.Fatalf("last error %q", d.LastError)
	}
}

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

// testRunBudget: the budget is checked before each send, on the engine's
// clock. Each send here takes 100 ms of that clock (the provider moves it), so
// a 300 ms budget admits exactly three, however fast or slow the machine is:
// no real time is read, and the engine's own count of started sends (its
// hook) must agree with the provider's.
func testRunBudget[TTx any](t *testing.T, h Harness[TTx]) {
	var clock *pushtest.Clock
	b := setup(t, h, func(c *oncepush.Config) {
		c.RunBudget = 300 * time.Millisecond
		c.ConcurrentSends = 1
	})
	clock = b.clock
	const n = 40
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("r%02d", i))
		b.register(names[i], oncepush.TransportFCM)
	}
	res := b.send(names, msg("slow"), nil)
	b.fcm.Answer(func(ctx context.Context, s *oncepush.Submission) oncepush.Result {
		clock.Advance(100 * time.Millisecond)
		return oncepush.Accepted("slow")
	})
	var starts enginetest.Counter
	st, err := b.client.RunOnce(enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnSendStarting: func(int64) { starts.Add() }}))
	if err != nil {
		t.Fatal(err)
	}
	if !st.BudgetSpent || st.Submitted != 3 || st.Submitted+st.Released != n {
		t.Fatalf("run stats %+v: want the budget to end the run after 3 sends", st)
	}
	if got := b.fcm.Count(); got != st.Submitted || starts.Count() != st.Submitted {
		t.Fatalf("provider got %d, the engine started %d, run says it submitted %d", got, starts.Count(), st.Submitted)
	}
	ds, err := b.client.MessageDeliveries(b.ctx, res.MessageID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	sent, untouched := 0, 0
	for _, d := range ds {
		switch d.Status {
		case oncepush.StatusSent:
			sent++
		case oncepush.StatusPending:
			untouched++
			if d.Attempts != 0 || d.NextAttemptAt.After(b.clock.Now()) {
				t.Fatalf("released delivery touched: %+v", d)
			}
			for _, a := range d.Devices {
				if a.Submissions != 0 || a.State != oncepush.AttemptPending || a.FirstSentAt != nil {
					t.Fatalf("released pair's ledger says it was sent: %+v", a)
				}
			}
		default:
			t.Fatalf("unexpected status %s", d.Status)
		}
	}
	if sent != st.Submitted || untouched != st.Released {
		t.Fatalf("%d sent and %d untouched, run stats %+v", sent, untouched, st)
	}
	b.fcm.Answer(nil)
	b.drain()
	if got := b.fcm.Count(); got != n {
		t.Fatalf("after the next runs: %d submissions, want exactly %d", got, n)
	}
}

func testClaimBatchBound[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.BatchSize = 7 })
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("r%02d", i))
	}
	b.send(names, msg("x"), nil) // no devices: each finishes at claim
	st := b.drain()
	if st.Batches != 3 || st.Claimed != 20 {
		t.Fatalf("stats %+v: want 20 deliveries in 3 batches of at most 7", st)
	}
}

func testOneConnection[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	one := b.newClient(b.db.Driver(t, 1), func(c *oncepush.Config) { c.Providers = []oncepush.Provider{b.fcm} })
	b.register("r1", oncepush.TransportFCM)
	b.send([]string{"r1"}, msg("held"), nil)
	finish := abandon(t, b, one, b.fcm, oncepush.Accepted("ok"))
	defer finish()
	// The provider holds its answer; the client's one connection must be free.
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	if _, err := one.Devices(ctx, "r1"); err != nil {
		t.Fatalf("pool of one connection blocked while a provider held its answer: %v", err)
	}
	if _, err := one.Send(ctx, []string{"r1"}, msg("meanwhile"), nil); err != nil {
		t.Fatalf("send through the pool of one while a send is in flight: %v", err)
	}
	finish()
	drain(t, one)
	wantSends(t, b.fcm, 2, "both sends, the first held while the pool of one served the second")
}

func testThrottle[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.ConcurrentSends = 1 })
	var names []string
	for i := range 5 {
		names = append(names, fmt.Sprintf("r%d", i))
		b.register(names[i], oncepush.TransportFCM)
	}
	b.register("apple", oncepush.TransportAPNs)
	b.fcm.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "429 RESOURCE_EXHAUSTED: project quota", RetryAfter: time.Minute, Throttle: true})
	b.send(append(names, "apple"), msg("quota"), nil)
	st := b.drain()
	if n := b.fcm.Count(); n != 1 {
		t.Fatalf("after a provider-wide 429, %d more sends went to it in the same run", n-1)
	}
	wantSends(t, b.apns, 1, "APNs, beside FCM's throttle")
	if st.Released != 4 {
		t.Fatalf("run stats %+v, want 4 released", st)
	}
	for _, r := range names {
		d := b.only(r)
		wantStatus(t, d, oncepush.StatusPending)
		if d.NextAttemptAt.Before(b.clock.Now().Add(50 * time.Second)) {
			t.Fatalf("%s due again at %s, before the provider's Retry-After", r, d.NextAttemptAt)
		}
	}
}
