package drivertest

import (
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
)

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
