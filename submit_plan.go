package oncepush

import (
	"fmt"
	"time"
)

// Which pairs are sent in which waves, and when a send may start and must
// end, as functions of the batch and the clock readings submit.go hands in;
// see plan.go.

// sendBounds returns, for a batch claimed at claimedAt in a run whose budget
// ends at deadline, the instant after which no send may start (the budget,
// or the last instant a send still fits the lease with the record's reserve
// after it) and the instant by which every send must end (a reserve before
// the lease ends, so its answer can be recorded).
func sendBounds(claimedAt, deadline time.Time, lease, minLeaseLeft, reserve time.Duration) (startBy, sendEnd time.Time) {
	startBy = claimedAt.Add(lease - minLeaseLeft)
	if deadline.Before(startBy) {
		startBy = deadline
	}
	return startBy, claimedAt.Add(lease - reserve)
}

// waves plans a batch's sends: one queue per transport, in claim order, and
// at most window sends in flight per transport. A wave takes, from every
// transport, as many queued pairs as its window has free; once a wave is out,
// the next waits until some transport has half a window free, or room for all
// it has left, so a batch costs a handful of mark statements rather than one
// per pair.
type waves struct {
	window, refill int
	transports     []Transport // in order of first appearance
	queues         map[Transport][]*pair
	inflight       map[Transport]int
	queued         int // pairs in the queues
	running        int // sends in flight, all transports
}

func newWaves(pairs []*pair, window int) *waves {
	w := &waves{window: window, refill: (window + 1) / 2, queues: map[Transport][]*pair{}, inflight: map[Transport]int{}, queued: len(pairs)}
	for _, p := range pairs {
		t := p.dev.Transport
		if _, ok := w.queues[t]; !ok {
			w.transports = append(w.transports, t)
		}
		w.queues[t] = append(w.queues[t], p)
	}
	return w
}

// pending reports whether pairs are still queued.
func (w *waves) pending() bool { return w.queued > 0 }

// inFlight is the number of sends started and not yet finished.
func (w *waves) inFlight() int { return w.running }

// ready reports whether a wave is worth marking now: nothing is in flight,
// or some transport can take half a window, or all it has left.
func (w *waves) ready() bool {
	if w.running == 0 {
		return true
	}
	for _, t := range w.transports {
		n, free := len(w.queues[t]), w.window-w.inflight[t]
		if n > 0 && free > 0 && (free >= w.refill || free >= n) {
			return true
		}
	}
	return false
}

// next takes the next wave from the queues: from each transport as many
// pairs as its window has free. A transport that throttled reports held for
// a positive wait gives up its whole queue: those pairs are not sent this
// run, and carry the wait as their releaseWait.
func (w *waves) next(throttled func(Transport) time.Duration) []*pair {
	var wave []*pair
	for _, t := range w.transports {
		q := w.queues[t]
		if len(q) == 0 {
			continue
		}
		if wait := throttled(t); wait > 0 {
			for _, p := range q {
				p.releaseWait = wait // left unsent; due again after the throttle
			}
			w.queued -= len(q)
			w.queues[t] = nil
			continue
		}
		n := min(len(q), w.window-w.inflight[t])
		wave = append(wave, q[:n]...)
		w.queues[t] = q[n:]
		w.queued -= n
	}
	return wave
}

// started counts a send of the wave that was started.
func (w *waves) started(p *pair) {
	w.inflight[p.dev.Transport]++
	w.running++
}

// finished counts a started send that has ended.
func (w *waves) finished(p *pair) {
	w.inflight[p.dev.Transport]--
	w.running--
}

// normalizeResult makes a provider's answer one the ledger can record: an
// answer with no valid outcome is maybe-sent (the provider may have written
// the request), and only a retry can claim the request never left.
func normalizeResult(res Result) Result {
	if res.Outcome < OutcomeAccepted || res.Outcome > OutcomeMaybeSent {
		res = Result{Outcome: OutcomeMaybeSent, Text: fmt.Sprintf("provider returned no valid outcome (%d): %s", res.Outcome, res.Text)}
	}
	if res.Outcome != OutcomeRetry {
		res.Unsent = false
	}
	return res
}

// throttleFor is how long an answer pauses its whole transport: its
// Retry-After, when it says the limit is everyone's.
func throttleFor(res Result) time.Duration {
	if res.Throttle && res.RetryAfter > 0 {
		return res.RetryAfter
	}
	return 0
}
