package drivertest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/enginetest"
)

// testPipelineClaimsWhileSending: a run claims its next batch while earlier
// batches' sends are in flight, as long as fewer than ConcurrentSends of its
// pairs are unfinished and fewer than PipelineDepth batches are unrecorded;
// every delivery is still sent once and recorded. Batches of 2 single-device
// deliveries; the provider holds every send until the test lets it go, so
// each claim is observed against exactly what is in flight. Two batches are
// in flight before the run stops claiming: with a window of 4 because their 4
// pairs fill it, with a depth of 2 because they are 2 batches.
func testPipelineClaimsWhileSending[TTx any](t *testing.T, h Harness[TTx]) {
	for _, c := range []struct{ window, depth int }{{4, 3}, {100, 2}} {
		t.Run(fmt.Sprintf("window%d_depth%d", c.window, c.depth), func(t *testing.T) {
			pipelineClaims(t, h, c.window, c.depth)
		})
	}
}

func pipelineClaims[TTx any](t *testing.T, h Harness[TTx], window, depth int) {
	const n, held = 12, 4
	b := setup(t, h, func(c *oncepush.Config) {
		c.BatchSize, c.ConcurrentSends, c.PipelineDepth = 2, window, depth
	})
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("r%02d", i))
		b.register(names[i], oncepush.TransportFCM)
	}
	res := b.send(names, msg("piped"), nil)
	ds, err := b.client.MessageDeliveries(b.ctx, res.MessageID, 0, n)
	if err != nil || len(ds) != n {
		t.Fatalf("deliveries: %d, %v", len(ds), err)
	}
	// Claimed in id order (one message, one due time): releasing the
	// lowest ids ends the earliest batch.
	ids := make([]int64, n)
	for i, d := range ds {
		ids[i] = d.ID
	}
	slices.Sort(ids)
	var gate sync.Mutex
	opened := sync.NewCond(&gate)
	var upTo int64 // sends of deliveries up to this id may answer
	release := func(k int) {
		gate.Lock()
		upTo = ids[k-1]
		gate.Unlock()
		opened.Broadcast()
	}
	t.Cleanup(func() { release(n) }) // a failed test leaves no send held
	var started enginetest.Counter
	b.fcm.Answer(func(ctx context.Context, s *oncepush.Submission) oncepush.Result {
		started.Add()
		gate.Lock()
		for s.DeliveryID > upTo {
			opened.Wait()
		}
		gate.Unlock()
		return oncepush.Accepted("ok")
	})
	var mu sync.Mutex
	var claims, records int
	var overDepth []int
	hooks := &enginetest.Hooks{
		OnClaimCommitted: func(int, int) {
			mu.Lock()
			defer mu.Unlock()
			if unrecorded := claims - records; unrecorded >= depth {
				overDepth = append(overDepth, unrecorded)
			}
			claims++
		},
		OnRecordCommitting: func(int) {
			mu.Lock()
			records++
			mu.Unlock()
		},
	}
	claimsNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return claims
	}
	done := make(chan oncepush.RunStats, 1)
	go func() {
		st, err := b.client.RunOnce(enginetest.WithHooks(b.ctx, hooks))
		if err != nil {
			t.Errorf("RunOnce: %v", err)
		}
		done <- st
	}()
	// Not reached by a run that waits for its batch to be recorded before
	// claiming: the bound only ends a test that already failed.
	wait, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if !started.Wait(wait, held) {
		t.Fatalf("%d sends started, %d claims: the run did not claim a second batch while the first was in flight", started.Count(), claimsNow())
	}
	if got := claimsNow(); got != 2 {
		t.Fatalf("%d claims with %d sends in flight; want 2", got, held)
	}
	release(2) // the first batch's sends end: room for a third
	if !started.Wait(wait, held+2) {
		t.Fatalf("%d sends started after the first batch's ended: no third claim", started.Count())
	}
	release(n)
	st := <-done
	if st.Submitted != n || st.Released != 0 || st.Batches != n/2 {
		t.Fatalf("run stats %+v; want %d batches, %d submitted, none released", st, n/2, n)
	}
	if len(overDepth) > 0 {
		t.Fatalf("claims made with %v batches unrecorded; the depth is %d", overDepth, depth)
	}
	wantSends(t, b.fcm, n, "each delivery once")
	for _, r := range names {
		wantStatus(t, b.only(r), oncepush.StatusSent)
	}
}

// testPipelineSharesTheWindow: ConcurrentSends bounds a run's sends in flight
// per transport across all its batches, not per batch. Batches of 3 into a
// window of 4: the first batch's 3 sends are held; the second batch, claimed
// meanwhile, has 1 slot, less than half a window, so it marks nothing; once
// one send ends it marks a wave of 2 (with a window of its own it would mark
// all 3 at once, 6 in flight).
func testPipelineSharesTheWindow[TTx any](t *testing.T, h Harness[TTx]) {
	const n, window = 6, 4
	b := setup(t, h, nil)
	marks := &markLog[TTx]{Driver: b.db.Driver(t, 0)}
	client := b.newClient(marks, func(c *oncepush.Config) {
		c.Providers = []oncepush.Provider{b.fcm}
		c.BatchSize, c.ConcurrentSends, c.PipelineDepth = 3, window, 4
	})
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("r%02d", i))
		b.register(names[i], oncepush.TransportFCM)
	}
	b.send(names, msg("shared"), nil)

	release := make(chan struct{}, n)
	t.Cleanup(func() {
		for range n {
			release <- struct{}{}
		}
	})
	var mu sync.Mutex
	var now, most int
	var started, claims enginetest.Counter
	b.fcm.Answer(func(ctx context.Context, s *oncepush.Submission) oncepush.Result {
		mu.Lock()
		now++
		most = max(most, now)
		mu.Unlock()
		started.Add()
		<-release
		mu.Lock()
		now--
		mu.Unlock()
		return oncepush.Accepted("ok")
	})
	done := make(chan oncepush.RunStats, 1)
	go func() {
		st, err := client.RunOnce(enginetest.WithHooks(b.ctx, &enginetest.Hooks{OnClaimCommitted: func(int, int) { claims.Add() }}))
		if err != nil {
			t.Errorf("RunOnce: %v", err)
		}
		done <- st
	}()
	wait, cancel := context.WithTimeout(b.ctx, time.Minute) // ends only a test that already failed
	defer cancel()
	if !started.Wait(wait, 3) || !claims.Wait(wait, 2) {
		t.Fatalf("%d sends started, %d claims; want the first batch in flight and the second claimed", started.Count(), claims.Count())
	}
	release <- struct{}{}
	if !marks.n.Wait(wait, 2) {
		t.Fatalf("marks %v: the second batch marked nothing once a send ended", marks.sizes())
	}
	if got := marks.sizes(); !slices.Equal(got[:2], []int{3, 2}) {
		t.Fatalf("marks of %v pairs; want the first batch's 3, then 2 of the second's once two slots of the window were free", got)
	}
	for range n - 1 {
		release <- struct{}{}
	}
	if st := <-done; st.Submitted != n {
		t.Fatalf("run stats %+v; want %d submitted", st, n)
	}
	if most > window {
		t.Fatalf("%d sends in flight at once; the window is %d", most, window)
	}
	wantSends(t, b.fcm, n, "each delivery once")
}

// testConcurrentSendsBoundsTheProcess: ConcurrentSends bounds the sends one
// client has in flight per transport, whatever its number of workers: the
// window is the process's, shared by every run, so a process killed leaves
// at most ConcurrentSends pairs per transport in flight, and the provider
// never sees more from one process. Four workers each claim a batch of 3
// recipients with an FCM and an APNs device into a window of 3; the
// providers hold every send. The first batch fills both transports'
// windows; the other three must wait for slots (the hook says so) rather
// than start theirs, as four windows of their own would.
func testConcurrentSendsBoundsTheProcess[TTx any](t *testing.T, h Harness[TTx]) {
	const workers, window = 4, 3
	b := setup(t, h, func(c *oncepush.Config) {
		c.Workers, c.BatchSize, c.ConcurrentSends = workers, window, window
	})
	var names []string
	for i := range workers * window {
		names = append(names, fmt.Sprintf("r%02d", i))
		b.register(names[i], oncepush.TransportFCM, oncepush.TransportAPNs)
	}
	release := make(chan struct{})
	var releaseOnce sync.Once
	var mu sync.Mutex
	inFlight, most := map[oncepush.Transport]int{}, map[oncepush.Transport]int{}
	changed := make(chan struct{}, 1)
	signal := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	var started enginetest.Counter
	hold := func(tr oncepush.Transport) func(context.Context, *oncepush.Submission) oncepush.Result {
		return func(context.Context, *oncepush.Submission) oncepush.Result {
			mu.Lock()
			inFlight[tr]++
			most[tr] = max(most[tr], inFlight[tr])
			mu.Unlock()
			started.Add()
			signal()
			<-release
			mu.Lock()
			inFlight[tr]--
			mu.Unlock()
			return oncepush.Accepted("ok")
		}
	}
	b.fcm.Answer(hold(oncepush.TransportFCM))
	b.apns.Answer(hold(oncepush.TransportAPNs))
	var waiting enginetest.Counter
	hooks := &enginetest.Hooks{OnWaitingForSlots: func(int) { waiting.Add(); signal() }}
	b.send(names, msg("bounded"), nil)
	if err := b.client.Start(enginetest.WithHooks(b.ctx, hooks)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.client.Stop(context.WithoutCancel(b.ctx)) })
	// Before the Stop above: a failed test leaves no send held.
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })

	// Until the three other batches wait for slots with the first batch's
	// sends held, or a send beyond the window starts.
	wait, cancel := context.WithTimeout(b.ctx, time.Minute) // ends only a test that already failed
	defer cancel()
	for {
		mu.Lock()
		fcm, apns := most[oncepush.TransportFCM], most[oncepush.TransportAPNs]
		mu.Unlock()
		if fcm > window || apns > window {
			t.Fatalf("%d FCM and %d APNs sends in flight at once from one client of %d workers; ConcurrentSends is %d per transport",
				fcm, apns, workers, window)
		}
		if fcm == window && apns == window && waiting.Count() >= workers-1 {
			break
		}
		select {
		case <-changed:
		case <-wait.Done():
			t.Fatalf("%d sends started (%d FCM, %d APNs in flight at most), %d waits for slots; want the first batch's %d in flight and %d batches waiting",
				started.Count(), fcm, apns, waiting.Count(), 2*window, workers-1)
		}
	}
	releaseOnce.Do(func() { close(release) })
	if !started.Wait(wait, 2*len(names)) {
		t.Fatalf("%d of %d sends started once the first were released", started.Count(), 2*len(names))
	}
	if err := b.client.Stop(b.ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for tr, n := range most {
		if n > window {
			t.Fatalf("%d %s sends in flight at once; ConcurrentSends is %d", n, tr, window)
		}
	}
	wantSends(t, b.fcm, len(names), "each FCM pair once")
	wantSends(t, b.apns, len(names), "each APNs pair once")
	for _, r := range names {
		wantStatus(t, b.only(r), oncepush.StatusSent)
	}
}

// markLog records the size of every wave a client marks sending.
type markLog[TTx any] struct {
	driver.Driver[TTx]
	mu   sync.Mutex
	size []int
	n    enginetest.Counter
}

func (d *markLog[TTx]) Exec() driver.Executor {
	return &markExec[TTx]{Executor: d.Driver.Exec(), log: d}
}

func (d *markLog[TTx]) sizes() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.size)
}

type markExec[TTx any] struct {
	driver.Executor
	log *markLog[TTx]
}

func (e *markExec[TTx]) DeviceAttemptMarkSending(ctx context.Context, p *driver.DeviceAttemptMarkSendingParams) ([]driver.MarkedPair, error) {
	e.log.mu.Lock()
	e.log.size = append(e.log.size, len(p.Pairs))
	e.log.mu.Unlock()
	e.log.n.Add()
	return e.Executor.DeviceAttemptMarkSending(ctx, p)
}

// testPipelineTakesWorkQueuedMidRun: a send queued while a run's batch is
// still in flight is claimed by that run when the wake-up comes, not once the
// batch has finished: one worker, the first notification's send held by the
// provider, the second must reach the provider meanwhile.
func testPipelineTakesWorkQueuedMidRun[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, func(c *oncepush.Config) { c.Workers = 1 }, "first", "second")
	held := make(chan struct{})
	var started enginetest.Counter
	b.fcm.Answer(func(ctx context.Context, s *oncepush.Submission) oncepush.Result {
		started.Add()
		if s.Title == "first" {
			<-held
		}
		return oncepush.Accepted("ok")
	})
	if err := b.client.Start(b.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.client.Stop(context.WithoutCancel(b.ctx)) })
	t.Cleanup(func() { // before the Stop above: a failed test leaves no send held
		select {
		case <-held:
		default:
			close(held)
		}
	})
	wait, cancel := context.WithTimeout(b.ctx, time.Minute) // ends only a test that already failed
	defer cancel()
	b.send([]string{"first"}, msg("first"), nil)
	if !started.Wait(wait, 1) {
		t.Fatal("the first send never started")
	}
	b.send([]string{"second"}, msg("second"), nil)
	if !started.Wait(wait, 2) {
		t.Fatal("the second notification waited for the first's held send: the run did not claim when woken")
	}
	close(held)
	if err := b.client.Stop(b.ctx); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, b.only("first"), oncepush.StatusSent)
	wantStatus(t, b.only("second"), oncepush.StatusSent)
}
