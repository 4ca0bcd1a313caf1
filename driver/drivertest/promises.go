package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/enginetest"
	"github.com/oncepush/oncepush/pushtest"
)

// Tests of promises an adversary broke once: each names the way it broke.

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

// testAcceptedEndsSent: once one device accepted, every way a delivery can
// end must end it sent — expiry, a skip, a delay past the lifetime, attempts
// exhausted.
func testAcceptedEndsSent[TTx any](t *testing.T, h Harness[TTx]) {
	var skip atomic.Bool
	elig := func(_ context.Context, n oncepush.Notice, recipients []string) (map[string]oncepush.Decision, error) {
		out := map[string]oncepush.Decision{}
		if !skip.Load() {
			return out, nil
		}
		for _, r := range recipients {
			switch r {
			case "skip":
				out[r] = oncepush.DecisionSkip
			case "late":
				out[r] = oncepush.DelayUntil(n.ExpiresAt.Add(time.Hour))
			}
		}
		return out, nil
	}
	b := setup(t, h, func(c *oncepush.Config) { c.Eligibility = perMessage(elig) })
	names := []string{"expire", "skip", "late"}
	for _, r := range names {
		b.register(r, oncepush.TransportFCM, oncepush.TransportAPNs)
	}
	b.apns.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "503 ServiceUnavailable"})
	b.send([]string{"skip", "late"}, msg("one"), &oncepush.SendOptions{Lifetime: 2 * time.Hour})
	b.send([]string{"expire"}, msg("two"), &oncepush.SendOptions{Lifetime: 10 * time.Minute})
	b.drain()
	for _, r := range names {
		d := b.only(r)
		wantStatus(t, d, oncepush.StatusPending) // FCM accepted, APNs retries
	}

	skip.Store(true)
	b.drainAfter(11 * time.Minute) // "expire" is past its lifetime; the others are due
	for _, r := range names {
		wantStatus(t, b.only(r), oncepush.StatusSent)
	}
	wantSends(t, b.fcm, 3, "one per accepted device")
}

// testObserverPanicKeepsOutcome: an Observer that panics must not turn an
// accepted answer into a resend, nor stop the run.
func testObserverPanicKeepsOutcome[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.Observer = panickyObserver{} }, "r1")
	if _, err := b.client.Send(b.ctx, []string{"r1"}, msg("watched"), nil); err != nil {
		t.Fatalf("Send with a panicking observer: %v", err)
	}
	if _, err := b.client.Drain(b.ctx); err != nil {
		t.Fatalf("Drain with a panicking observer: %v", err)
	}
	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusSent)
	if len(d.Devices) != 1 || d.Devices[0].State != oncepush.AttemptAccepted || d.Devices[0].Submissions != 1 {
		t.Fatalf("ledger %+v: want one accepted submission", d.Devices)
	}
	b.drainAfter(time.Hour)
	wantSends(t, b.fcm, 1, "after the observer's panic")
}

type panickyObserver struct{ oncepush.NopObserver }

func (panickyObserver) Queued(int, int) { panic("observer: queued") }
func (panickyObserver) Submitted(oncepush.Transport, oncepush.Outcome, time.Duration) {
	panic("observer: submitted")
}
func (panickyObserver) Finished(oncepush.DeliveryStatus) { panic("observer: finished") }

// testPausedRunStartsNothingLate: a run frozen for longer than its lease
// (SIGSTOP, a starved machine) must start no send when it wakes: not the
// pairs still queued behind the frozen send, and not a pair whose provider
// was about to write when the freeze began.
func testPausedRunStartsNothingLate[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.ConcurrentSends = 1 })
	lease := b.client.Config().Lease
	names := []string{"r1", "r2", "r3"}
	for _, r := range names {
		b.register(r, oncepush.TransportFCM)
	}
	b.send(names, msg("frozen"), nil)
	var calls atomic.Int32
	b.fcm.Answer(func(context.Context, *oncepush.Submission) oncepush.Result {
		if calls.Add(1) == 1 {
			b.clock.Advance(lease + time.Second) // frozen while the first request was out
		}
		return oncepush.Accepted("ok")
	})
	st, err := b.client.RunOnce(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := b.fcm.Count(); n != 1 || st.Submitted != 1 || st.Released != 2 {
		t.Fatalf("%d submissions, stats %+v: a run that woke past its lease kept sending", n, st)
	}
	for _, d := range b.deliveries("r2") {
		for _, a := range d.Devices {
			if a.Submissions != 0 {
				t.Fatalf("released pair counted as submitted: %+v", a)
			}
		}
	}
	b.drain()
	wantSends(t, b.fcm, 3, "each pair exactly once after the next run")

	// Frozen between the engine's check and the provider's write: the provider
	// asks CheckStart at its last instant, as the HTTP providers do.
	b.register("r4", oncepush.TransportFCM)
	b.send([]string{"r4"}, msg("frozen at the write"), nil)
	b.fcm.Answer(func(ctx context.Context, _ *oncepush.Submission) oncepush.Result {
		b.clock.Advance(lease + time.Second)
		if err := oncepush.CheckStart(ctx); err != nil {
			return oncepush.Result{Outcome: oncepush.OutcomeRetry, Unsent: true, Text: "not started: " + err.Error()}
		}
		return oncepush.Accepted("late")
	})
	st, err = b.client.RunOnce(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Submitted != 0 || st.Released != 1 {
		t.Fatalf("stats %+v: a send refused at the write must count as released", st)
	}
	d := b.only("r4")
	wantStatus(t, d, oncepush.StatusPending)
	if d.Attempts != 0 || len(d.Devices) != 1 || d.Devices[0].Submissions != 0 || d.Devices[0].State != oncepush.AttemptPending {
		t.Fatalf("refused send left %+v (attempts %d): the ledger must not count it", d.Devices, d.Attempts)
	}
}

// testKilledRunLeavesOnlyInFlightAmbiguous: under at-most-once, a run that
// dies with part of its batch in flight leaves exactly the in-flight pairs
// ambiguous; the next run sends the rest, and the ledger's submissions equal
// the requests the providers received.
func testKilledRunLeavesOnlyInFlightAmbiguous[TTx any](t *testing.T, h Harness[TTx]) {
	const n, window = 20, 4
	b := setup(t, h, func(c *oncepush.Config) { c.ConcurrentSends = window })
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("r%02d", i))
		b.register(names[i], oncepush.TransportFCM)
	}
	res := b.send(names, msg("once"), &oncepush.SendOptions{Ambiguity: oncepush.AmbiguityAtMostOnce})

	release := b.fcm.Hold() // run A's sends never answer while it is "dead"
	doneA := make(chan struct{})
	go func() {
		defer close(doneA)
		_, _ = b.client.Drain(context.WithoutCancel(b.ctx))
	}()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if !b.fcm.WaitCount(ctx, window) {
		t.Fatal("run A never filled its window")
	}

	fcmB := pushtest.NewProvider(oncepush.TransportFCM)
	clientB := b.newClient(b.db.Driver(t, 0), func(c *oncepush.Config) { c.Providers = []oncepush.Provider{fcmB} })
	b.clock.Advance(clientB.Config().Lease + time.Second)
	drain(t, clientB)
	release()
	<-doneA

	if got := b.fcm.Count(); got != window {
		t.Fatalf("run A submitted %d, want its window of %d", got, window)
	}
	if got := fcmB.Count(); got != n-window {
		t.Fatalf("run B submitted %d, want the %d pairs run A never sent", got, n-window)
	}
	ds, err := b.client.MessageDeliveries(b.ctx, res.MessageID, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	ambiguous, submissions := 0, 0
	for _, d := range ds {
		if d.Status == oncepush.StatusAmbiguous {
			ambiguous++
		}
		for _, a := range d.Devices {
			submissions += a.Submissions
		}
	}
	if ambiguous != window {
		t.Fatalf("%d deliveries ambiguous, want only the %d in flight when run A died", ambiguous, window)
	}
	if received := b.fcm.Count() + fcmB.Count(); submissions != received {
		t.Fatalf("ledger counts %d submissions, providers received %d", submissions, received)
	}
}

// testReRegisteredTokenSamePair: whether a (notification, device) was
// submitted is decided by the token, so unregistering and registering the
// same token again (logout, login) neither reopens an at-most-once pair nor
// gives a resend a new apns-id.
func testReRegisteredTokenSamePair[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	devs := b.register("once", oncepush.TransportFCM, oncepush.TransportAPNs)
	fcmDev, apnsDev := devs[0], devs[1]
	resendDev := b.register("resend", oncepush.TransportAPNs)[0]
	lost := oncepush.Result{Outcome: oncepush.OutcomeMaybeSent, Text: "no answer after the request was written: timeout"}
	b.fcm.AnswerAll(lost)
	var apnsCalls atomic.Int32
	b.apns.Answer(func(_ context.Context, s *oncepush.Submission) oncepush.Result {
		if s.Token == resendDev.Token && apnsCalls.Add(1) > 1 {
			return oncepush.Accepted("second")
		}
		if s.Token == resendDev.Token {
			return lost
		}
		return oncepush.Result{Outcome: oncepush.OutcomeRetry, Text: "503 ServiceUnavailable"}
	})
	b.send([]string{"once"}, msg("once"), &oncepush.SendOptions{Ambiguity: oncepush.AmbiguityAtMostOnce})
	b.send([]string{"resend"}, msg("resend"), nil)
	b.drain()
	first := b.apns.Submissions()
	var firstResend oncepush.Submission
	for _, s := range first {
		if s.Token == resendDev.Token {
			firstResend = s
		}
	}

	// Logout and login: the same tokens, new registrations (new ids).
	for _, d := range []*oncepush.Device{fcmDev, apnsDev, resendDev} {
		if err := b.client.UnregisterDevice(b.ctx, d.Recipient, d.Transport, d.Token); err != nil {
			t.Fatal(err)
		}
		again, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: d.Recipient, Transport: d.Transport, Token: d.Token})
		if err != nil {
			t.Fatal(err)
		}
		if again.ID == d.ID {
			t.Fatalf("re-registration kept id %d; the test needs a new row", d.ID)
		}
	}
	b.fcm.Answer(nil)
	b.drainAfter(2 * time.Hour)
	wantSends(t, b.fcm, 1, "the at-most-once pair after its token registered again")
	var resends []oncepush.Submission
	for _, s := range b.apns.Submissions() {
		if s.Token == resendDev.Token {
			resends = append(resends, s)
		}
	}
	if len(resends) != 2 || resends[1].SubmissionID != firstResend.SubmissionID || !resends[1].Resend {
		t.Fatalf("resend after re-registration: %d submissions, apns-id %q then %q (resend %v); want the same id",
			len(resends), firstResend.SubmissionID, resends[len(resends)-1].SubmissionID, resends[len(resends)-1].Resend)
	}
	wantStatus(t, b.only("resend"), oncepush.StatusSent)
}

// flakyDriver fails InTx while fail is positive: a database too slow to
// answer in time, as seen on a loaded machine.
type flakyDriver[TTx any] struct {
	driver.Driver[TTx]
	fail atomic.Int32
}

func (f *flakyDriver[TTx]) InTx(ctx context.Context, fn func(context.Context, TTx, driver.Executor) error) error {
	if f.fail.Add(-1) >= 0 {
		return errors.New("injected: the database did not answer in time")
	}
	return f.Driver.InTx(ctx, fn)
}

// failingRecord queues a message to r1 (with an FCM device) and returns a
// client, sending to FCM only, whose database fails its next tries
// transactions from the moment FCM accepts the send: those of the record.
func failingRecord[TTx any](t *testing.T, h Harness[TTx], tries int32) (*bundle[TTx], *oncepush.Client[TTx]) {
	t.Helper()
	b := setup(t, h, nil, "r1")
	flaky := &flakyDriver[TTx]{Driver: b.db.Driver(t, 0)}
	client := b.newClient(flaky, func(c *oncepush.Config) { c.Providers = []oncepush.Provider{b.fcm} })
	b.send([]string{"r1"}, msg("recorded"), nil)
	b.fcm.Answer(func(context.Context, *oncepush.Submission) oncepush.Result {
		flaky.fail.Store(tries)
		return oncepush.Accepted("ok")
	})
	return b, client
}

// testRecordOutlastsSlowDatabase: a record that fails several times in a row
// (a slow, loaded machine) must keep trying while the lease holds, not give up
// and leave a submitted batch to be resent when the lease ends.
func testRecordOutlastsSlowDatabase[TTx any](t *testing.T, h Harness[TTx]) {
	b, client := failingRecord(t, h, 8) // the record's next eight tries fail
	if _, err := client.Drain(b.ctx); err != nil {
		t.Fatalf("the record gave up: %v", err)
	}
	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusSent)
	wantSends(t, b.fcm, 1, "the record that outlasted the slow database")
}

// ctxDriver remembers whether a claim's context was cancelled while its
// transaction ran.
type ctxDriver[TTx any] struct {
	driver.Driver[TTx]
	stop      context.CancelFunc
	cancelled atomic.Bool
}

func (d *ctxDriver[TTx]) InTx(ctx context.Context, fn func(context.Context, TTx, driver.Executor) error) error {
	return d.Driver.InTx(ctx, func(ctx context.Context, tx TTx, ex driver.Executor) error {
		err := fn(ctx, tx, ex)
		if d.stop != nil {
			d.stop() // the stop arrives just before COMMIT
			d.stop = nil
			d.cancelled.Store(ctx.Err() != nil)
		}
		return err
	})
}

// testStopDuringClaimReleasesBatch: a stop that arrives while the claim's
// transaction runs must not cancel it (a cancel racing COMMIT can leave rows
// leased to a run that thinks it failed, for a whole lease); the run starts
// nothing and gives the batch back at once.
func testStopDuringClaimReleasesBatch[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	ctx, stop := context.WithCancel(b.ctx)
	cd := &ctxDriver[TTx]{Driver: b.db.Driver(t, 0), stop: stop}
	client := b.newClient(cd, func(c *oncepush.Config) { c.Providers = []oncepush.Provider{b.fcm} })
	b.register("r1", oncepush.TransportFCM)
	b.send([]string{"r1"}, msg("stopped"), nil)
	if _, err := client.Drain(ctx); err != nil {
		t.Fatalf("a stop during the claim failed the run: %v", err)
	}
	if cd.cancelled.Load() {
		t.Fatal("the stop cancelled the claim transaction before its commit")
	}
	wantSends(t, b.fcm, 0, "after a stop during the claim")
	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusPending)
	got, err := b.client.Delivery(b.ctx, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.NextAttemptAt.After(b.clock.Now()) || got.Attempts != 0 {
		t.Fatalf("after the stop the delivery is due %s (now %s), attempts %d: not given back", got.NextAttemptAt, b.clock.Now(), got.Attempts)
	}
	drain(t, b.client)
	wantSends(t, b.fcm, 1, "the batch given back after the stop")
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

// freezeDriver stops its client dead after its first claim commits, until
// released: a crash at that exact step, as far as the database can tell.
type freezeDriver[TTx any] struct {
	driver.Driver[TTx]
	frozen  chan struct{} // closed once the claim has committed and the run froze
	release chan struct{}
	once    atomic.Bool
}

func (d *freezeDriver[TTx]) InTx(ctx context.Context, fn func(context.Context, TTx, driver.Executor) error) error {
	err := d.Driver.InTx(ctx, fn)
	if d.once.CompareAndSwap(false, true) {
		close(d.frozen)
		<-d.release
	}
	return err
}

// testCrashAfterClaimSendsNormally: a run that dies right after its claim
// commits has sent nothing and marked nothing sending, so the next run sends
// its pairs normally — even under at-most-once, where a pair left marked
// would be given up as ambiguous.
func testCrashAfterClaimSendsNormally[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	fd := &freezeDriver[TTx]{Driver: b.db.Driver(t, 0), frozen: make(chan struct{}), release: make(chan struct{})}
	crashed := b.newClient(fd, func(c *oncepush.Config) { c.Providers = []oncepush.Provider{b.fcm} })
	b.register("r1", oncepush.TransportFCM)
	b.send([]string{"r1"}, msg("once"), &oncepush.SendOptions{Ambiguity: oncepush.AmbiguityAtMostOnce})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = crashed.Drain(context.WithoutCancel(b.ctx))
	}()
	<-fd.frozen
	defer func() { close(fd.release); <-done }()

	b.drainAfter(b.client.Config().Lease + time.Second)
	wantSends(t, b.fcm, 1, "after a crash right after the claim")
	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusSent)
	if a := d.Devices[0]; a.Submissions != 1 || a.Ambiguous != 0 {
		t.Fatalf("ledger %+v: the crashed run's claim counted a submission it never made", a)
	}
}

// testStopNotHeldByDeadDatabase: a stop whose deadline has passed is not held
// up by a record that keeps failing (the database is down). The stop arrives
// while the record pauses between tries, on a pause that never ends by
// itself: only the deadline can end it. The record then tries once more, at
// once, gives up, and Stop returns.
func testStopNotHeldByDeadDatabase[TTx any](t *testing.T, h Harness[TTx]) {
	b, client := failingRecord(t, h, 1<<30) // the database is gone from the send on
	var mu sync.Mutex
	var tries []string
	pausing := make(chan struct{})
	var once sync.Once
	hooks := &enginetest.Hooks{
		OnRecordFailed: func(try int, _ error, last bool) {
			mu.Lock()
			defer mu.Unlock()
			tries = append(tries, fmt.Sprintf("try %d failed, last %v", try, last))
		},
		RecordPause: func(time.Duration) <-chan time.Time {
			once.Do(func() { close(pausing) })
			return nil // a pause that never ends by itself
		},
	}
	if err := client.Start(enginetest.WithHooks(b.ctx, hooks)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-pausing:
	case <-time.After(time.Minute):
		t.Fatal("the record never paused after a failed try")
	}
	late, cancel := context.WithCancel(b.ctx)
	cancel() // the stop's deadline has passed already
	stopped := make(chan error, 1)
	go func() { stopped <- client.Stop(late) }()
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("Stop is still waiting 30 s after its deadline: the record's pause did not end with it")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"try 1 failed, last false", "try 2 failed, last true"}; !slices.Equal(tries, want) {
		t.Fatalf("record tries %q, want %q: a pause cut by the deadline, then one last try", tries, want)
	}
}

// testForeignTextIsRedacted: whatever a provider (or its panic) says is
// recorded without the device's token and without control characters: a push
// service echoing its request, or a provider written elsewhere, must not put a
// token into the ledger the API shows, nor escapes into the terminals that
// read it.
func testForeignTextIsRedacted[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	fcmDev := b.register("r1", oncepush.TransportFCM)[0]
	apnsDev := b.register("r2", oncepush.TransportAPNs)[0]
	b.fcm.Answer(func(_ context.Context, s *oncepush.Submission) oncepush.Result {
		return oncepush.Result{Outcome: oncepush.OutcomeRejected,
			Text: "400 no such token " + string(s.Token) + " \x1b[31mred\x1b[0m\r\nforged: line \u202eevil"}
	})
	b.apns.Answer(func(_ context.Context, s *oncepush.Submission) oncepush.Result {
		panic("cannot send to " + string(s.Token) + "\x1b[2J")
	})
	b.send([]string{"r1", "r2"}, msg("echo"), nil)
	b.drain()
	for _, c := range []struct {
		r   string
		dev *oncepush.Device
	}{{"r1", fcmDev}, {"r2", apnsDev}} {
		d := b.only(c.r)
		a := attempt(t, d, c.dev.ID)
		for _, text := range []string{a.Error, d.LastError} {
			if strings.Contains(text, string(c.dev.Token)) {
				t.Fatalf("%s: the device token reached the ledger: %q", c.r, text)
			}
			for _, r := range text {
				if r < 0x20 || (r >= 0x7f && r < 0xa0) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
					t.Fatalf("%s: control character %U in the ledger: %q", c.r, r, text)
				}
			}
		}
		if !strings.Contains(a.Error, oncepush.MaskToken(string(c.dev.Token))) {
			t.Fatalf("%s: want the token masked in the text, got %q", c.r, a.Error)
		}
	}
}

// testTokenEchoedInAnyCaseIsRedacted: a provider that echoes a device token
// in another case than it was registered in — APNs tokens are hexadecimal,
// stored in lower case, and read by APNs in either — puts it neither into
// the ledger nor into the outcome log.
func testTokenEchoedInAnyCaseIsRedacted[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	token := strings.Repeat("0a1b2c3d4e5f6789", 4) // letters to change case
	dev, err := b.client.RegisterDevice(b.ctx, oncepush.Device{Recipient: "r1", Transport: oncepush.TransportAPNs, Token: oncepush.Token(token)})
	if err != nil {
		t.Fatal(err)
	}
	b.apns.Answer(func(_ context.Context, s *oncepush.Submission) oncepush.Result {
		return oncepush.Result{Outcome: oncepush.OutcomeRejected, Text: "400 no such token " + strings.ToUpper(string(s.Token))}
	})
	b.send([]string{"r1"}, msg("echo"), nil)
	b.drain()
	d := b.only("r1")
	a := attempt(t, d, dev.ID)
	for _, text := range []string{a.Error, d.LastError, b.logs.all()} {
		if strings.Contains(strings.ToLower(text), token) {
			t.Fatalf("the device token, upper-cased, reached the ledger or the log: %q", text)
		}
	}
	if !strings.Contains(a.Error, oncepush.MaskToken(string(dev.Token))) {
		t.Fatalf("want the token masked in the text, got %q", a.Error)
	}
	if !b.logs.has("provider rejected the notification", oncepush.MaskToken(string(dev.Token))) {
		t.Fatalf("the rejection was not logged with the token masked:\n%s", b.logs.all())
	}
}
