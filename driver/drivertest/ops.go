package drivertest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/enginetest"
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

func testDeleteRecipientMidRun[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "gone")
	b.send([]string{"gone"}, msg("bye"), nil)
	finish := abandon(t, b, b.client, b.fcm, oncepush.Accepted("late"))
	if err := b.client.DeleteRecipient(b.ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	finish()
	if ds := b.deliveries("gone"); len(ds) != 0 {
		t.Fatalf("record resurrected a deleted recipient's deliveries: %+v", ds)
	}
	if !b.logs.has("deleted while it was being sent") {
		t.Fatalf("the deletion was not logged plainly:\n%s", b.logs.all())
	}
	if b.logs.has("lease lost") {
		t.Fatal("a deleted recipient was logged as a lost lease")
	}
}

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

// countingObserver counts the engine's events.
type countingObserver struct {
	mu         sync.Mutex
	queued     int
	dupes      int
	submitted  map[oncepush.Outcome]int
	ambiguous  int
	recovered  int
	finished   map[oncepush.DeliveryStatus]int
	leaseLost  int
	maxLatency time.Duration
}

func (o *countingObserver) Queued(q, d int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.queued += q
	o.dupes += d
}

func (o *countingObserver) Submitted(_ oncepush.Transport, out oncepush.Outcome, lat time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.submitted[out]++
	o.maxLatency = max(o.maxLatency, lat)
}

func (o *countingObserver) Ambiguous(_ oncepush.Transport, recovered bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if recovered {
		o.recovered++
	} else {
		o.ambiguous++
	}
}

func (o *countingObserver) Finished(s oncepush.DeliveryStatus) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished[s]++
}

func (o *countingObserver) LeaseLost(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.leaseLost += n
}

func testObserver[TTx any](t *testing.T, h Harness[TTx]) {
	obs := &countingObserver{submitted: map[oncepush.Outcome]int{}, finished: map[oncepush.DeliveryStatus]int{}}
	b := setup(t, h, func(c *oncepush.Config) { c.Observer = obs }, "ok")
	b.register("lost", oncepush.TransportAPNs)
	b.apns.AnswerAll(oncepush.Result{Outcome: oncepush.OutcomeMaybeSent, Text: "lost"})
	opts := &oncepush.SendOptions{DedupKey: "k", Ambiguity: oncepush.AmbiguityAtMostOnce}
	b.send([]string{"ok", "lost", "nobody"}, msg("x"), opts)
	b.send([]string{"ok"}, msg("x"), opts)
	b.drain()
	// A run that dies: its pair is recovered as ambiguous by the next claim.
	b.register("late", oncepush.TransportRuStore)
	b.send([]string{"late"}, msg("y"), nil)
	finish := abandon(t, b, b.client, b.rus, oncepush.Accepted("late"))
	b.clock.Advance(b.client.Config().Lease + time.Second)
	other := b.newClient(b.db.Driver(t, 0), func(c *oncepush.Config) { c.Providers = []oncepush.Provider{b.rus}; c.Observer = obs })
	b.rus.Answer(nil)
	drain(t, other)
	finish() // its record finds the lease taken

	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.queued != 4 || obs.dupes != 1 {
		t.Errorf("queued %d, duplicates %d; want 4 and 1", obs.queued, obs.dupes)
	}
	if obs.submitted[oncepush.OutcomeAccepted] != 3 || obs.submitted[oncepush.OutcomeMaybeSent] != 1 {
		t.Errorf("submitted %v", obs.submitted)
	}
	if obs.ambiguous != 1 || obs.recovered != 1 {
		t.Errorf("ambiguous %d, recovered %d; want 1 and 1", obs.ambiguous, obs.recovered)
	}
	if want := map[oncepush.DeliveryStatus]int{oncepush.StatusSent: 2, oncepush.StatusAmbiguous: 1, oncepush.StatusNoDevices: 1}; !maps.Equal(obs.finished, want) {
		t.Errorf("finished %v, want %v", obs.finished, want)
	}
	if obs.leaseLost != 1 {
		t.Errorf("lease lost %d, want 1", obs.leaseLost)
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
