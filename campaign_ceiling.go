package oncepush

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/oncepush/oncepush/driver"
)

// The per-transport ceiling on campaign submissions (Config.CampaignCeilings,
// D96). The claim counts the campaign pairs it is about to send per
// transport, takes them from the current window's shared row, and puts back
// the campaign deliveries that do not fit, due when the window ends.

// ceilingWindow is one window of a transport's ceiling.
type ceilingWindow struct {
	start, end time.Time
	allowance  int
}

// windowAt returns the window of a ceiling of perMinute that holds now. A
// minute is cut into k windows, as many as let each allow at least
// maxPerDelivery (the most pairs one delivery can need), at most 60; window
// j of k allows ⌊(j+1)·C/k⌋ − ⌊j·C/k⌋, so the minute's allowances sum to C.
func windowAt(now time.Time, perMinute, maxPerDelivery int) ceilingWindow {
	k := min(60, max(1, perMinute/max(1, maxPerDelivery)))
	minute := now.Truncate(time.Minute)
	j := int(now.Sub(minute) * time.Duration(k) / time.Minute)
	return ceilingWindow{
		start:     minute.Add(time.Duration(j) * time.Minute / time.Duration(k)),
		end:       minute.Add(time.Duration(j+1) * time.Minute / time.Duration(k)),
		allowance: (j+1)*perMinute/k - j*perMinute/k,
	}
}

// ceilingAsks counts the plan's campaign pairs per transport with a ceiling.
func (p *claimPlan) ceilingAsks(ceilings map[Transport]int) map[Transport]int {
	asks := map[Transport]int{}
	for _, d := range p.deliveries {
		if !d.row.Campaign {
			continue
		}
		for _, pr := range d.pairs {
			if _, ok := ceilings[pr.dev.Transport]; ok {
				asks[pr.dev.Transport]++
			}
		}
	}
	return asks
}

// applyCeilings keeps, in claim order, the campaign deliveries whose pairs
// fit what the windows granted, and puts the others back: pending, due at
// the end of the window they did not fit, attempts unchanged (no provider
// was asked). A delivery that needs more than a whole window allows (a
// recipient with more devices than MaxDevicesPerRecipient, set lower since)
// goes while anything of the grant is left, so that it is never held for
// ever. It returns how many it put back and the earliest end of a window
// that ran short.
func (p *claimPlan) applyCeilings(granted map[Transport]int, windows map[Transport]ceilingWindow) (deferred int, shortUntil time.Time) {
	left := maps.Clone(granted)
	var kept []*delivery
	p.pairs = p.pairs[:0]
	for _, d := range p.deliveries {
		if !d.row.Campaign {
			kept = append(kept, d)
			p.pairs = append(p.pairs, d.pairs...)
			continue
		}
		need := map[Transport]int{}
		for _, pr := range d.pairs {
			if _, ok := windows[pr.dev.Transport]; ok {
				need[pr.dev.Transport]++
			}
		}
		var until time.Time
		for t, n := range need {
			w := windows[t]
			if n > w.allowance && left[t] > 0 {
				continue // more than any window allows: it goes while some is left
			}
			if n > left[t] && w.end.After(until) {
				until = w.end
			}
		}
		if until.IsZero() {
			for t, n := range need {
				left[t] = max(0, left[t]-n)
			}
			kept = append(kept, d)
			p.pairs = append(p.pairs, d.pairs...)
			continue
		}
		deferred++
		if shortUntil.IsZero() || until.Before(shortUntil) {
			shortUntil = until
		}
		p.updates = append(p.updates, driver.DeliveryUpdate{ID: d.row.ID, Status: driver.StatusPending, Attempts: d.attempts, NextAttemptAt: &until})
	}
	p.deliveries = kept
	return deferred, shortUntil
}

// takeCeilings takes the claim's campaign pairs from the windows of their
// transports' ceilings, in the claim's transaction, and puts back what does
// not fit. While a window it ran short on lasts, this client's claims leave
// the campaign lane alone (ceilingShortUntil), so a spent window costs one
// claim, not a claim per batch of due campaign deliveries.
func (c *clientCore) takeCeilings(ctx context.Context, ex driver.Executor, now time.Time, plan *claimPlan) error {
	asks := plan.ceilingAsks(c.cfg.CampaignCeilings)
	if len(asks) == 0 {
		return nil
	}
	p := &driver.SendWindowParams{}
	windows := map[Transport]ceilingWindow{}
	for _, t := range slices.Sorted(maps.Keys(asks)) {
		w := windowAt(now, c.cfg.CampaignCeilings[t], c.cfg.MaxDevicesPerRecipient)
		windows[t] = w
		p.Transports = append(p.Transports, string(t))
		p.Starts = append(p.Starts, w.start)
		p.Asked = append(p.Asked, asks[t])
		p.Allowance = append(p.Allowance, w.allowance)
	}
	got, err := ex.SendWindowTake(ctx, p)
	if err != nil {
		return fmt.Errorf("claim: campaign ceiling: %w", err)
	}
	granted := make(map[Transport]int, len(got))
	for t, n := range got {
		granted[Transport(t)] = n
	}
	deferred, until := plan.applyCeilings(granted, windows)
	if deferred > 0 {
		c.ceilingShortUntil.Store(until.UnixNano())
		c.log.DebugContext(ctx, "campaign ceiling reached; deliveries put back until the next window",
			slog.Int("deferred", deferred), slog.Time("until", until))
		// Look again when the window ends: the deferred deliveries fall due.
		time.AfterFunc(max(0, until.Sub(now)), c.wake)
	}
	return nil
}

// ceilingSpent says whether a window this client ran short on still lasts.
func (c *clientCore) ceilingSpent() bool {
	until := c.ceilingShortUntil.Load()
	return until != 0 && c.clockNow().UnixNano() < until
}
