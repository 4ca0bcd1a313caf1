package oncepush

import (
	"context"
	"time"
)

// Decision is eligibility's answer for one recipient.
type Decision struct {
	kind   decisionKind
	until  time.Time
	reason string
}

type decisionKind int

const (
	decideSend decisionKind = iota
	decideSkip
	decideDelay
)

// DecisionSend sends now. A recipient absent from eligibility's answer is sent to.
var DecisionSend = Decision{}

// DecisionSkip does not send: the delivery ends skipped, and its dedup key stays
// used.
var DecisionSkip = Decision{kind: decideSkip}

// DelayUntil asks again at t (quiet hours, say). A t at or past the message's
// expiry ends the delivery expired.
func DelayUntil(t time.Time) Decision { return Decision{kind: decideDelay, until: t} }

// Because returns d with the reason for it, in words for the ledger: a
// skipped delivery's last error reads "skipped: <reason>", one delayed past
// its lifetime "expired: … (<reason>)". Say which preference, not whose:
// "opted out of category news", "quiet hours until 07:00 Europe/Zurich".
func (d Decision) Because(reason string) Decision {
	d.reason = reason
	return d
}

// Reason returns what Because gave d ("" if nothing).
func (d Decision) Reason() string { return d.reason }

// IsSkip reports whether d is DecisionSkip.
func (d Decision) IsSkip() bool { return d.kind == decideSkip }

// Until returns the time of a DelayUntil decision and whether d is one.
func (d Decision) Until() (time.Time, bool) { return d.until, d.kind == decideDelay }

// Notice is what eligibility learns about the notification it decides on.
type Notice struct {
	MessageID   int64
	Type        string
	Category    string
	Title       string
	Body        string
	ScheduledAt time.Time
	ExpiresAt   time.Time
	// Now is the claim's instant on oncepush's clock (the database's, or the
	// injected one); compute quiet hours against it, not time.Now.
	Now time.Time
}

// Ask is one notification of a claimed batch that eligibility decides on,
// with its due recipients, each once.
type Ask struct {
	Notice     Notice
	Recipients []string
}

// Answer is eligibility's answer to one Ask. Recipients absent from
// Decisions are sent to. Err fails the ask's message's deliveries in the
// batch: they back off as a retry, with the error recorded.
type Answer struct {
	Decisions map[string]Decision
	Err       error
}

// Eligibility decides who receives what when deliveries fall due (not when
// they are queued, so an opt-out before the send is honoured). It is called
// once per claimed batch with every message of the batch that is still live,
// each with its due recipients, inside the claim transaction (ClaimTx returns
// it): read what the whole batch needs with one query, call nothing slow.
//
// The answer holds one Answer per ask, in the same order; nil sends to
// everyone. An answer about a recipient not asked about fails only that
// message's deliveries. A rule that fails as a whole — an error, a panic, a
// different number of answers — is asked again once per message, each alone
// in its own savepoint, so one message the rule cannot decide holds up no other.
type Eligibility func(ctx context.Context, asks []Ask) ([]Answer, error)

type claimTxKey struct{}

// ClaimTx returns the claim transaction inside an Eligibility call: pgx.Tx with
// driver/postgres, *sql.Tx with driver/sqlite. Reading the application's own rows
// on it is consistent with the claim and needs no second connection.
func ClaimTx[TTx any](ctx context.Context) (TTx, bool) {
	tx, ok := ctx.Value(claimTxKey{}).(TTx)
	return tx, ok
}
