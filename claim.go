package oncepush

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/oncepush/oncepush/driver"
)

// claimTimeout bounds one claim transaction. The claim does not follow the
// caller's cancellation (see claim), so it needs a bound of its own.
const claimTimeout = 30 * time.Second

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
	var plan *claimPlan
	var finished []string
	err := c.driver.InTx(tctx, func(ctx context.Context, tx TTx, ex driver.Executor) error {
		plan, finished = nil, nil
		res, err := ex.DeliveryClaim(ctx, &driver.DeliveryClaimParams{
			Now: c.now(), Max: c.cfg.BatchSize, LeaseID: b.leaseID, Lease: c.cfg.Lease,
			NoCampaign: c.ceilingSpent(),
		})
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		if len(res.Rows) == 0 {
			return nil
		}
		b.now, b.claimed = res.Now, len(res.Rows)
		in, err := c.claimRead(ctx, ex, res)
		if err != nil {
			return err
		}
		plan = planClaim(in, c.askEligibility(ctx, tx, ex, in), c.planRules())
		if len(c.cfg.CampaignCeilings) > 0 {
			if err := c.takeCeilings(ctx, ex, in.now, plan); err != nil {
				return err
			}
		}
		for _, d := range plan.recovered {
			c.log.WarnContext(ctx, "recovered a delivery whose run ended without recording; its sending devices are ambiguous",
				slog.Int64("delivery_id", d.row.ID), slog.Int64("previous_lease", d.row.PrevLeaseID), slog.String("policy", string(d.policy)))
		}
		if len(plan.updates) > 0 {
			got, err := ex.DeliveryUpdateMany(ctx, &driver.DeliveryUpdateManyParams{Now: c.now(), LeaseID: b.leaseID, Updates: plan.updates})
			if err != nil {
				return fmt.Errorf("claim: finish deliveries: %w", err)
			}
			if len(got) != len(plan.updates) {
				return fmt.Errorf("claim: finished %d of %d deliveries it had just leased", len(got), len(plan.updates))
			}
			for _, u := range got {
				if u.Status != driver.StatusPending {
					finished = append(finished, u.Status)
				}
			}
		}
		if err := ex.DeviceAttemptUpsertMany(ctx, &driver.DeviceAttemptUpsertManyParams{Now: c.now(), Rows: plan.writes.rows}); err != nil {
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
	if plan != nil {
		b.deliveries, b.pairs = plan.deliveries, plan.pairs
		for _, t := range plan.recoveredAttempts {
			c.obs.Ambiguous(t, true)
		}
	}
	buildSubmissions(b.deliveries)
	return b, nil
}

// claimRead reads, one query each for the whole batch, what planning the
// claim needs: the messages, the recipients' devices, the pairs' ledger rows.
func (c *Client[TTx]) claimRead(ctx context.Context, ex driver.Executor, res *driver.DeliveryClaimResult) (*claimInput, error) {
	in := &claimInput{now: res.Now, rows: res.Rows}
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

	r, err := ex.ClaimRead(ctx, &driver.ClaimReadParams{MessageIDs: msgIDs, Recipients: recipients, DeliveryIDs: ids})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	in.messages, in.devices, in.attempts = r.Messages, r.Devices, r.Attempts
	return in, nil
}

// askEligibility asks the eligibility rule about the whole batch in one
// call, inside one savepoint. If that call fails as a whole, each message is
// asked again alone, so a message the rule cannot decide fails only itself.
func (c *Client[TTx]) askEligibility(ctx context.Context, tx TTx, ex driver.Executor, in *claimInput) map[int64]eligibilityAnswer {
	if c.cfg.Eligibility == nil {
		return nil
	}
	asks := eligibilityAsks(in)
	if len(asks) == 0 {
		return nil
	}
	answers := make(map[int64]eligibilityAnswer, len(asks))
	got, err := c.decide(ctx, tx, ex, asks, in.now)
	if err != nil && len(asks) > 1 {
		c.log.WarnContext(ctx, "eligibility failed for the batch; asking message by message",
			slog.Int("messages", len(asks)), slog.Any("error", err))
		for _, a := range asks {
			one, err := c.decide(ctx, tx, ex, []eligibilityAsk{a}, in.now)
			c.keepAnswer(ctx, answers, a, one, err)
		}
		return answers
	}
	for i, a := range asks {
		var one []Answer
		if got != nil {
			one = got[i : i+1]
		}
		c.keepAnswer(ctx, answers, a, one, err)
	}
	return answers
}

// keepAnswer files the rule's answer to one ask (one element or none), or the
// error of the call that asked it, under the ask's message.
func (c *Client[TTx]) keepAnswer(ctx context.Context, answers map[int64]eligibilityAnswer, a eligibilityAsk, got []Answer, err error) {
	var decisions map[string]Decision
	if err == nil && len(got) == 1 {
		decisions, err = got[0].Decisions, got[0].Err
	}
	if err == nil {
		err = strangers(a, decisions)
	}
	if err != nil {
		c.log.ErrorContext(ctx, "eligibility failed; the message's deliveries in this batch back off",
			slog.Int64("message_id", a.msg.ID), slog.Any("error", err))
	}
	answers[a.msg.ID] = eligibilityAnswer{decisions: decisions, err: err}
}

// decide runs the eligibility rule for asks inside a savepoint of the claim
// transaction, so a rule whose query fails cannot abort the claim. A rule
// that panics, or answers a number of asks other than it was given (or nil),
// fails the call.
func (c *Client[TTx]) decide(ctx context.Context, tx TTx, ex driver.Executor, asks []eligibilityAsk, now time.Time) ([]Answer, error) {
	in := make([]Ask, len(asks))
	for i, a := range asks {
		msg := a.msg
		in[i] = Ask{Recipients: a.recipients, Notice: Notice{
			MessageID: msg.ID, Type: msg.Type, Category: msg.Category, Title: msg.Title, Body: msg.Body,
			ScheduledAt: msg.ScheduledAt, ExpiresAt: msg.ExpiresAt, Now: now,
		}}
	}
	var out []Answer
	err := ex.WithSavepoint(ctx, func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("eligibility panicked: %v", r)
			}
		}()
		out, err = c.cfg.Eligibility(context.WithValue(ctx, claimTxKey{}, tx), in)
		return err
	})
	if err == nil && out != nil && len(out) != len(in) {
		return nil, fmt.Errorf("answered %d asks of %d", len(out), len(in))
	}
	return out, err
}
