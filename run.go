package oncepush

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"

	"github.com/oncepush/oncepush/internal/enginetest"
	"github.com/oncepush/oncepush/internal/failpoint"
)

// A run claims, sends and records batches until its budget is spent or nothing
// is due: claim.go leases a batch and decides what needs no provider,
// submit.go marks pairs sending in waves just before their calls and makes
// them, record.go writes what the providers said. Each phase's decisions are
// pure functions in its _plan.go neighbour (plan.go for what they share), so
// they are tested without a database. See docs/architecture.md.

// RunStats says what a run did.
type RunStats struct {
	// Batches is the number of claims that leased something.
	Batches int
	// Claimed is the number of deliveries leased.
	Claimed int
	// Submitted is the number of provider calls made.
	Submitted int
	// Released is the number of (delivery, device) pairs left unsent by the
	// budget, a stop, a lost lease, a provider-wide throttle, or (a
	// campaign's) their token in flight in another delivery of the
	// campaign; they are due again.
	Released int
	// BudgetSpent is true when the run ended on its budget rather than on an
	// empty claim: work may be left.
	BudgetSpent bool
}

func (s *RunStats) add(o RunStats) {
	s.Batches += o.Batches
	s.Claimed += o.Claimed
	s.Submitted += o.Submitted
	s.Released += o.Released
	s.BudgetSpent = o.BudgetSpent
}

// run drains batches until the budget is spent or nothing is due. claimCtx
// stops claiming and starting sends; sendCtx aborts sends in flight. A run
// that claimed something is logged (logRun).
func (c *Client[TTx]) run(claimCtx, sendCtx context.Context, wake <-chan struct{}) (RunStats, error) {
	start, tally := time.Now(), runTally{}
	stats, err := c.runBatches(claimCtx, sendCtx, wake, tally)
	c.logRun(sendCtx, stats, tally, time.Since(start))
	return stats, err
}

// runBatches claims batches until the budget is spent or nothing is due,
// pipelined (D65): each batch sends and records on a goroutine of its own,
// and the next claim is made as soon as the run has fewer than
// ConcurrentSends unfinished pairs and fewer than PipelineDepth batches.
// After a claim that found less than a batch, it claims again only if woken
// (wake; nil for none) while batches are still in flight, so work queued
// meanwhile does not wait for them. It returns once every batch it started
// has recorded.
func (c *Client[TTx]) runBatches(claimCtx, sendCtx context.Context, wake <-chan struct{}, tally runTally) (RunStats, error) {
	hooks := enginetest.From(claimCtx)
	deadline := c.clockNow().Add(c.cfg.RunBudget)
	p := &pipeline{changed: make(chan struct{}, 1), tally: tally}
	var claimErr error
	short := false // the last claim found less than a batch
	for claimCtx.Err() == nil {
		if !p.waitForRoom(claimCtx, c.cfg.ConcurrentSends, c.cfg.PipelineDepth) {
			break // a batch released pairs or failed to record
		}
		if short && !p.waitForWake(claimCtx, wake) {
			break // nothing new while the last batches finished
		}
		if !c.clockNow().Before(deadline) {
			p.budgetSpent()
			break
		}
		b, err := c.claim(claimCtx)
		if err != nil {
			claimErr = err
			break
		}
		short = b.claimed < c.cfg.BatchSize
		if b.claimed == 0 {
			continue
		}
		b.hooks, b.window = hooks, c.window
		failpoint.Hit(failpoint.ClaimCommitted)
		hooks.ClaimCommitted(b.claimed, len(b.pairs))
		p.claimed(b)
		if len(b.pairs) > 0 {
			p.wg.Go(func() { p.finished(c.sendAndRecord(claimCtx, sendCtx, b, deadline, p.sent)) })
		}
	}
	p.wg.Wait()
	stats := p.stats
	if stats.Batches > 0 && (stats.Released > 0 || !c.clockNow().Before(deadline)) {
		stats.BudgetSpent = true
	}
	return stats, cmp.Or(claimErr, p.err)
}

// sendAndRecord sends a batch's pairs and records their outcomes; sent is
// told of pairs as their sends end, and of those that will not start once
// the sends are over.
func (c *Client[TTx]) sendAndRecord(claimCtx, sendCtx context.Context, b *batch, deadline time.Time, sent func(int)) batchResult {
	launched := c.sendBatch(claimCtx, sendCtx, b, deadline, sent)
	sent(len(b.pairs) - launched) // never started: no longer open
	var r batchResult
	for _, p := range b.pairs {
		if p.started && !p.late {
			r.submitted++
		} else {
			r.released++
		}
	}
	r.tally = runTally{}
	r.err = c.record(sendCtx, b, r.tally)
	return r
}

// batchResult is what one batch of a run did.
type batchResult struct {
	submitted, released int
	tally               runTally
	err                 error
}

// pipeline is a run's state across its batches in flight.
type pipeline struct {
	wg      sync.WaitGroup
	changed chan struct{} // a pair finished or a batch ended; capacity 1

	mu       sync.Mutex
	open     int // claimed pairs whose send has not ended, of batches not yet recorded
	inFlight int // batches sending or recording
	stats    RunStats
	tally    runTally
	err      error // the first record that failed
}

func (p *pipeline) signal() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// waitForRoom waits until the run may claim again: fewer than maxOpen
// unfinished pairs and fewer than maxBatches batches in flight. It reports
// false when the run must claim no more — a batch released pairs (a stop, a
// throttle, a lost lease: a new run takes over) or failed to record — or the
// run was stopped.
func (p *pipeline) waitForRoom(ctx context.Context, maxOpen, maxBatches int) bool {
	for {
		p.mu.Lock()
		stop := p.err != nil || p.stats.Released > 0
		room := p.inFlight == 0 || (p.open < maxOpen && p.inFlight < maxBatches)
		p.mu.Unlock()
		switch {
		case stop:
			return false
		case room:
			return true
		}
		select {
		case <-p.changed:
		case <-ctx.Done():
			return false
		}
	}
}

// waitForWake waits for a wake-up while the run still has batches in
// flight, and reports whether one came; false once none is in flight, a
// batch released pairs or failed to record, or the run was stopped.
func (p *pipeline) waitForWake(ctx context.Context, wake <-chan struct{}) bool {
	for {
		p.mu.Lock()
		over := p.inFlight == 0 || p.err != nil || p.stats.Released > 0
		p.mu.Unlock()
		if over {
			return false
		}
		select {
		case <-wake:
			return true
		case <-p.changed:
		case <-ctx.Done():
			return false
		}
	}
}

func (p *pipeline) budgetSpent() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.BudgetSpent = true
}

// claimed counts a batch the run leased.
func (p *pipeline) claimed(b *batch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Batches++
	p.stats.Claimed += b.claimed
	if len(b.pairs) > 0 {
		p.open += len(b.pairs)
		p.inFlight++
	}
}

// sent counts n pairs that are no longer open: their sends ended, or will
// never start.
func (p *pipeline) sent(n int) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	p.open -= n
	p.mu.Unlock()
	p.signal()
}

// finished counts a batch that has recorded (or given up recording).
func (p *pipeline) finished(r batchResult) {
	p.mu.Lock()
	p.inFlight--
	p.stats.Submitted += r.submitted
	p.stats.Released += r.released
	for t, outcomes := range r.tally {
		if p.tally[t] == nil {
			p.tally[t] = map[Outcome]int{}
		}
		for o, n := range outcomes {
			p.tally[t][o] += n
		}
	}
	if r.err != nil && p.err == nil {
		p.err = r.err
	}
	p.mu.Unlock()
	p.signal()
}

// leaseReserve is the part of a lease kept free after the last send can end,
// for the record; minLeaseLeft is how much lease a pair needs left to be
// marked sending: its send plus that reserve. A batch claimed within its
// run's budget always has that much (Config requires Lease > RunBudget +
// SendTimeout).
func (c *clientCore) leaseReserve() time.Duration {
	return (c.cfg.Lease - c.cfg.RunBudget - c.cfg.SendTimeout) / 2
}

func (c *clientCore) minLeaseLeft() time.Duration { return c.cfg.SendTimeout + c.leaseReserve() }

func newLeaseID() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	// Positive and non-zero: zero means "no lease" in the ledger's answers.
	return int64(binary.BigEndian.Uint64(b[:])>>1) | 1
}
