package oncepush

import (
	"fmt"
	"sync"
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

// window is a client's sends in flight per transport, shared by every batch
// of every run, so that ConcurrentSends bounds all of them together: the
// figure a killed process is charged with, whatever Workers is (D120). A slot
// is taken when a pair enters a wave and given back when its send ends or it
// is not started after all. Safe for concurrent use.
type window struct {
	size  int
	mu    sync.Mutex
	used  map[Transport]int
	freed chan struct{} // closed, and replaced, whenever slots are given back
}

func newWindow(size int) *window {
	return &window{size: size, used: map[Transport]int{}, freed: make(chan struct{})}
}

// room is the number of free slots of transport t.
func (w *window) room(t Transport) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.size - w.used[t]
}

// take takes up to n free slots of transport t and returns how many it took.
func (w *window) take(t Transport, n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n = min(n, w.size-w.used[t])
	w.used[t] += n
	return n
}

// give gives back one slot of transport t.
func (w *window) give(t Transport) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.used[t]--
	close(w.freed)
	w.freed = make(chan struct{})
}

// changed returns a channel closed at the next give: take it before looking
// at the room, and a slot given back in between is not missed.
func (w *window) changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.freed
}

// waves plans a batch's sends: one queue per transport, in claim order, and
// at most the client's window in flight per transport, counting the sends of
// every other batch. A wave takes, from every transport, as many queued
// pairs as the window has free; once a wave is out, the next waits until some
// transport has half a window free, or room for all it has left, so a batch
// costs a handful of mark statements rather than one per pair.
type waves struct {
	win        *window
	refill     int
	transports []Transport // in order of first appearance
	queues     map[Transport][]*pair
	queued     int // pairs in the queues
	running    int // this batch's sends in flight, all transports
}

func newWaves(pairs []*pair, win *window) *waves {
	w := &waves{win: win, refill: (win.size + 1) / 2, queues: map[Transport][]*pair{}, queued: len(pairs)}
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

// inFlight is the number of this batch's sends started and not yet finished.
func (w *waves) inFlight() int { return w.running }

// ready reports whether a wave is worth marking now: some transport with
// pairs queued can take half a window, or all it has left.
func (w *waves) ready() bool {
	for _, t := range w.transports {
		n := len(w.queues[t])
		if free := w.win.room(t); n > 0 && free > 0 && (free >= w.refill || free >= n) {
			return true
		}
	}
	return false
}

// next takes the next wave from the queues: from each transport as many
// pairs as the window has free, taking their slots. A transport that
// throttled reports held for a positive wait gives up its whole queue: those
// pairs are not sent this run, and carry the wait as their releaseWait.
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
		n := w.win.take(t, len(q))
		wave = append(wave, q[:n]...)
		w.queues[t] = q[n:]
		w.queued -= n
	}
	return wave
}

// started counts a send of the wave that was started.
func (w *waves) started(*pair) { w.running++ }

// skipped gives back the slot of a pair of the wave that will not be started.
func (w *waves) skipped(p *pair) { w.win.give(p.dev.Transport) }

// finished counts a started send that has ended, and gives back its slot.
func (w *waves) finished(p *pair) {
	w.running--
	w.win.give(p.dev.Transport)
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

// buildSubmissions prepares each pair's Submission once, after the claim
// commits: what the provider is sent.
func buildSubmissions(deliveries []*delivery) {
	dataByMsg := map[int64]map[string]string{}
	for _, d := range deliveries {
		base, ok := dataByMsg[d.msg.ID]
		if !ok {
			base = flattenData(d.msg.Data)
			dataByMsg[d.msg.ID] = base
		}
		d.data = make(map[string]string, len(base)+1)
		for k, v := range base {
			d.data[k] = v
		}
		d.data["oncepush_id"] = d.row.NotificationID
		for _, p := range d.pairs {
			p.sub = Submission{
				NotificationID: d.row.NotificationID,
				CollapseID:     d.row.NotificationID,
				SubmissionID:   SubmissionID(d.row.ID, p.dev.Transport, p.tokenKey),
				Resend:         p.prev != nil && p.prev.Submissions > 0,
				DeliveryID:     d.row.ID,
				DeviceID:       p.dev.ID,
				Token:          p.dev.Token,
				Type:           d.msg.Type,
				Category:       d.msg.Category,
				Title:          d.msg.Title,
				Body:           d.msg.Body,
				Data:           d.data,
				Link:           d.msg.Link,
				Image:          d.msg.Image,
				ExpiresAt:      d.msg.ExpiresAt,
			}
		}
	}
}
