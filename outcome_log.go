package oncepush

import (
	"context"
	"log/slog"
	"slices"
	"time"
)

// The outcome log: what a run did, in the providers' words, after the record
// committed. See docs/architecture.md, "Logs".

// runTally counts a run's recorded outcomes by transport, for its summary.
type runTally map[Transport]map[Outcome]int

// outcomeLine is the warn line of an outcome that is not a success; "" for
// one that needs none.
func outcomeLine(o pairOutcome) string {
	switch o.outcome {
	case OutcomeRetry:
		if o.unsent {
			return "provider not reached; will retry"
		}
		return "provider asked to retry"
	case OutcomeRejected:
		return "provider rejected the notification"
	case OutcomeInvalidToken:
		return "invalid token; device deleted"
	case OutcomeMaybeSent:
		return "answer lost; the notification may have been delivered"
	}
	return ""
}

// logOutcomes logs the recorded outcomes of the deliveries the run still
// owned, and counts them in tally.
func (c *clientCore) logOutcomes(ctx context.Context, outcomes []pairOutcome, owned map[int64]bool, tally runTally) {
	debug := c.log.Enabled(ctx, slog.LevelDebug)
	for _, o := range outcomes {
		if !owned[o.deliveryID] {
			continue
		}
		if tally[o.transport] == nil {
			tally[o.transport] = map[Outcome]int{}
		}
		tally[o.transport][o.outcome]++
		attrs := []slog.Attr{
			slog.Int64("delivery_id", o.deliveryID), slog.Int64("message_id", o.messageID),
			slog.String("recipient", o.recipient), slog.Int64("device_id", o.deviceID),
			slog.String("transport", string(o.transport)), slog.String("token", o.token),
		}
		if o.outcome == OutcomeAccepted {
			attrs = append(attrs, slog.String("provider_id", o.providerID))
		} else {
			attrs = append(attrs, slog.String("error", string(o.transport)+" "+o.text))
		}
		if o.retryAfter > 0 {
			attrs = append(attrs, slog.Duration("retry_after", o.retryAfter))
		}
		if debug {
			c.log.LogAttrs(ctx, slog.LevelDebug, "device outcome", append(attrs, slog.String("outcome", o.outcome.String()))...)
		}
		line := outcomeLine(o)
		if line == "" {
			continue
		}
		ok, suppressed := c.logLimit.allow(line+"\x00"+string(o.transport)+"\x00"+o.text, c.clockNow())
		if !ok {
			continue
		}
		if suppressed > 0 {
			attrs = append(attrs, slog.Int("suppressed", suppressed))
		}
		c.log.LogAttrs(ctx, slog.LevelWarn, line, attrs...)
	}
}

// logRun logs the summary of a run that claimed something.
func (c *clientCore) logRun(ctx context.Context, st RunStats, tally runTally, took time.Duration) {
	if st.Claimed == 0 {
		return
	}
	attrs := []slog.Attr{
		slog.Int("claimed", st.Claimed), slog.Int("batches", st.Batches), slog.Int("submitted", st.Submitted),
		slog.Int("released", st.Released), slog.Duration("duration", took),
	}
	names := make([]Transport, 0, len(tally))
	for t := range tally {
		names = append(names, t)
	}
	slices.Sort(names)
	for _, t := range names {
		var counts []any
		for _, o := range []struct {
			key string
			o   Outcome
		}{{"sent", OutcomeAccepted}, {"retry", OutcomeRetry}, {"rejected", OutcomeRejected},
			{"invalid_token", OutcomeInvalidToken}, {"maybe_sent", OutcomeMaybeSent}} {
			if n := tally[t][o.o]; n > 0 {
				counts = append(counts, slog.Int(o.key, n))
			}
		}
		attrs = append(attrs, slog.Group(string(t), counts...))
	}
	c.log.LogAttrs(ctx, slog.LevelInfo, "delivery run", attrs...)
}
