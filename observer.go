package oncepush

import "time"

// Observer receives the engine's events, for metrics. Its methods are called
// from the engine's goroutines, concurrently, on the delivery path: they must
// be quick and must not block. Embed NopObserver to implement only some.
type Observer interface {
	// Queued: a send wrote deliveries (and found duplicates: dedup hits). For
	// SendTx it is called when the rows are written, before the caller's commit.
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
