package oncepush

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/oncepush/oncepush/driver"
)

// markTimeout bounds one statement that marks a wave sending.
const markTimeout = 30 * time.Second

// sendBatch submits the batch's pairs holding no database connection, at most
// ConcurrentSends in flight per transport in the whole client (the window is
// shared by every run; a batch waits for a slot). Pairs are marked sending in waves,
// each just before its sends start and no larger than the free part of the
// in-flight window: a run that dies or stalls leaves ambiguous at most the
// pairs that were in flight. Refills wait until half a window is free (or the
// transport's whole queue fits), so a batch costs a handful of statements.
//
// No send starts once the run's budget is spent, the lease could have
// expired, a stop arrived, or the transport is throttled; those pairs are left
// for the record to release. sent is told of each send as it ends; sendBatch
// returns once all have, with the number it started.
func (c *clientCore) sendBatch(claimCtx, sendCtx context.Context, b *batch, deadline time.Time, sent func(int)) (launched int) {
	startBy, sendEnd := sendBounds(b.claimedAt, deadline, c.cfg.Lease, c.minLeaseLeft(), c.leaseReserve())
	w := newWaves(b.pairs, b.window)
	done := make(chan *pair, len(b.pairs))
	for w.pending() && claimCtx.Err() == nil && c.clockNow().Before(startBy) {
		freed := b.window.changed()
		if !w.ready() {
			// Wait for a send to end: this batch's, or another's of the client.
			b.hooks.WaitingForSlots(w.queued)
			select {
			case p := <-done:
				w.finished(p)
				sent(1)
			case <-freed:
			case <-claimCtx.Done():
			}
			continue
		}
		wave := w.next(c.throttled)
		if len(wave) == 0 {
			continue
		}
		verdicts, err := c.markSending(claimCtx, b, wave)
		if err != nil {
			c.log.ErrorContext(sendCtx, "marking pairs sending failed; the rest of the batch is released",
				slog.Int64("lease_id", b.leaseID), slog.Int("pairs", len(wave)), slog.Any("error", err))
			for _, p := range wave {
				w.skipped(p)
			}
			break
		}
		for _, p := range wave {
			switch verdicts[markKey{p.d.row.ID, p.key()}] {
			case driver.AttemptSending:
			case driver.AttemptDuplicate:
				p.duplicate = true // settled by the mark: the campaign reached the token already
				w.skipped(p)
				continue
			case driver.MarkHeld:
				// Another delivery of the campaign has the token in flight;
				// try again once that send has ended one way or the other.
				p.releaseWait = c.cfg.SendTimeout
				w.skipped(p)
				continue
			default:
				w.skipped(p)
				continue // the lease is lost or nearly spent: not ours to send
			}
			p.marked = true
			if claimCtx.Err() != nil {
				w.skipped(p)
				continue // stopped after the mark: the record gives it back
			}
			w.started(p)
			launched++
			go func() {
				c.submit(sendCtx, b, p, startBy, sendEnd)
				done <- p
			}()
		}
	}
	for w.inFlight() > 0 {
		w.finished(<-done)
		sent(1)
	}
	return launched
}

// markKey names a pair in the mark's answer.
type markKey struct {
	deliveryID int64
	pairKey
}

// markSending marks a wave's pairs sending in one statement and returns its
// verdict on each pair of the deliveries still leased to the run: marked
// (driver.AttemptSending), or, for a campaign's pair, its token reached by
// another delivery of the campaign (AttemptDuplicate) or in flight there
// (MarkHeld). The statement is not cancelled by a stop (a cancel racing its
// commit would leave the caller unsure what it counted).
func (c *clientCore) markSending(ctx context.Context, b *batch, wave []*pair) (map[markKey]string, error) {
	keys := make([]driver.DeviceAttemptKey, len(wave))
	for i, p := range wave {
		keys[i] = driver.DeviceAttemptKey{DeliveryID: p.d.row.ID, DeviceID: p.dev.ID, Transport: string(p.dev.Transport), TokenKey: p.tokenKey}
		if p.d.row.Campaign {
			keys[i].CampaignMessageID = p.d.row.MessageID
		}
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancel()
	ids, err := c.exec().DeviceAttemptMarkSending(tctx, &driver.DeviceAttemptMarkSendingParams{
		Now: c.now(), LeaseID: b.leaseID, MinLeaseLeft: c.minLeaseLeft(), Pairs: keys,
	})
	if err != nil {
		return nil, fmt.Errorf("oncepush: mark sending: %w", err)
	}
	verdicts := make(map[markKey]string, len(ids))
	for _, m := range ids {
		verdicts[markKey{m.DeliveryID, pairKey{m.Transport, m.TokenKey}}] = m.State
	}
	return verdicts, nil
}

// submit makes one provider call. It checks, immediately before calling, that
// the send may still start — the process may have been stopped or starved
// since the wave was marked — and hands the same check to the provider
// (CheckStart) for the instant before it writes. The call ends by sendEnd at
// the latest, so its answer can be recorded while the lease holds.
func (c *clientCore) submit(ctx context.Context, b *batch, p *pair, startBy, sendEnd time.Time) {
	mayStart := func() error {
		if !c.clockNow().Before(startBy) {
			return ErrLateStart
		}
		return nil
	}
	if mayStart() != nil {
		return
	}
	if wait := c.throttled(p.dev.Transport); wait > 0 {
		p.releaseWait = wait // a send of this wave was told to slow everyone down
		return
	}
	timeout := min(c.cfg.SendTimeout, sendEnd.Sub(c.clockNow()))
	ctx, cancel := context.WithTimeout(WithStartCheck(ctx, mayStart), timeout)
	defer cancel()
	p.started = true
	b.hooks.SendStarting(p.d.row.ID)
	start := time.Now()
	res := normalizeResult(c.callProvider(ctx, p))
	p.res = res
	if res.Unsent && mayStart() != nil {
		p.late = true // refused by CheckStart: never started, as far as anyone can tell
		return
	}
	c.obs.Submitted(p.dev.Transport, res.Outcome, time.Since(start))
	if res.Outcome == OutcomeMaybeSent {
		c.obs.Ambiguous(p.dev.Transport, false)
	}
	if wait := throttleFor(res); wait > 0 {
		c.setThrottle(p.dev.Transport, wait)
	}
}

// callProvider calls the provider, turning a panic of its code into a
// maybe-sent answer: it may have written the request before panicking.
func (c *clientCore) callProvider(ctx context.Context, p *pair) (res Result) {
	defer func() {
		if r := recover(); r != nil {
			res = Result{Outcome: OutcomeMaybeSent, Text: fmt.Sprintf("provider panicked: %v", r)}
		}
	}()
	return c.providers[p.dev.Transport].Send(ctx, &p.sub)
}

func (c *clientCore) throttled(t Transport) time.Duration {
	c.throttleMu.Lock()
	defer c.throttleMu.Unlock()
	return time.Until(c.throttle[t])
}

func (c *clientCore) setThrottle(t Transport, d time.Duration) {
	c.throttleMu.Lock()
	defer c.throttleMu.Unlock()
	if until := time.Now().Add(d); until.After(c.throttle[t]) {
		c.throttle[t] = until
		c.log.Warn("provider asked everyone to slow down; pausing its sends", slog.String("transport", string(t)), slog.Duration("for", d))
	}
}
