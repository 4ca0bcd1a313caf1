package oncepush

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/enginetest"
	"github.com/oncepush/oncepush/internal/failpoint"
)

// The campaign loop: every started client looks for campaign work every
// Config.CampaignInterval, and at once when this process starts or resumes
// one. A step starts a scheduled campaign that is due, or writes the next
// batch of a sending one's deliveries; see docs/architecture.md,
// "Campaigns".

// CampaignStats says what ExpandCampaigns did.
type CampaignStats struct {
	// Steps is the number of steps that found a campaign to work on.
	Steps int
	// Written is the number of deliveries written.
	Written int
	// Started and Completed count the campaigns started (scheduled ones
	// come due) and completed.
	Started, Completed int
	// Interrupted counts the campaigns whose tries ran out.
	Interrupted int
}

// ExpandCampaigns runs campaign steps until no campaign has work left, or
// one fails (its error is returned; its try counted, the campaign stays
// sending, or becomes interrupted when that try was the
// Config.CampaignMaxTries-th in a row). A started client does this on its
// own; tests and tools call it to expand at a moment of their choosing.
func (c *Client[TTx]) ExpandCampaigns(ctx context.Context) (CampaignStats, error) {
	var st CampaignStats
	for {
		worked, err := c.campaignStep(ctx, &st)
		if err != nil || !worked {
			return st, err
		}
	}
}

// campaignStep counts a try on the campaign due first, then does its work
// in one transaction. It reports whether it found a campaign.
func (c *Client[TTx]) campaignStep(ctx context.Context, st *CampaignStats) (bool, error) {
	try, err := c.driver.Exec().CampaignTry(ctx, &driver.CampaignTryParams{
		Now: c.now(), MaxTries: c.cfg.CampaignMaxTries, Lease: c.cfg.Lease, Abandoned: abandonedTry,
	})
	if err != nil {
		return false, fmt.Errorf("oncepush: pick a campaign: %w", err)
	}
	if !try.Found {
		return false, nil
	}
	st.Steps++
	if try.Interrupted {
		st.Interrupted++
		c.log.WarnContext(ctx, "campaign interrupted: its last try did not finish within a lease and its tries have run out; resume or cancel it",
			slog.Int64("campaign", try.ID), slog.Int("tries", try.Tries))
		return true, nil
	}
	enginetest.From(ctx).CampaignLocking(try.ID)
	var written int
	var started, completed bool
	err = c.driver.InTx(ctx, func(ctx context.Context, _ TTx, ex driver.Executor) error {
		row, err := c.lockCampaign(ctx, ex, try.ID)
		if err != nil {
			return err
		}
		switch row.Status {
		case driver.CampaignScheduled:
			// CampaignTry found it due; under the lock it still is
			// scheduled, so this step is the one that starts it.
			if err := c.startLocked(ctx, ex, row); err != nil {
				return err
			}
			started = true
			return ex.CampaignSave(ctx, row, c.now())
		case driver.CampaignSending:
			written, completed, err = c.expandBatch(ctx, ex, row)
			return err
		default:
			return nil // canceled, completed or interrupted since the try
		}
	})
	if err != nil {
		if c.campaignFailed(ctx, try.ID, try.Tries, err) {
			st.Interrupted++
		}
		return true, fmt.Errorf("oncepush: campaign %d: %w", try.ID, err)
	}
	// Counted once committed; the batch's own wake-up reached other
	// processes' workers, this one reaches ours (SQLite has no other).
	st.Written += written
	if started {
		st.Started++
	}
	if completed {
		st.Completed++
	}
	if written > 0 {
		c.Wake()
	}
	return true, nil
}

// abandonedTry is the last error of a campaign whose last try was counted
// and never ended: its process died, stopped or lost the database between
// the count and the end of its step, so nothing recorded a failure.
const abandonedTry = "interrupted: the last try allowed began a lease ago and did not finish " +
	"(the process running it died, stopped or lost the database)"

// campaignFailed records a failed step's error on the campaign, on its own.
// When the step's try was the last allowed and no batch has committed since
// (tries still at the limit), the campaign is interrupted now, by the one
// step that knows its try failed — never by another process's step, which
// cannot tell a failed try from one still running (D102). It reports whether
// it interrupted the campaign.
func (c *Client[TTx]) campaignFailed(ctx context.Context, id int64, try int, cause error) (interrupted bool) {
	text := cause.Error()
	if len(text) > 1000 {
		text = text[:1000]
	}
	maxTries := c.cfg.CampaignMaxTries
	err := c.driver.InTx(context.WithoutCancel(ctx), func(ctx context.Context, _ TTx, ex driver.Executor) error {
		interrupted = false
		row, err := ex.CampaignLock(ctx, id)
		if err != nil {
			return err
		}
		row.LastError = text
		if try >= maxTries && row.Tries >= maxTries &&
			(row.Status == driver.CampaignSending || row.Status == driver.CampaignScheduled) {
			row.Status = driver.CampaignInterrupted
			row.LastError = fmt.Sprintf("interrupted: %d tries in a row wrote no batch; the last failed: %s", row.Tries, text)
			interrupted = true
		}
		return ex.CampaignSave(ctx, row, c.now())
	})
	switch {
	case err != nil:
		c.log.WarnContext(ctx, "campaign expansion failed, and recording the failure failed too",
			slog.Int64("campaign", id), slog.Int("tries", try), slog.Any("error", cause), slog.Any("record_error", err))
	case interrupted:
		c.log.WarnContext(ctx, "campaign interrupted: its expansion failed too many times in a row; resume or cancel it",
			slog.Int64("campaign", id), slog.Int("tries", try), slog.Any("error", cause))
	default:
		c.log.WarnContext(ctx, "campaign expansion failed; the next try goes on from the cursor",
			slog.Int64("campaign", id), slog.Int("tries", try), slog.Int("max_tries", maxTries), slog.Any("error", cause))
	}
	return interrupted
}

// expandBatch writes the deliveries of the next batch of a sending
// campaign's audience after its cursor, and moves the cursor, in the
// transaction holding the campaign's row. It returns how many deliveries it
// wrote and whether the audience is exhausted (the campaign completed).
func (c *clientCore) expandBatch(ctx context.Context, ex driver.Executor, row *driver.Campaign) (int, bool, error) {
	aud, err := parseAudience(row.Filter)
	if err != nil {
		return 0, false, err
	}
	if aud == nil {
		aud = &audience{}
	}
	limit := c.cfg.CampaignBatch
	var recipients []string
	var devices []*driver.Device
	var last string
	var done bool
	switch row.Audience {
	case driver.AudienceRecipients:
		if recipients, err = ex.CampaignRecipientsAfter(ctx, row.ID, row.Cursor, limit); err != nil {
			return 0, false, err
		}
		done = len(recipients) < limit
		if len(recipients) > 0 {
			last = recipients[len(recipients)-1]
			if devices, err = ex.DeviceListByRecipients(ctx, recipients); err != nil {
				return 0, false, err
			}
		}
	case driver.AudienceDevices:
		// One row more than the batch: when the page is full, its last
		// recipient may have more devices beyond it, so the batch ends
		// before that recipient, who starts the next one (D81).
		if devices, err = ex.DeviceListAfter(ctx, row.Cursor, limit+1); err != nil {
			return 0, false, err
		}
		done = len(devices) <= limit
		if !done {
			cut := devices[len(devices)-1].Recipient
			for len(devices) > 0 && devices[len(devices)-1].Recipient == cut {
				devices = devices[:len(devices)-1]
			}
			if len(devices) == 0 {
				// One recipient fills the page: the batch is that
				// recipient, whole.
				if devices, err = ex.DeviceListByRecipients(ctx, []string{cut}); err != nil {
					return 0, false, err
				}
			}
		}
		for _, d := range devices {
			if len(recipients) == 0 || recipients[len(recipients)-1] != d.Recipient {
				recipients = append(recipients, d.Recipient)
			}
		}
		if len(recipients) > 0 {
			last = recipients[len(recipients)-1]
		}
	default:
		return 0, false, fmt.Errorf("unknown audience %q", row.Audience)
	}

	spec, err := specFromRow(row)
	if err != nil {
		return 0, false, err
	}
	targeted, zones := c.targets(aud, recipients, devices, row)
	var dueAt []time.Time
	var nids []string
	for i, r := range targeted {
		nids = append(nids, campaignNotificationID(spec.Message.Type, r, row.ID))
		if l := spec.LocalTime; l != nil {
			dueAt = append(dueAt, l.instant(l.zone(zones[r])))
		} else {
			dueAt = append(dueAt, campaignDue(row, row.Written+int64(i)))
		}
	}
	written := 0
	if len(targeted) > 0 {
		if written, err = ex.CampaignDeliveryInsert(ctx, &driver.CampaignDeliveryInsertParams{
			Now: c.now(), MessageID: row.MessageID, Recipients: targeted, NotificationIDs: nids, DueAt: dueAt,
		}); err != nil {
			return 0, false, err
		}
	}
	if last != "" {
		row.Cursor = last
	}
	row.Written += int64(written)
	row.Tries = 0
	if done {
		row.Status = driver.CampaignCompleted
		row.FinishedAt = c.nowOr(row.UpdatedAt)
	}
	if err := enginetest.From(ctx).CampaignBatch(row.ID, written); err != nil {
		return 0, false, err
	}
	if err := ex.CampaignSave(ctx, row, c.now()); err != nil {
		return 0, false, err
	}
	if written > 0 {
		if err := ex.Wake(ctx); err != nil {
			return 0, false, err
		}
	}
	// Every statement of the batch has run; a crash here must leave
	// neither its deliveries nor its cursor.
	failpoint.Hit(failpoint.CampaignBatch)
	return written, done, nil
}

// targets returns the recipients of the batch that get a delivery: those
// with a device the campaign reaches, and for each the time zone of the
// most recently registered such device that has one. It counts in row the
// devices left out for a malformed token, and those whose token key
// another device of the batch already holds (one target per actual token);
// and each recipient it leaves out, under the furthest any of its devices
// got (D155), so that written plus not written is the audience passed.
func (c *clientCore) targets(aud *audience, recipients []string, devices []*driver.Device, row *driver.Campaign) ([]string, map[string]string) {
	reach := map[string]reachStage{}
	zones := map[string]string{}
	zoneAt := map[string]time.Time{}
	tokens := map[pairKey]bool{}
	got := func(r string, s reachStage) {
		reach[r] = max(reach[r], s)
	}
	for _, d := range devices {
		got(d.Recipient, hasDevice)
		if !aud.filter.matches(d) {
			continue
		}
		got(d.Recipient, selected)
		key, ok := wellFormed(c.transports, d)
		if !ok {
			row.InvalidTokens++
			continue
		}
		got(d.Recipient, wellFormedToken)
		k := pairKey{d.Transport, key}
		if tokens[k] {
			row.DuplicateTokens++
			continue
		}
		tokens[k] = true
		got(d.Recipient, reached)
		if d.TimeZone != "" && !d.RegisteredAt.Before(zoneAt[d.Recipient]) {
			zones[d.Recipient], zoneAt[d.Recipient] = d.TimeZone, d.RegisteredAt
		}
	}
	var out []string
	for _, r := range recipients {
		switch reach[r] {
		case reached:
			out = append(out, r)
		case noDevice:
			row.NoDevice++
		case hasDevice:
			row.FilteredOut++
		case selected:
			row.MalformedOnly++
		case wellFormedToken:
			row.DuplicateOnly++
		}
	}
	return out, zones
}

// reachStage is how far a recipient's devices got through the expansion's
// rule: the furthest of them says why a recipient was not written.
type reachStage int

const (
	noDevice        reachStage = iota // no registered device
	hasDevice                         // devices, none the filter selects
	selected                          // selected, every token malformed
	wellFormedToken                   // well formed, every token another's target
	reached                           // a target: written
)

// campaignNotificationID is the notification id of a campaign's delivery:
// content-derived, so a batch written again gives each recipient the same
// one, and from a key of a shape no send makes (a send's is {"dedupKey": …},
// notificationIDFor), so no caller's notification can share it and be
// dropped by a device's seen-set as the campaign's (D105).
func campaignNotificationID(typ, recipient string, campaign int64) string {
	return NotificationID(typ, recipient, map[string]any{"campaign": campaign})
}

// campaignDue is when the k-th delivery of a campaign falls due: at once
// without pacing, else k·60/R seconds after its start (D82).
func campaignDue(row *driver.Campaign, k int64) time.Time {
	start := time.Time{}
	if row.StartedAt != nil {
		start = *row.StartedAt
	}
	if row.RatePerMinute <= 0 {
		return start
	}
	return start.Add(time.Duration(float64(k) * float64(time.Minute) / float64(row.RatePerMinute)))
}

// campaignLoop runs campaign steps while a started client runs.
func (c *Client[TTx]) campaignLoop(ctx context.Context, wake <-chan struct{}) {
	loop(ctx, 0, wake, nil, func() time.Duration {
		c.compactTally(ctx)
		var st CampaignStats
		for ctx.Err() == nil {
			worked, err := c.campaignStep(ctx, &st)
			if err != nil && !errors.Is(err, context.Canceled) {
				break // its error is logged; the next tick tries again
			}
			if !worked {
				break
			}
		}
		return c.cfg.CampaignInterval
	})
}

// wakeCampaigns makes this process's campaign loop look for work at once.
func (c *clientCore) wakeCampaigns() {
	select {
	case c.campaignWake <- struct{}{}:
	default:
	}
}

// tallyCompactRows is how many delta rows a campaign message's tally may
// gather before the campaign loop folds them (PostgreSQL; D95): a read sums
// at most about this many rows per message.
const tallyCompactRows = 1000

// compactTally folds the tally's deltas; a failure is logged and left to
// the next tick, since a read sums deltas correctly however many there are.
func (c *Client[TTx]) compactTally(ctx context.Context) {
	if _, err := c.driver.Exec().CampaignTallyCompact(ctx, tallyCompactRows); err != nil && ctx.Err() == nil {
		c.log.WarnContext(ctx, "campaign totals: folding the tally failed; reads stay correct", slog.Any("error", err))
	}
}
