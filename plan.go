package oncepush

import (
	"strings"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/backoff"
	"github.com/oncepush/oncepush/internal/enginetest"
)

// The run's decisions — what to finish, what to send, what to record — are
// functions of their inputs, beside the phase that does the I/O:
// claim_plan.go, submit_plan.go, record_plan.go. They read no clock, call no
// driver or provider and log nothing, so they are tested without a database.
// This file holds what they share — the batch, its deliveries and pairs as
// the run sees them — and the rules they read. See docs/architecture.md.

// batch is one claim's worth of work.
type batch struct {
	leaseID int64
	// claimedAt is the engine clock just before the claim began, and
	// claimedReal the process's monotonic clock then: the lease ends no
	// earlier than either plus Config.Lease.
	claimedAt   time.Time
	claimedReal time.Time
	now         time.Time // the claim's "now", as the database saw it
	claimed     int
	deliveries  []*delivery // those with pairs to send
	pairs       []*pair
	canceled    map[int64]bool    // deliveries the record found canceled under the lease
	hooks       *enginetest.Hooks // the run's test hooks; nil outside tests
	window      *window           // the run's sends in flight, shared by its batches
}

// pairKey identifies a (delivery, device) pair within its delivery: the
// token, not the registration row, so re-registering a token cannot reopen a
// pair the ledger has settled.
type pairKey struct {
	transport string
	tokenKey  string
}

// delivery is a leased delivery as the run sees it.
type delivery struct {
	row       *driver.ClaimedDelivery
	msg       *driver.Message
	policy    AmbiguityPolicy
	attempts  int  // absolute, including a recovery counted at claim
	accepted  bool // some device accepted, in this run or before
	ambiguous bool // some device's submission may have been lost
	duplicate bool // a campaign delivery's device was reached through another delivery
	prior     map[pairKey]*driver.DeviceAttempt
	pairs     []*pair
	errs      []string
	data      map[string]string
}

// pair is one (delivery, device) to submit.
type pair struct {
	d        *delivery
	dev      Device
	tokenKey string
	prev     *driver.DeviceAttempt // the ledger row before this claim, if any
	sub      Submission
	// marked: the ledger counts this submission (state sending). started:
	// the provider was called. late: the call was refused by CheckStart.
	// duplicate: a campaign pair the mark settled unsent, its token reached
	// by another delivery of the campaign (D107).
	marked, started, late, duplicate bool
	res                              Result
	releaseWait                      time.Duration // a provider-wide throttle, or its campaign token in flight elsewhere, kept it from starting
}

func (p *pair) key() pairKey { return pairKey{string(p.dev.Transport), p.tokenKey} }

// planRules is the part of the configuration the plans read.
type planRules struct {
	maxAttempts            int
	backoffMin, backoffMax time.Duration
	// jitter draws the backoff's jitter in [0, 1); nil draws at random.
	jitter func() float64
	// providers are the transports served; a device of any other is settled
	// as rejected. Only the keys are read.
	providers map[Transport]Provider
	// transports checks tokens for a campaign's audience (nil: the
	// built-in transports).
	transports *transportTable
}

func (c *clientCore) planRules() planRules {
	return planRules{
		maxAttempts: c.cfg.MaxAttempts,
		backoffMin:  c.cfg.BackoffMin,
		backoffMax:  c.cfg.BackoffMax,
		providers:   c.providers,
		transports:  c.transports,
	}
}

func (r planRules) serves(t Transport) bool {
	_, ok := r.providers[t]
	return ok
}

// settled reports whether a ledger state needs no further submission.
func settled(state string, policy AmbiguityPolicy) bool {
	switch state {
	case driver.AttemptAccepted, driver.AttemptInvalid, driver.AttemptRejected, driver.AttemptDuplicate:
		return true
	case driver.AttemptAmbiguous:
		return policy == AmbiguityAtMostOnce
	}
	return false
}

// finalStatus is the status of a delivery with nothing left to try. A
// campaign delivery that reached nothing itself because another delivery of
// the campaign had reached a device of its recipient's is skipped, not
// failed: that device has the campaign (D107).
func (d *delivery) finalStatus(hasDevices bool) string {
	switch {
	case d.accepted:
		return driver.StatusSent
	case d.ambiguous:
		return driver.StatusAmbiguous
	case !hasDevices:
		return driver.StatusNoDevices
	case d.duplicate:
		return driver.StatusSkipped
	}
	return driver.StatusFailed
}

// end finishes a delivery with status, recording this run's errors if any. A
// delivery that some device accepted ends sent, whatever ended it — expiry,
// a skip, a delay past its lifetime: the device has the notification.
func (d *delivery) end(status string) driver.DeliveryUpdate {
	if d.accepted {
		status = driver.StatusSent
	}
	return driver.DeliveryUpdate{ID: d.row.ID, Status: status, Attempts: d.attempts, LastError: d.lastError()}
}

// note adds a text to the delivery's last error.
func (d *delivery) note(text string) { d.errs = append(d.errs, text) }

// lastError is the delivery's recorded text: this run's notes, made storable
// (they hold words of code oncepush does not own: providers, rules, panics).
func (d *delivery) lastError() *string {
	if len(d.errs) == 0 {
		return nil
	}
	s := storableText(strings.Join(d.errs, "; "))
	return &s
}

// retryOrEnd counts a retryable failure: the delivery backs off (at least
// wait), or ends when it has used its attempts.
func (r planRules) retryOrEnd(d *delivery, text string, wait time.Duration, hasDevices bool) driver.DeliveryUpdate {
	if text != "" {
		d.note(text)
	}
	d.attempts++
	if d.attempts >= r.maxAttempts {
		return d.end(d.finalStatus(hasDevices))
	}
	delay := max(backoff.Delay(d.attempts, r.backoffMin, r.backoffMax, r.jitter), wait)
	return driver.DeliveryUpdate{ID: d.row.ID, Status: driver.StatusPending, Attempts: d.attempts, Delay: delay, LastError: d.lastError()}
}
