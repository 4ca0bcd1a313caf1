package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/enginetest"
	"go.uber.org/goleak"
)

// sendInFlight starts b's client with hooks, sends a message to r1 and waits
// until FCM holds its send: FCM answers r once release is called.
func (b *bundle[TTx]) sendInFlight(hooks *enginetest.Hooks, r oncepush.Result) (release func()) {
	b.t.Helper()
	release = holdThen(b.fcm, r)
	if err := b.client.Start(enginetest.WithHooks(b.ctx, hooks)); err != nil {
		release()
		b.t.Fatal(err)
	}
	b.send([]string{"r1"}, msg("in flight"), nil)
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if !b.fcm.WaitCount(ctx, 1) {
		release()
		b.t.Fatal("not sent")
	}
	return release
}

// testStopFinishesInFlight: Stop called while a send is in flight waits for
// it, and its answer is recorded.
func testStopFinishesInFlight[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1")
	var waiting enginetest.Counter
	release := b.sendInFlight(&enginetest.Hooks{OnStopWaiting: waiting.Add}, oncepush.Accepted("finished"))
	defer release()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- b.client.Stop(ctx) }()
	if !waiting.Wait(ctx, 1) {
		t.Fatal("Stop never began waiting for the send in flight")
	}
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a send was in flight", err)
	default:
	}
	release()
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	d := b.only("r1")
	wantStatus(t, d, oncepush.StatusSent)
}

func testStopDeadline[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil)
	dev := b.register("r1", oncepush.TransportFCM)[0]
	release := b.sendInFlight(&enginetest.Hooks{}, oncepush.Accepted("never"))
	defer release()
	ctx, cancel := context.WithTimeout(b.ctx, 100*time.Millisecond)
	defer cancel()
	if err := b.client.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop past its deadline returned %v", err)
	}
	// The cancelled send was recorded (maybe-sent), not stranded as "sending".
	d := b.only("r1")
	a := attempt(t, d, dev.ID)
	if a.State != oncepush.AttemptAmbiguous || a.Ambiguous != 1 || d.Status != oncepush.StatusPending || d.Attempts != 1 {
		t.Fatalf("after a hard stop: delivery %s attempts %d, ledger %+v", d.Status, d.Attempts, a)
	}
}

func testStopLeavesNoGoroutines[TTx any](t *testing.T, h Harness[TTx]) {
	// Registered first, so it runs after every other cleanup (pools closed).
	t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreCurrent()) })
	b := setup(t, h, func(c *oncepush.Config) { c.CleanupInterval = 50 * time.Millisecond })
	b.register("r1", oncepush.TransportFCM, oncepush.TransportAPNs)
	var cleanups enginetest.Counter
	if err := b.client.Start(enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnCleanupDone: cleanups.Add})); err != nil {
		t.Fatal(err)
	}
	if err := b.client.Start(b.ctx); !errors.Is(err, oncepush.ErrAlreadyStarted) {
		t.Fatalf("second Start: %v", err)
	}
	b.send([]string{"r1"}, msg("hi"), nil)
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if !b.fcm.WaitCount(ctx, 1) || !b.apns.WaitCount(ctx, 1) {
		t.Fatalf("not sent to both devices: fcm %d, apns %d", b.fcm.Count(), b.apns.Count())
	}
	// Every goroutine of the client has run: the workers, and cleanup.
	if !cleanups.Wait(ctx, 1) {
		t.Fatal("the started client never ran its periodic cleanup")
	}
	if err := b.client.Stop(b.ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.client.Stop(b.ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func testStartedClientDelivers[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1")
	quiet := &wakeQuiet{}
	tap := &listenTap[TTx]{Driver: b.db.Driver(t, 0), woke: quiet.listenerWoke}
	client := b.newClient(tap, func(c *oncepush.Config) {
		c.Providers = []oncepush.Provider{b.fcm}
		c.PollInterval = time.Hour // only a wake-up can deliver at all
	})
	if err := client.Start(enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnWorkerIdle: quiet.idle})); err != nil {
		t.Fatal(err)
	}
	defer client.Stop(context.WithoutCancel(b.ctx))
	// The bound only turns a wake-up that never comes (the poll is an hour
	// away) into a failure instead of a hang; it is not a speed the machine
	// must reach, so it is far above what a loaded machine takes.
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
	defer cancel()
	// The listener is connected (its first wake-up, which tells the workers
	// to look for what they might have missed meanwhile), and every worker
	// has run on it and is idle with nothing pending: from now on a worker
	// runs only when a wake-up comes through the listener.
	if workers := client.Config().Workers; !quiet.wait(ctx, workers) {
		t.Fatalf("the listener never connected, or its workers never went quiet after it: %s", quiet)
	}
	// Another client (another process, in production) sends: the wake-up
	// must cross between them through the database.
	sender := b.newClient(b.db.Driver(t, 0), nil)
	for i := range 3 {
		if _, err := sender.Send(b.ctx, []string{"r1"}, msg(fmt.Sprintf("n%d", i)), nil); err != nil {
			t.Fatal(err)
		}
		if !b.fcm.WaitCount(ctx, i+1) {
			t.Fatalf("send %d: the worker was not woken by another client's send", i+1)
		}
	}
	// SendTx in the sender's own transaction: woken at commit by default, and
	// by Wake after the commit with DeferWake.
	for i, deferWake := range []bool{false, true} {
		tx, err := b.db.Begin(b.ctx, sender.Driver())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sender.SendTx(b.ctx, tx, []string{"r1"}, msg(fmt.Sprintf("tx%d", i)), &oncepush.SendOptions{DeferWake: deferWake}); err != nil {
			t.Fatal(err)
		}
		if err := b.db.Commit(b.ctx, tx); err != nil {
			t.Fatal(err)
		}
		if deferWake {
			sender.Wake()
		}
		if !b.fcm.WaitCount(ctx, 4+i) {
			t.Fatalf("SendTx (DeferWake %v): the worker was not woken by its commit", deferWake)
		}
	}
	wantSends(t, b.fcm, 5, "every wake-up through the listener")
}

// listenTap is a driver whose listener reports each wake-up it hands the
// engine, after handing it.
type listenTap[TTx any] struct {
	driver.Driver[TTx]
	woke func()
}

func (d *listenTap[TTx]) Listen(ctx context.Context, wake func()) error {
	return d.Driver.Listen(ctx, func() {
		wake()
		d.woke()
	})
}

// wakeQuiet tells when a started client's workers are quiet after its
// listener's latest wake-up: each has reported idle since, with no wake-up
// pending, so none will run again until the next wake-up.
type wakeQuiet struct {
	mu       sync.Mutex
	listened bool
	quiet    map[int]bool
	changes  enginetest.Counter // a wake-up or an idle report
}

func (q *wakeQuiet) listenerWoke() {
	q.mu.Lock()
	q.listened, q.quiet = true, map[int]bool{}
	q.mu.Unlock()
	q.changes.Add()
}

func (q *wakeQuiet) idle(worker int, wakePending bool) {
	q.mu.Lock()
	if q.listened {
		q.quiet[worker] = !wakePending
	}
	q.mu.Unlock()
	q.changes.Add()
}

// allQuiet reports whether the listener has woken the workers and all of
// them are quiet since.
func (q *wakeQuiet) allQuiet(workers int) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, quiet := range q.quiet {
		if quiet {
			n++
		}
	}
	return q.listened && n == workers
}

// wait blocks until the listener has woken the workers and all of them are
// quiet, or ctx ends.
func (q *wakeQuiet) wait(ctx context.Context, workers int) bool {
	for {
		seen := q.changes.Count() // before the look: a change after it ends the Wait
		if q.allQuiet(workers) {
			return true
		}
		if !q.changes.Wait(ctx, seen+1) {
			return false
		}
	}
}

func (q *wakeQuiet) String() string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return fmt.Sprintf("listener woke: %v, quiet workers: %v", q.listened, q.quiet)
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
