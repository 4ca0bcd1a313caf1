// Package enginetest holds the delivery engine's test hooks: callbacks at the
// moments a concurrency test names — a claim committed, a send about to start,
// a record about to commit — so the test waits for that exact moment instead
// of sleeping and hoping it happened.
//
// A test attaches Hooks to the context of the call that runs the engine
// (Client.Start, Drain or RunOnce) with WithHooks, as net/http/httptrace
// attaches a ClientTrace to a request; Stop uses the hooks of the Start it
// stops. The engine looks them up once per run and calls them through methods
// that do nothing on a nil *Hooks or an unset field, so without hooks a run
// costs one context lookup. Hooks run on the engine's goroutines, some
// concurrently (OnSendStarting); one that blocks holds the engine at its
// moment. See docs/architecture.md, "Test hooks".
package enginetest

import (
	"context"
	"sync"
	"time"
)

// Hooks are the engine's test hooks. Every field may be nil.
type Hooks struct {
	// OnClaimCommitted is called after a claim that leased deliveries has
	// committed, before anything is marked or sent: leased deliveries, of
	// which pairs (delivery, device) are to be sent.
	OnClaimCommitted func(leased, pairs int)
	// OnSendStarting is called immediately before a provider call, after the
	// engine's last check that the send may start. Concurrent sends call it
	// concurrently.
	OnSendStarting func(deliveryID int64)
	// OnWaitingForSlots is called when a batch has pairs to send and waits
	// because the process's in-flight window (Config.ConcurrentSends per
	// transport, shared by every run of the client) has too little room,
	// with the number of its pairs still queued.
	OnWaitingForSlots func(queued int)
	// OnRecordCommitting is called inside the record's transaction once its
	// statements have run, just before COMMIT, with the number of deliveries
	// recorded. The transaction, and the rows it locked, stay open until it
	// returns.
	OnRecordCommitting func(deliveries int)
	// OnRecordFailed is called when a try of the record failed: the record
	// pauses and tries again, or, when last, gives up.
	OnRecordFailed func(try int, err error, last bool)
	// RecordPause, when set, replaces the real timer of the record's pause
	// of length d between tries: the pause ends when the returned channel
	// yields — or when the run's send context ends, whichever comes first.
	RecordPause func(d time.Duration) <-chan time.Time
	// OnWorkerIdle is called when a started client's worker (0 to
	// Config.Workers − 1) has finished its runs and waits for a wake-up or
	// its poll; wakePending says a wake-up is already waiting for it, so it
	// will run again at once.
	OnWorkerIdle func(worker int, wakePending bool)
	// OnStopWaiting is called when Stop has stopped claiming and waits for
	// the sends in flight.
	OnStopWaiting func()
	// OnCleanupDone is called when a started client's periodic cleanup round
	// has ended (whether or not it held the lock, or failed).
	OnCleanupDone func()
	// OnSendQueued is called when a Send or SendToDevices has queued its
	// write for a grouped commit, with the number of sends queued, its own
	// included. Hooks of the send's context.
	OnSendQueued func(queued int)
	// OnGroupTaking is called when a group's leader is about to take the
	// queued sends; while it blocks, sends keep queueing. Hooks of the
	// leader's context.
	OnGroupTaking func()
	// OnGroupCommitting is called inside the transaction of a group of two
	// or more sends, once its statements have run, just before COMMIT, with
	// the number of sends in it. Hooks of the leader's context.
	OnGroupCommitting func(members int)
	// OnSendRetrying is called when the database aborted the write of a
	// group of sends, or of a send written alone, to break a deadlock or for
	// a serialization failure (driver.ConflictDetector), before the write is
	// tried again: try is the try that failed (1 = the first). Hooks of the
	// leader's context.
	OnSendRetrying func(try int, err error)
	// OnWriteRetrying is the same for the engine's other writes of its own
	// (a cancel, a campaign change, a registration, a recipient's deletion),
	// with op naming the write. Hooks of the caller's context.
	OnWriteRetrying func(op string, try int, err error)
	// OnCampaignLocking is called just before a campaign operation (start,
	// cancel, an expansion step, …) begins the transaction in which it
	// locks the campaign's row (on SQLite, BEGIN is where it waits for
	// another writer); OnCampaignLocked just after the lock, with the
	// status it read under it. The lock is held while OnCampaignLocked runs.
	OnCampaignLocking func(campaignID int64)
	OnCampaignLocked  func(campaignID int64, status string)
	// OnCampaignBatch is called inside an expansion batch's transaction,
	// once its statements have run and before COMMIT, with the number of
	// deliveries it wrote; an error it returns fails the batch, which rolls
	// back (a test's injected failure). Hooks of the expanding call's
	// context (Client.Start, ExpandCampaigns).
	OnCampaignBatch func(campaignID int64, written int) error
}

type hooksKey struct{}

// WithHooks returns a context that carries h to the engine call it is given to.
func WithHooks(ctx context.Context, h *Hooks) context.Context {
	return context.WithValue(ctx, hooksKey{}, h)
}

// From returns the hooks ctx carries, or nil.
func From(ctx context.Context) *Hooks {
	h, _ := ctx.Value(hooksKey{}).(*Hooks)
	return h
}

// ClaimCommitted calls OnClaimCommitted if set.
func (h *Hooks) ClaimCommitted(leased, pairs int) {
	if h != nil && h.OnClaimCommitted != nil {
		h.OnClaimCommitted(leased, pairs)
	}
}

// SendStarting calls OnSendStarting if set.
func (h *Hooks) SendStarting(deliveryID int64) {
	if h != nil && h.OnSendStarting != nil {
		h.OnSendStarting(deliveryID)
	}
}

// WaitingForSlots calls OnWaitingForSlots if set.
func (h *Hooks) WaitingForSlots(queued int) {
	if h != nil && h.OnWaitingForSlots != nil {
		h.OnWaitingForSlots(queued)
	}
}

// RecordCommitting calls OnRecordCommitting if set.
func (h *Hooks) RecordCommitting(deliveries int) {
	if h != nil && h.OnRecordCommitting != nil {
		h.OnRecordCommitting(deliveries)
	}
}

// RecordFailed calls OnRecordFailed if set.
func (h *Hooks) RecordFailed(try int, err error, last bool) {
	if h != nil && h.OnRecordFailed != nil {
		h.OnRecordFailed(try, err, last)
	}
}

// Pause returns the channel that ends a record pause of d: RecordPause's if
// set, else a real timer's.
func (h *Hooks) Pause(d time.Duration) <-chan time.Time {
	if h != nil && h.RecordPause != nil {
		return h.RecordPause(d)
	}
	return time.After(d)
}

// WorkerIdle calls OnWorkerIdle if set.
func (h *Hooks) WorkerIdle(worker int, wakePending bool) {
	if h != nil && h.OnWorkerIdle != nil {
		h.OnWorkerIdle(worker, wakePending)
	}
}

// StopWaiting calls OnStopWaiting if set.
func (h *Hooks) StopWaiting() {
	if h != nil && h.OnStopWaiting != nil {
		h.OnStopWaiting()
	}
}

// CleanupDone calls OnCleanupDone if set.
func (h *Hooks) CleanupDone() {
	if h != nil && h.OnCleanupDone != nil {
		h.OnCleanupDone()
	}
}

// SendQueued calls OnSendQueued if set.
func (h *Hooks) SendQueued(queued int) {
	if h != nil && h.OnSendQueued != nil {
		h.OnSendQueued(queued)
	}
}

// GroupTaking calls OnGroupTaking if set.
func (h *Hooks) GroupTaking() {
	if h != nil && h.OnGroupTaking != nil {
		h.OnGroupTaking()
	}
}

// GroupCommitting calls OnGroupCommitting if set.
func (h *Hooks) GroupCommitting(members int) {
	if h != nil && h.OnGroupCommitting != nil {
		h.OnGroupCommitting(members)
	}
}

// SendRetrying calls OnSendRetrying if set.
func (h *Hooks) SendRetrying(try int, err error) {
	if h != nil && h.OnSendRetrying != nil {
		h.OnSendRetrying(try, err)
	}
}

// WriteRetrying calls OnWriteRetrying if set.
func (h *Hooks) WriteRetrying(op string, try int, err error) {
	if h != nil && h.OnWriteRetrying != nil {
		h.OnWriteRetrying(op, try, err)
	}
}

// CampaignLocking calls OnCampaignLocking if set.
func (h *Hooks) CampaignLocking(id int64) {
	if h != nil && h.OnCampaignLocking != nil {
		h.OnCampaignLocking(id)
	}
}

// CampaignLocked calls OnCampaignLocked if set.
func (h *Hooks) CampaignLocked(id int64, status string) {
	if h != nil && h.OnCampaignLocked != nil {
		h.OnCampaignLocked(id, status)
	}
}

// CampaignBatch calls OnCampaignBatch if set.
func (h *Hooks) CampaignBatch(id int64, written int) error {
	if h != nil && h.OnCampaignBatch != nil {
		return h.OnCampaignBatch(id, written)
	}
	return nil
}

// Counter counts the calls of a hook and lets a test wait for the n-th: give
// its Add to a hook (directly, or from a hook that does more).
type Counter struct {
	mu   sync.Mutex
	n    int
	next chan struct{} // closed at the next Add
}

// Add counts one call.
func (c *Counter) Add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.next != nil {
		close(c.next)
		c.next = nil
	}
}

// Count returns the calls counted so far.
func (c *Counter) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Wait blocks until at least n calls were counted or ctx ends, and reports
// whether it got there.
func (c *Counter) Wait(ctx context.Context, n int) bool {
	for {
		c.mu.Lock()
		if c.n >= n {
			c.mu.Unlock()
			return true
		}
		if c.next == nil {
			c.next = make(chan struct{})
		}
		next := c.next
		c.mu.Unlock()
		select {
		case <-next:
		case <-ctx.Done():
			return false
		}
	}
}
