package oncepush

import (
	"log/slog"
	"time"
)

// Observer receives the engine's events, for metrics. Its methods are called
// from the engine's goroutines, concurrently, on the delivery path: they must
// be quick and must not block. Embed NopObserver to implement only some.
type Observer interface {
	// Queued: a send wrote deliveries (and found duplicates: dedup hits). For
	// SendTx it is called when the rows are written, before the caller's commit;
	// for Send and SendToDevices after the commit that wrote them, once however
	// many times the database made the engine write them (a group aborted for a
	// deadlock is written again).
	Queued(queued, duplicates int)
	// Submitted: one provider call ended with this outcome after latency.
	Submitted(t Transport, o Outcome, latency time.Duration)
	// Ambiguous: a device attempt became ambiguous — an answer lost after the
	// request was written, or a run that ended without recording (recovered).
	Ambiguous(t Transport, recovered bool)
	// Finished: a delivery reached a final status (after the commit that made it so).
	Finished(s DeliveryStatus)
	// LeaseLost: a record found deliveries whose lease another run had taken.
	LeaseLost(deliveries int)
}

// NopObserver ignores every event.
type NopObserver struct{}

// Queued implements Observer.
func (NopObserver) Queued(int, int) {}

// Submitted implements Observer.
func (NopObserver) Submitted(Transport, Outcome, time.Duration) {}

// Ambiguous implements Observer.
func (NopObserver) Ambiguous(Transport, bool) {}

// Finished implements Observer.
func (NopObserver) Finished(DeliveryStatus) {}

// LeaseLost implements Observer.
func (NopObserver) LeaseLost(int) {}

// guardedObserver calls an Observer so that its panic is logged and goes no
// further: metrics code must never change an outcome, fail a send or stop a run.
type guardedObserver struct {
	o   Observer
	log *slog.Logger
}

func (g guardedObserver) call(event string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			g.log.Error("observer panicked; event dropped", slog.String("event", event), slog.Any("panic", r))
		}
	}()
	fn()
}

func (g guardedObserver) Queued(q, d int) { g.call("queued", func() { g.o.Queued(q, d) }) }
func (g guardedObserver) Submitted(t Transport, o Outcome, l time.Duration) {
	g.call("submitted", func() { g.o.Submitted(t, o, l) })
}
func (g guardedObserver) Ambiguous(t Transport, rec bool) {
	g.call("ambiguous", func() { g.o.Ambiguous(t, rec) })
}
func (g guardedObserver) Finished(s DeliveryStatus) { g.call("finished", func() { g.o.Finished(s) }) }
func (g guardedObserver) LeaseLost(n int)           { g.call("lease_lost", func() { g.o.LeaseLost(n) }) }

// SendGroup implements SendGroupObserver when the observer does.
func (g guardedObserver) SendGroup(n int) {
	if o, ok := g.o.(SendGroupObserver); ok {
		g.call("send_group", func() { o.SendGroup(n) })
	}
}
