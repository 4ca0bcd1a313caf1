package oncepush

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/failpoint"
)

// recordTryTimeout bounds one try of the record transaction.
const recordTryTimeout = 30 * time.Second

// attemptWrites collects ledger writes, merged per pair so one statement
// never touches a row twice.
type attemptWrites struct {
	rows  []driver.DeviceAttemptUpsert
	index map[attemptRow]int
}

type attemptRow struct {
	deliveryID int64
	key        pairKey
}

// add queues a ledger write, its text made storable: every ledger text
// passes here or through delivery.lastError.
func (w *attemptWrites) add(u driver.DeviceAttemptUpsert) {
	u.Error = storableText(u.Error)
	if w.index == nil {
		w.index = map[attemptRow]int{}
	}
	k := attemptRow{u.DeliveryID, pairKey{u.Transport, u.TokenKey}}
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

// record writes the batch's outcomes in one transaction guarded by the lease.
// It runs even after a stop (context.WithoutCancel). A slow or failing
// database does not make it give up: it tries again, with a pause, for as long
// as the lease may still be this run's — unless sendCtx has ended (a stop
// whose deadline passed), when a failed try is the last, so a stop is not held
// up by a database that is down. Pairs not recorded are recovered as ambiguous
// when the lease expires — the safe reading of an unrecorded send.
func (c *Client[TTx]) record(sendCtx context.Context, b *batch) error {
	failpoint.Hit(failpoint.Answered)
	ctx := context.WithoutCancel(sendCtx)
	updates, writes, dead := c.planRecord(b)
	leaseEnd, leaseEndReal := b.claimedAt.Add(c.cfg.Lease), b.claimedReal.Add(c.cfg.Lease)
	var err error
	pause := 50 * time.Millisecond
	for try := 1; ; try++ {
		tctx, cancel := context.WithTimeout(ctx, recordTryTimeout)
		var owned map[int64]bool
		err = c.driver.InTx(tctx, func(ctx context.Context, _ TTx, ex driver.Executor) error {
			owned, err = c.recordTx(ctx, ex, b, updates, writes, dead)
			return err
		})
		cancel()
		if err == nil {
			failpoint.Hit(failpoint.Recorded)
			lost := 0
			for _, u := range updates {
				switch {
				case !owned[u.ID]:
					lost++
				case u.Status != driver.StatusPending:
					c.obs.Finished(DeliveryStatus(u.Status))
				}
			}
			if lost > 0 {
				c.obs.LeaseLost(lost)
			}
			return nil
		}
		if sendCtx.Err() != nil || !c.clockNow().Before(leaseEnd) || !time.Now().Before(leaseEndReal) {
			break
		}
		c.log.Warn("recording outcomes failed; retrying while the lease holds", slog.Int("try", try), slog.Any("error", err))
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
	c.log.Error("recording outcomes failed until the lease could have expired; the batch's deliveries will be recovered as ambiguous",
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

// maxTextBytes bounds a text in the ledger.
const maxTextBytes = 1000

// storableText makes text from code oncepush does not own (providers,
// eligibility rules, panics) storable and safe to show: valid UTF-8
// (PostgreSQL refuses anything else, and a refused write would fail the claim
// or the record), no NUL bytes, no control or bidirectional-override
// characters (a terminal or log viewer would obey them), at most
// maxTextBytes.
func storableText(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	s = strings.Map(printable, s)
	if len(s) > maxTextBytes {
		cut := maxTextBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// printable maps a rune of foreign text to what the ledger keeps: white space
// controls become a space, other controls and bidirectional overrides the
// replacement character.
func printable(r rune) rune {
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return ' '
	case unicode.IsControl(r), r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return '\uFFFD'
	}
	return r
}

// withoutToken masks the device's token (and a Web Push endpoint) in a
// provider's text: a push service that echoes its request, or a provider's
// panic, must not put a token into the ledger the API shows.
func withoutToken(text string, p *pair) string {
	for _, secret := range []string{string(p.dev.Token), p.tokenKey} {
		if len(secret) >= 8 {
			text = strings.ReplaceAll(text, secret, MaskToken(string(p.dev.Token)))
		}
	}
	return text
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
			w := driver.DeviceAttemptUpsert{DeliveryID: d.row.ID, DeviceID: p.dev.ID, Transport: string(p.dev.Transport), TokenKey: p.tokenKey}
			r := p.res
			if !p.marked {
				// Never marked: the ledger counted nothing of this run.
				released = true
				releaseWait = max(releaseWait, p.releaseWait)
				continue
			}
			if !p.started || p.late || r.Unsent {
				// Marked, but the request never left: give the row back its
				// previous state and take back the submission it counted.
				w.State, w.SubmissionsDelta = driver.AttemptPending, -1
				if p.prev != nil {
					w.State, w.Error = p.prev.State, p.prev.Error
				}
				if !p.started || p.late {
					released = true
					writes.add(w)
					continue
				}
			}
			text := storableText(withoutToken(r.Text, p))
			if text == "" {
				text = r.Outcome.String()
			}
			w.Error = string(p.dev.Transport) + " " + text
			devErr := fmt.Sprintf("%s device %d: %s", p.dev.Transport, p.dev.ID, text)
			switch r.Outcome {
			case OutcomeAccepted:
				w.State, w.ProviderID, w.Error = driver.AttemptAccepted, storableText(r.ProviderID), ""
				d.accepted = true
			case OutcomeInvalidToken:
				w.State = driver.AttemptInvalid
				dead = append(dead, invalidKey{DeviceKey: driver.DeviceKey{ID: p.dev.ID, Recipient: p.dev.Recipient, Token: string(p.dev.Token)}, deliveryID: d.row.ID})
				d.note(devErr)
			case OutcomeRejected:
				w.State = driver.AttemptRejected
				d.note(devErr)
			case OutcomeRetry:
				if !r.Unsent {
					w.State = driver.AttemptRetry
				}
				failed = true
				wait = max(wait, r.RetryAfter)
				d.note(devErr)
			case OutcomeMaybeSent:
				w.State, w.AmbiguousDelta = driver.AttemptAmbiguous, 1
				d.ambiguous = true
				if d.policy != AmbiguityAtMostOnce {
					failed = true
					wait = max(wait, r.RetryAfter)
				}
				d.note(devErr)
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
