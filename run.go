package oncepush

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/backoff"
)

// A run claims, sends and records batches until its budget is spent or nothing
// is due. See docs/architecture.md for the whole flow.

// RunStats says what a run did.
type RunStats struct {
	// Batches is the number of claims that leased something.
	Batches int
	// Claimed is the number of deliveries leased.
	Claimed int
	// Submitted is the number of provider calls made.
	Submitted int
	// Released is the number of (delivery, device) pairs left unsent by the
	// budget, a stop, or a provider-wide throttle; they are due again.
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

// batch is one claim's worth of work.
type batch struct {
	leaseID    int64
	now        time.Time
	claimed    int
	deliveries []*delivery // those with pairs to send
	pairs      []*pair
	finished   []string    // final statuses the claim wrote
	recovered  []Transport // attempts found abandoned in "sending"
}

// delivery is a leased delivery as the run sees it.
type delivery struct {
	row       *driver.ClaimedDelivery
	msg       *driver.Message
	policy    AmbiguityPolicy
	attempts  int  // absolute, including a recovery counted at claim
	accepted  bool // some device accepted, in this run or before
	ambiguous bool // some device's submission may have been lost
	prior     map[int64]*driver.DeviceAttempt
	pairs     []*pair
	errs      []string
	data      map[string]string
}

// pair is one (delivery, device) to submit.
type pair struct {
	d           *delivery
	dev         Device
	prev        *driver.DeviceAttempt // the ledger row before this claim, if any
	sub         Submission
	started     bool
	res         Result
	releaseWait time.Duration // a provider-wide throttle kept it from starting
}

// attemptWrites collects ledger writes, merged per (delivery, device) so one
// statement never touches a row twice.
type attemptWrites struct {
	rows  []driver.DeviceAttemptUpsert
	index map[[2]int64]int
}

func (w *attemptWrites) add(u driver.DeviceAttemptUpsert) {
	if w.index == nil {
		w.index = map[[2]int64]int{}
	}
	k := [2]int64{u.DeliveryID, u.DeviceID}
	if i, ok := w.index[k]; ok {
		prev := w.rows[i]
		u.SubmissionsDelta += prev.SubmissionsDelta
		u.AmbiguousDelta += prev.AmbiguousDelta
		if u.State == driver.AttemptSending {
			u.Error = prev.Error
		}
		w.rows[i] = u
		return
	}
	w.index[k] = len(w.rows)
	w.rows = append(w.rows, u)
}

func (w *attemptWrites) filter(keep func(deliveryID int64) bool) []driver.DeviceAttemptUpsert {
	out := w.rows[:0:0]
	for _, r := range w.rows {
		if keep(r.DeliveryID) {
			out = append(out, r)
		}
	}
	return out
}

const textAbandoned = "no answer recorded: the run that submitted it ended before recording, and its lease expired"

// run drains batches until the budget is spent or nothing is due. claimCtx
// stops claiming and starting sends; sendCtx aborts sends in flight.
func (c *Client[TTx]) run(claimCtx, sendCtx context.Context) (RunStats, error) {
	var stats RunStats
	deadline := time.Now().Add(c.cfg.RunBudget)
	for claimCtx.Err() == nil {
		if !time.Now().Before(deadline) {
			stats.BudgetSpent = true
			return stats, nil
		}
		b, err := c.claim(claimCtx)
		if err != nil {
			return stats, err
		}
		if b.claimed == 0 {
			return stats, nil
		}
		stats.Batches++
		stats.Claimed += b.claimed
		if len(b.pairs) > 0 {
			c.sendBatch(claimCtx, sendCtx, b, deadline)
			for _, p := range b.pairs {
				if p.started {
					stats.Submitted++
				} else {
					stats.Released++
				}
			}
			if err := c.record(sendCtx, b); err != nil {
				return stats, err
			}
		}
		if !time.Now().Before(deadline) || stats.Released > 0 {
			stats.BudgetSpent = true
			return stats, nil
		}
		if b.claimed < c.cfg.BatchSize {
			return stats, nil
		}
	}
	return stats, nil
}

func newLeaseID() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	// Positive and non-zero: zero means "no lease" in the ledger's answers.
	return int64(binary.BigEndian.Uint64(b[:])>>1) | 1
}

// claim leases a batch and decides, inside one transaction, everything that can
// be decided without a provider: expiry, eligibility, recovery of abandoned
// attempts, deliveries with nothing to send. The pairs to send are marked
// sending before the transaction commits.
func (c *Client[TTx]) claim(ctx context.Context) (*batch, error) {
	var b *batch
	err := c.driver.InTx(ctx, func(ctx context.Context, tx TTx, ex driver.Executor) error {
		b = &batch{leaseID: newLeaseID()}
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
					b.finished = append(b.finished, u.Status)
				}
			}
		}
		if err := ex.DeviceAttemptUpsertMany(ctx, &driver.DeviceAttemptUpsertManyParams{Now: c.now(), Rows: writes.rows}); err != nil {
			return fmt.Errorf("claim: mark sending: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("oncepush: %w", err)
	}
	for _, s := range b.finished {
		c.cfg.Observer.Finished(DeliveryStatus(s))
	}
	for _, t := range b.recovered {
		c.cfg.Observer.Ambiguous(t, true)
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
	attsByDelivery := map[int64]map[int64]*driver.DeviceAttempt{}
	for _, a := range atts {
		m := attsByDelivery[a.DeliveryID]
		if m == nil {
			m = map[int64]*driver.DeviceAttempt{}
			attsByDelivery[a.DeliveryID] = m
		}
		m[a.DeviceID] = a
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
					DeliveryID: r.ID, DeviceID: a.DeviceID, Transport: a.Transport,
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
				prev := d.prior[dev.ID]
				if prev != nil && settled(prev.State, d.policy) {
					continue
				}
				if _, ok := c.providers[Transport(dev.Transport)]; !ok {
					text := fmt.Sprintf("no provider configured for transport %q", dev.Transport)
					writes.add(driver.DeviceAttemptUpsert{DeliveryID: d.row.ID, DeviceID: dev.ID, Transport: dev.Transport,
						State: driver.AttemptRejected, Error: dev.Transport + " " + text})
					d.errs = append(d.errs, fmt.Sprintf("%s device %d: %s", dev.Transport, dev.ID, text))
					continue
				}
				p := &pair{d: d, dev: deviceFromRow(dev), prev: prev}
				d.pairs = append(d.pairs, p)
				writes.add(driver.DeviceAttemptUpsert{DeliveryID: d.row.ID, DeviceID: dev.ID, Transport: dev.Transport,
					State: driver.AttemptSending, SubmissionsDelta: 1})
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

// end finishes a delivery with status, recording this run's errors if any.
func (d *delivery) end(status string) driver.DeliveryUpdate {
	return driver.DeliveryUpdate{ID: d.row.ID, Status: status, Attempts: d.attempts, LastError: d.lastError()}
}

func (d *delivery) lastError() *string {
	if len(d.errs) == 0 {
		return nil
	}
	s := strings.Join(d.errs, "; ")
	return &s
}

// retryOrEnd counts a retryable failure: the delivery backs off (at least
// wait), or ends when it has used its attempts.
func (c *clientCore) retryOrEnd(d *delivery, text string, wait time.Duration, hasDevices bool) driver.DeliveryUpdate {
	if text != "" {
		d.errs = append(d.errs, text)
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
				SubmissionID:   SubmissionID(d.row.ID, p.dev.ID),
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

// sendBatch submits every pair, at most ConcurrentSends at a time per
// transport, holding no database connection. The budget is checked before each
// send: pairs not started by the deadline, after a stop, or while their
// transport is throttled are left unstarted (released by the record).
func (c *clientCore) sendBatch(claimCtx, sendCtx context.Context, b *batch, deadline time.Time) {
	var wg sync.WaitGroup
	budget := time.NewTimer(time.Until(deadline))
	defer budget.Stop()
	over := false
	for _, p := range b.pairs {
		if over || claimCtx.Err() != nil || !time.Now().Before(deadline) {
			continue
		}
		t := p.dev.Transport
		if wait := c.throttled(t); wait > 0 {
			p.releaseWait = wait
			continue
		}
		sem := c.sems[t]
		select {
		case sem <- struct{}{}:
		case <-budget.C:
			over = true
			continue
		case <-claimCtx.Done():
			continue
		}
		// A send that finished while this one waited may have throttled it.
		if wait := c.throttled(t); wait > 0 {
			<-sem
			p.releaseWait = wait
			continue
		}
		p.started = true
		wg.Go(func() {
			defer func() { <-sem }()
			p.res = c.submit(sendCtx, p)
		})
	}
	wg.Wait()
}

// submit makes one provider call under the send timeout.
func (c *clientCore) submit(ctx context.Context, p *pair) (res Result) {
	prov := c.providers[p.dev.Transport]
	ctx, cancel := context.WithTimeout(ctx, c.cfg.SendTimeout)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			res = Result{Outcome: OutcomeMaybeSent, Text: fmt.Sprintf("provider panicked: %v", r)}
		}
	}()
	start := time.Now()
	defer func() {
		c.cfg.Observer.Submitted(p.dev.Transport, res.Outcome, time.Since(start))
		if res.Outcome == OutcomeMaybeSent {
			c.cfg.Observer.Ambiguous(p.dev.Transport, false)
		}
	}()
	res = prov.Send(ctx, &p.sub)
	if res.Outcome < OutcomeAccepted || res.Outcome > OutcomeMaybeSent {
		res = Result{Outcome: OutcomeMaybeSent, Text: fmt.Sprintf("provider returned no valid outcome (%d): %s", res.Outcome, res.Text)}
	}
	if res.Throttle && res.RetryAfter > 0 {
		c.setThrottle(p.dev.Transport, res.RetryAfter)
	}
	return res
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

// record writes the batch's outcomes in one transaction guarded by the lease.
// It runs even after a stop (context.WithoutCancel), retrying briefly on
// database errors; if it cannot, the lease expires and the pairs are recovered
// as ambiguous — the safe reading of an unrecorded send.
func (c *Client[TTx]) record(ctx context.Context, b *batch) error {
	ctx = context.WithoutCancel(ctx)
	updates, writes, dead := c.planRecord(b)
	var err error
	pause := 100 * time.Millisecond
	for try := 1; try <= 5; try++ {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var owned map[int64]bool
		err = c.driver.InTx(tctx, func(ctx context.Context, _ TTx, ex driver.Executor) error {
			owned, err = c.recordTx(ctx, ex, b, updates, writes, dead)
			return err
		})
		cancel()
		if err == nil {
			lost := 0
			for _, u := range updates {
				switch {
				case !owned[u.ID]:
					lost++
				case u.Status != driver.StatusPending:
					c.cfg.Observer.Finished(DeliveryStatus(u.Status))
				}
			}
			if lost > 0 {
				c.cfg.Observer.LeaseLost(lost)
			}
			return nil
		}
		c.log.Warn("recording outcomes failed; retrying", slog.Int("try", try), slog.Any("error", err))
		time.Sleep(pause)
		pause *= 2
	}
	c.log.Error("recording outcomes failed; the batch's deliveries will be recovered as ambiguous when their lease expires",
		slog.Int64("lease_id", b.leaseID), slog.Int("deliveries", len(b.deliveries)), slog.Any("error", err))
	return fmt.Errorf("oncepush: record: %w", err)
}

func (c *Client[TTx]) recordTx(ctx context.Context, ex driver.Executor, b *batch, updates []driver.DeliveryUpdate,
	writes *attemptWrites, dead []invalidKey,
) (map[int64]bool, error) {
	got, err := ex.DeliveryUpdateMany(ctx, &driver.DeliveryUpdateManyParams{Now: c.now(), LeaseID: b.leaseID, Updates: updates})
	if err != nil {
		return nil, err
	}
	owned := make(map[int64]bool, len(got))
	for _, id := range got {
		owned[id] = true
	}
	if err := ex.DeviceAttemptUpsertMany(ctx, &driver.DeviceAttemptUpsertManyParams{
		Now: c.now(), Rows: writes.filter(func(id int64) bool { return owned[id] }),
	}); err != nil {
		return nil, err
	}
	var del []driver.DeviceKey
	for _, k := range dead {
		if owned[k.deliveryID] {
			del = append(del, k.DeviceKey)
		}
	}
	if _, err := ex.DeviceDeleteMany(ctx, del); err != nil {
		return nil, err
	}
	if len(got) == len(updates) {
		return owned, nil
	}
	var lost []int64
	for _, u := range updates {
		if !owned[u.ID] {
			lost = append(lost, u.ID)
		}
	}
	leases, err := ex.DeliveryLeaseGetMany(ctx, lost)
	if err != nil {
		return nil, err
	}
	for _, id := range lost {
		if _, exists := leases[id]; !exists {
			c.log.InfoContext(ctx, "delivery deleted while it was being sent (recipient deleted); nothing recorded",
				slog.Int64("delivery_id", id))
		} else {
			c.log.WarnContext(ctx, "lease lost: another run took this delivery; this run's outcomes were not recorded",
				slog.Int64("delivery_id", id), slog.Int64("lease_id", b.leaseID), slog.Int64("current_lease", leases[id]))
		}
	}
	return owned, nil
}

// maxTextBytes bounds a provider's text in the ledger.
const maxTextBytes = 1000

// cleanText makes a provider's words storable: valid UTF-8 (PostgreSQL refuses
// anything else, and a refused record would turn an answer into an ambiguity)
// without NUL bytes, at most maxTextBytes.
func cleanText(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) > maxTextBytes {
		cut := maxTextBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// invalidKey is an invalid-token deletion, kept with its delivery so it is
// applied only when the run still owns the delivery.
type invalidKey struct {
	driver.DeviceKey
	deliveryID int64
}

// planRecord turns the provider answers into delivery updates, ledger writes
// and invalid-token deletions.
func (c *clientCore) planRecord(b *batch) ([]driver.DeliveryUpdate, *attemptWrites, []invalidKey) {
	var updates []driver.DeliveryUpdate
	writes := &attemptWrites{}
	var dead []invalidKey
	for _, d := range b.deliveries {
		failed, released := false, false
		var wait, releaseWait time.Duration
		for _, p := range d.pairs {
			w := driver.DeviceAttemptUpsert{DeliveryID: d.row.ID, DeviceID: p.dev.ID, Transport: string(p.dev.Transport)}
			if !p.started {
				// Never submitted: give the ledger row back its previous state.
				released = true
				releaseWait = max(releaseWait, p.releaseWait)
				w.State, w.SubmissionsDelta = driver.AttemptPending, -1
				if p.prev != nil {
					w.State, w.Error = p.prev.State, p.prev.Error
				}
				writes.add(w)
				continue
			}
			r := p.res
			text := cleanText(r.Text)
			if text == "" {
				text = r.Outcome.String()
			}
			w.Error = string(p.dev.Transport) + " " + text
			devErr := fmt.Sprintf("%s device %d: %s", p.dev.Transport, p.dev.ID, text)
			switch r.Outcome {
			case OutcomeAccepted:
				w.State, w.ProviderID, w.Error = driver.AttemptAccepted, cleanText(r.ProviderID), ""
				d.accepted = true
			case OutcomeInvalidToken:
				w.State = driver.AttemptInvalid
				dead = append(dead, invalidKey{DeviceKey: driver.DeviceKey{ID: p.dev.ID, Recipient: p.dev.Recipient, Token: string(p.dev.Token)}, deliveryID: d.row.ID})
				d.errs = append(d.errs, devErr)
			case OutcomeRejected:
				w.State = driver.AttemptRejected
				d.errs = append(d.errs, devErr)
			case OutcomeRetry:
				w.State = driver.AttemptRetry
				failed = true
				wait = max(wait, r.RetryAfter)
				d.errs = append(d.errs, devErr)
			case OutcomeMaybeSent:
				w.State, w.AmbiguousDelta = driver.AttemptAmbiguous, 1
				d.ambiguous = true
				if d.policy != AmbiguityAtMostOnce {
					failed = true
					wait = max(wait, r.RetryAfter)
				}
				d.errs = append(d.errs, devErr)
			}
			writes.add(w)
		}
		switch {
		case failed:
			updates = append(updates, c.retryOrEnd(d, "", max(wait, releaseWait), true))
		case released:
			updates = append(updates, driver.DeliveryUpdate{ID: d.row.ID, Status: driver.StatusPending, Attempts: d.attempts, Delay: releaseWait, LastError: d.lastError()})
		default:
			updates = append(updates, d.end(d.finalStatus(true)))
		}
	}
	return updates, writes, dead
}
