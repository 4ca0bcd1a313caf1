package oncepush

import (
	"context"
	"log/slog"
	"time"

	"github.com/oncepush/oncepush/internal/enginetest"
)

// Start starts the client's workers (Config.Workers runs at a time), its
// wake-up listener and its periodic cleanup, and returns. Cancelling ctx stops
// claiming, as Stop does; call Stop to wait for the workers to finish.
func (c *Client[TTx]) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return ErrAlreadyStarted
	}
	if err := c.CheckSchema(ctx); err != nil {
		return err
	}
	claimCtx, cancelClaim := context.WithCancel(ctx)
	sendCtx, cancelSend := context.WithCancel(context.WithoutCancel(ctx))
	c.started, c.cancelClaim, c.cancelSend = true, cancelClaim, cancelSend
	c.hooks = enginetest.From(ctx)

	wakes := make([]chan struct{}, c.cfg.Workers)
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	c.wakeMu.Lock()
	c.wakers = wakes
	c.wakeMu.Unlock()

	c.wg.Go(func() {
		if err := c.driver.Listen(claimCtx, c.wake); err != nil {
			c.log.WarnContext(claimCtx, "wake-up listener stopped; relying on polling", slog.Any("error", err))
		}
	})
	for i, w := range wakes {
		c.wg.Go(func() { c.workLoop(claimCtx, sendCtx, i, w) })
	}
	c.wg.Go(func() { c.cleanupLoop(claimCtx) })
	c.wg.Go(func() { c.campaignLoop(claimCtx, c.campaignWake) })
	c.log.InfoContext(ctx, "oncepush client started", slog.String("driver", c.driver.Name()), slog.Int("workers", c.cfg.Workers),
		slog.Int("batch_size", c.cfg.BatchSize), slog.Int("providers", len(c.providers)))
	return nil
}

// Stop stops claiming and starting sends at once, lets sends in flight finish
// and records them, and returns when every goroutine of the client has ended.
// If ctx ends first, sends in flight are cancelled (and recorded as their
// providers classify a cancelled request: usually maybe-sent), the records are
// still written, and Stop returns ctx's error. Pairs never started are released
// untouched. Stop on a client that is not started returns nil.
func (c *Client[TTx]) Stop(ctx context.Context) error {
	c.mu.Lock()
	if !c.started {
		c.mu.Unlock()
		return nil
	}
	c.cancelClaim()
	hooks := c.hooks
	c.mu.Unlock()
	hooks.StopWaiting()

	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		c.cancelSend()
		<-done
		err = ctx.Err()
	}
	c.cancelSend()

	c.mu.Lock()
	c.started = false
	c.mu.Unlock()
	c.wakeMu.Lock()
	c.wakers = nil
	c.wakeMu.Unlock()
	c.log.InfoContext(ctx, "oncepush client stopped")
	return err
}

// Drain runs until nothing is due, in the caller's goroutine, whether or not
// the client is started: for tests, examples, and deployments that drive
// delivery from their own scheduler. Cancelling ctx stops claiming and
// aborts sends in flight; what was sent is still recorded.
func (c *Client[TTx]) Drain(ctx context.Context) (RunStats, error) {
	var total RunStats
	for {
		s, err := c.run(ctx, ctx, nil)
		total.add(s)
		if err != nil || !s.BudgetSpent || ctx.Err() != nil {
			return total, err
		}
	}
}

// RunOnce performs one run in the caller's goroutine: claim, send and record
// batches until the run budget is spent or nothing is due. RunStats.BudgetSpent
// says whether work may be left.
func (c *Client[TTx]) RunOnce(ctx context.Context) (RunStats, error) {
	return c.run(ctx, ctx, nil)
}

// Wake tells idle workers — this client's at once, other processes' through
// the database (PostgreSQL NOTIFY) — to look for due work now. Call it after
// committing a transaction whose SendTx used DeferWake. Concurrent calls are
// coalesced: at most one notification is in flight, followed by one more if
// calls arrived meanwhile.
func (c *Client[TTx]) Wake() {
	c.wake()
	c.notifyOthers()
}

func (c *clientCore) notifyOthers() {
	c.notifyAgain.Store(true)
	if !c.notifying.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			c.notifyAgain.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := c.notify(ctx); err != nil {
				c.log.Debug("wake-up notification failed; workers will poll", slog.Any("error", err))
			}
			cancel()
			c.notifying.Store(false)
			if !c.notifyAgain.Load() || !c.notifying.CompareAndSwap(false, true) {
				return
			}
		}
	}()
}

// wake tells every idle worker to look for work now.
func (c *clientCore) wake() {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	for _, w := range c.wakers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (c *Client[TTx]) workLoop(claimCtx, sendCtx context.Context, worker int, wake <-chan struct{}) {
	hooks := enginetest.From(claimCtx)
	errPause := c.cfg.PollInterval
	idle := func() { hooks.WorkerIdle(worker, len(wake) > 0) }
	loop(claimCtx, 0, wake, idle, func() time.Duration {
		for claimCtx.Err() == nil {
			s, err := c.run(claimCtx, sendCtx, wake)
			if err != nil {
				if claimCtx.Err() == nil {
					c.log.ErrorContext(sendCtx, "delivery run failed", slog.Any("error", err))
				}
				// Pause longer while the database keeps failing.
				pause := errPause
				errPause = min(2*errPause, time.Minute)
				return pause
			}
			errPause = c.cfg.PollInterval
			if !s.BudgetSpent {
				break
			}
			// Budget spent with work left: continue at once (a new run).
		}
		return c.cfg.PollInterval
	})
}
