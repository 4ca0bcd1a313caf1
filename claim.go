package oncepush

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/backoff"
)

// claimTimeout bounds one claim transaction. The claim does not follow the
// caller's cancellation (see claim), so it needs a bound of its own.
const claimTimeout = 30 * time.Second

const textAbandoned = "no answer recorded: the run that submitted it ended before recording, and its lease expired"

// claim leases a batch and decides, inside one transaction, everything that can
// be decided without a provider: expiry, eligibility, recovery of abandoned
// attempts, deliveries with nothing to send. Nothing is marked sending here:
// submit.go marks each pair just before its call.
//
// Once begun, the claim runs to its end even if ctx is cancelled meanwhile
// (a stop): a cancel racing COMMIT could leave rows leased to a run that
// believes it failed, and they would wait out a whole lease. A stop that
// arrives during the claim starts no send; the record releases the batch.
func (c *Client[TTx]) claim(ctx context.Context) (*batch, error) {
	if err := ctx.Err(); err != nil {
		return &batch{}, nil
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	defer cancel()
	b := &batch{leaseID: newLeaseID(), claimedAt: c.clockNow(), claimedReal: time.Now()}
	var finished []string
	err := c.driver.InTx(tctx, func(ctx context.Context, tx TTx, ex driver.Executor) error {
		b.deliveries, b.pairs, b.recovered, finished = nil, nil, nil, nil
		res, err := ex.DeliveryClaim(ctx, &driver.DeliveryClaimParams{
			Now: c.now(), Max: c.cfg.BatchSize, LeaseID: b.leaseID, Lease: c.cfg.Lease,
		})
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		if len(res.Rows) == 0 {
			return nil
		}
		b.now, b.claimed = res.Now, len(res.Rows)

		var msgIDs, ids []int64
		var recipients []string
		seenMsg := map[int64]bool{}
		for _, r := range res.Rows {
			ids = append(ids, r.ID)
			if !seenMsg[r.MessageID] {
				seenMsg[r.MessageID] = true
				msgIDs = append(msgIDs, r.MessageID)
			}
			recipients = append(recipients, r.Recipient)
		}
		slices.Sort(recipients)
		recipients = slices.Compact(recipients)

		msgs, err := ex.MessageGetMany(ctx, msgIDs)
		if err != nil {
			return fmt.Errorf("claim: messages: %w", err)
		}
		devs, err := ex.DeviceListByRecipients(ctx, recipients)
		if err != nil {
			return fmt.Errorf("claim: devices: %w", err)
		}
		atts, err := ex.DeviceAttemptListByDeliveries(ctx, ids)
		if err != nil {
			return fmt.Errorf("claim: attempts: %w", err)
		}

		updates, writes := c.plan(ctx, tx, ex, b, res.Rows, msgs, devs, atts)
		if len(updates) > 0 {
			got, err := ex.DeliveryUpdateMany(ctx, &driver.DeliveryUpdateManyParams{Now: c.now(), LeaseID: b.leaseID, Updates: updates})
			if err != nil {
				return fmt.Errorf("claim: finish deliveries: %w", err)
			}
			if len(got) != len(updates) {
				return fmt.Errorf("claim: finished %d of %d deliveries it had just leased", len(got), len(updates))
			}
			for _, u := range updates {
				if u.Status != driver.StatusPending {
					finished = append(finished, u.Status)
				}
			}
		}
		if err := ex.DeviceAttemptUpsertMany(ctx, &driver.DeviceAttemptUpsertManyParams{Now: c.now(), Rows: writes.rows}); err != nil {
			return fmt.Errorf("claim: ledger: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("oncepush: %w", err)
	}
	for _, s := range finished {
		c.obs.Finished(DeliveryStatus(s))
	}
	for _, t := range b.recovered {
		c.obs.Ambiguous(t, true)
	}
	c.buildSubmissions(b)
	return b, nil
}

// plan decides each claimed delivery: finish it, delay it, or send to its
// unsettled devices. It returns the delivery updates and ledger writes the claim
// transaction must make.
func (c *Client[TTx]) plan(ctx context.Context, tx TTx, ex driver.Executor, b *batch, rows []*driver.ClaimedDelivery,
	msgs []*driver.Message, devs []*driver.Device, atts []*driver.DeviceAttempt,
) ([]driver.DeliveryUpdate, *attemptWrites) {
	msgByID := make(map[int64]*driver.Message, len(msgs))
	for _, m := range msgs {
		msgByID[m.ID] = m
	}
	devsByRecipient := map[string][]*driver.Device{}
	for _, d := range devs {
		devsByRecipient[d.Recipient] = append(devsByRecipient[d.Recipient], d)
	}
	attsByDelivery := map[int64]map[pairKey]*driver.DeviceAttempt{}
	for _, a := range atts {
		m := attsByDelivery[a.DeliveryID]
		if m == nil {
			m = map[pairKey]*driver.DeviceAttempt{}
			attsByDelivery[a.DeliveryID] = m
		}
		m[pairKey{a.Transport, a.TokenKey}] = a
	}

	var updates []driver.DeliveryUpdate
	writes := &attemptWrites{}

	// Group by message, in claim order, for one eligibility call per message.
	var order []int64
	groups := map[int64][]*delivery{}
	for _, r := range rows {
		msg := msgByID[r.MessageID]
		d := &delivery{row: r, msg: msg, attempts: r.Attempts, prior: attsByDelivery[r.ID]}
		if msg != nil {
			d.policy = AmbiguityPolicy(msg.Ambiguity)
		}
		// Attempts still "sending" were left by a run that never recorded: the
		// provider may have them. They are ambiguous, counted as an attempt.
		recovered := false
		for _, a := range d.prior {
			switch a.State {
			case driver.AttemptAccepted:
				d.accepted = true
			case driver.AttemptAmbiguous:
				d.ambiguous = true
			case driver.AttemptSending:
				writes.add(driver.DeviceAttemptUpsert{
					DeliveryID: r.ID, DeviceID: a.DeviceID, Transport: a.Transport, TokenKey: a.TokenKey,
					State: driver.AttemptAmbiguous, AmbiguousDelta: 1, Error: textAbandoned,
				})
				a.State = driver.AttemptAmbiguous
				d.ambiguous, recovered = true, true
				b.recovered = append(b.recovered, Transport(a.Transport))
			}
		}
		if recovered {
			d.attempts++
			c.log.WarnContext(ctx, "recovered a delivery whose run ended without recording; its sending devices are ambiguous",
				slog.Int64("delivery_id", r.ID), slog.Int64("previous_lease", r.PrevLeaseID), slog.String("policy", string(d.policy)))
		}
		if _, ok := groups[r.MessageID]; !ok {
			order = append(order, r.MessageID)
		}
		groups[r.MessageID] = append(groups[r.MessageID], d)
	}

	for _, msgID := range order {
		ds := groups[msgID]
		msg := msgByID[msgID]
		if msg == nil { // cannot happen under the foreign key; never strand the rows
			for _, d := range ds {
				updates = append(updates, c.retryOrEnd(d, "message not found", 0, true))
			}
			continue
		}
		if !b.now.Before(msg.ExpiresAt) {
			for _, d := range ds {
				updates = append(updates, d.end(driver.StatusExpired))
			}
			continue
		}
		decisions, err := c.decide(ctx, tx, ex, msg, ds, b.now)
		if err != nil {
			c.log.ErrorContext(ctx, "eligibility failed; the message's deliveries in this batch back off",
				slog.Int64("message_id", msgID), slog.Any("error", err))
			for _, d := range ds {
				updates = append(updates, c.retryOrEnd(d, "eligibility: "+err.Error(), 0, true))
			}
			continue
		}
		for _, d := range ds {
			dec := decisions[d.row.Recipient]
			switch dec.kind {
			case decideSkip:
				updates = append(updates, d.end(driver.StatusSkipped))
				continue
			case decideDelay:
				if !dec.until.Before(msg.ExpiresAt) {
					updates = append(updates, d.end(driver.StatusExpired))
				} else {
					until := dec.until
					updates = append(updates, driver.DeliveryUpdate{ID: d.row.ID, Status: driver.StatusPending, Attempts: d.attempts, NextAttemptAt: &until})
				}
				continue
			}
			devices := devsByRecipient[d.row.Recipient]
			if d.attempts >= c.cfg.MaxAttempts { // only a recovery can get here
				updates = append(updates, d.end(d.finalStatus(len(devices) > 0)))
				continue
			}
			for _, dev := range devices {
				key := pairKey{dev.Transport, dev.TokenKey}
				prev := d.prior[key]
				if prev != nil && settled(prev.State, d.policy) {
					continue
				}
				if _, ok := c.providers[Transport(dev.Transport)]; !ok {
					text := fmt.Sprintf("no provider configured for transport %q", dev.Transport)
					writes.add(driver.DeviceAttemptUpsert{DeliveryID: d.row.ID, DeviceID: dev.ID, Transport: dev.Transport,
						TokenKey: dev.TokenKey, State: driver.AttemptRejected, Error: dev.Transport + " " + text})
					d.note(fmt.Sprintf("%s device %d: %s", dev.Transport, dev.ID, text))
					continue
				}
				p := &pair{d: d, dev: deviceFromRow(dev), tokenKey: dev.TokenKey, prev: prev}
				d.pairs = append(d.pairs, p)
			}
			if len(d.pairs) == 0 {
				updates = append(updates, d.end(d.finalStatus(len(devices) > 0)))
				continue
			}
			b.deliveries = append(b.deliveries, d)
			b.pairs = append(b.pairs, d.pairs...)
		}
	}
	return updates, writes
}

// settled reports whether a ledger state needs no further submission.
func settled(state string, policy AmbiguityPolicy) bool {
	switch state {
	case driver.AttemptAccepted, driver.AttemptInvalid, driver.AttemptRejected:
		return true
	case driver.AttemptAmbiguous:
		return policy == AmbiguityAtMostOnce
	}
	return false
}

// finalStatus is the status of a delivery with nothing left to try.
func (d *delivery) finalStatus(hasDevices bool) string {
	switch {
	case d.accepted:
		return driver.StatusSent
	case d.ambiguous:
		return driver.StatusAmbiguous
	case !hasDevices:
		return driver.StatusNoDevices
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
func (c *clientCore) retryOrEnd(d *delivery, text string, wait time.Duration, hasDevices bool) driver.DeliveryUpdate {
	if text != "" {
		d.note(text)
	}
	d.attempts++
	if d.attempts >= c.cfg.MaxAttempts {
		return d.end(d.finalStatus(hasDevices))
	}
	delay := max(backoff.Delay(d.attempts, c.cfg.BackoffMin, c.cfg.BackoffMax, nil), wait)
	return driver.DeliveryUpdate{ID: d.row.ID, Status: driver.StatusPending, Attempts: d.attempts, Delay: delay, LastError: d.lastError()}
}

// decide runs eligibility for one message's due recipients inside a savepoint
// of the claim transaction, so a rule whose query fails cannot abort the claim.
func (c *Client[TTx]) decide(ctx context.Context, tx TTx, ex driver.Executor, msg *driver.Message, ds []*delivery, now time.Time) (map[string]Decision, error) {
	if c.cfg.Eligibility == nil {
		return nil, nil
	}
	asked := make(map[string]bool, len(ds))
	recipients := make([]string, 0, len(ds))
	for _, d := range ds {
		if !asked[d.row.Recipient] {
			asked[d.row.Recipient] = true
			recipients = append(recipients, d.row.Recipient)
		}
	}
	notice := Notice{
		MessageID: msg.ID, Type: msg.Type, Category: msg.Category, Title: msg.Title, Body: msg.Body,
		ScheduledAt: msg.ScheduledAt, ExpiresAt: msg.ExpiresAt, Now: now,
	}
	var ans map[string]Decision
	err := ex.WithSavepoint(ctx, func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("eligibility panicked: %v", r)
			}
		}()
		ans, err = c.cfg.Eligibility(context.WithValue(ctx, claimTxKey{}, tx), notice, recipients)
		return err
	})
	if err != nil {
		return nil, err
	}
	for r := range ans {
		if !asked[r] {
			return nil, fmt.Errorf("answered about recipient %q, who was not asked about", r)
		}
	}
	return ans, nil
}

// buildSubmissions prepares each pair's Submission once, after the claim commits.
func (c *clientCore) buildSubmissions(b *batch) {
	dataByMsg := map[int64]map[string]string{}
	for _, d := range b.deliveries {
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
				Device:         p.dev,
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

// flattenData turns stored JSON data into provider data: strings as they are,
// other values as JSON text.
func flattenData(raw []byte) map[string]string {
	out := map[string]string{}
	if len(raw) == 0 {
		return out
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return out // validated at send; a stored object always decodes
	}
	for k, v := range m {
		var s string
		if json.Unmarshal(v, &s) == nil {
			out[k] = s
		} else {
			out[k] = string(v)
		}
	}
	return out
}
