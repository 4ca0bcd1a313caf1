package oncepush

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/fold"
)

// What the record writes, as a function of the providers' answers.
// record.go writes it; see plan.go.

// recordPlan is what the record writes: each delivery's final status or next
// attempt, the ledger rows of the pairs, and the invalid tokens to delete.
type recordPlan struct {
	updates []driver.DeliveryUpdate
	writes  *attemptWrites
	dead    []invalidKey
	// freed are the campaign tokens whose submission provably did not
	// reach the device (a retry, or a request that never left): another
	// delivery of the campaign may take them over (D107).
	freed []driver.CampaignTokenKey
	// outcomes are the answers of the pairs whose send started, in the
	// ledger's words, for the log.
	outcomes []pairOutcome
}

// pairOutcome is what the log says of one submitted pair.
type pairOutcome struct {
	deliveryID, messageID, deviceID int64
	recipient                       string
	transport                       Transport
	token                           string // masked
	outcome                         Outcome
	unsent                          bool   // a retry whose request provably never left
	text                            string // as the ledger records it, without the transport
	providerID                      string
	retryAfter                      time.Duration
}

// invalidKey is an invalid-token deletion, kept with its delivery so it is
// applied only when the run still owns the delivery.
type invalidKey struct {
	driver.DeviceKey
	deliveryID int64
}

// planRecord turns the batch's answers into delivery updates, ledger writes
// and invalid-token deletions.
func planRecord(deliveries []*delivery, rules planRules) *recordPlan {
	p := &recordPlan{writes: &attemptWrites{}}
	for _, d := range deliveries {
		p.updates = append(p.updates, p.planDelivery(d, rules))
	}
	return p
}

// deliveryEffect sums what a delivery's pairs did to it.
type deliveryEffect struct {
	// failed: a pair is to be tried again after wait (a retry, or a
	// maybe-sent answer under resend): the delivery counts an attempt.
	failed bool
	wait   time.Duration
	// released: a pair was not started; the delivery is due again, after
	// releaseWait when a provider-wide throttle held it.
	released    bool
	releaseWait time.Duration
}

// planDelivery records the delivery's pairs and returns its update.
func (p *recordPlan) planDelivery(d *delivery, rules planRules) driver.DeliveryUpdate {
	var e deliveryEffect
	for _, pr := range d.pairs {
		p.recordPair(d, pr, &e)
	}
	switch {
	case e.failed:
		return rules.retryOrEnd(d, "", max(e.wait, e.releaseWait), true)
	case e.released:
		return driver.DeliveryUpdate{ID: d.row.ID, Status: driver.StatusPending, Attempts: d.attempts, Delay: e.releaseWait, LastError: d.lastError()}
	}
	return d.end(d.finalStatus(true))
}

// recordPair adds the ledger write of one pair: what its answer says, or,
// for a pair that never left, the state it had before this run.
func (p *recordPlan) recordPair(d *delivery, pr *pair, e *deliveryEffect) {
	if pr.duplicate {
		// The mark wrote its ledger row; the delivery notes why it is unsent.
		d.duplicate = true
		d.note(fmt.Sprintf("%s device %d: not sent: this campaign reached the token through another recipient's delivery", pr.dev.Transport, pr.dev.ID))
		return
	}
	if !pr.marked {
		// Never marked: the ledger counted nothing of this run.
		e.released = true
		e.releaseWait = max(e.releaseWait, pr.releaseWait)
		return
	}
	w := driver.DeviceAttemptUpsert{DeliveryID: d.row.ID, DeviceID: pr.dev.ID, Transport: string(pr.dev.Transport), TokenKey: pr.tokenKey}
	r := pr.res
	if !pr.started || pr.late || r.Unsent {
		// Marked, but the request never left: give the row back its
		// previous state and take back the submission it counted.
		w.State, w.SubmissionsDelta = driver.AttemptPending, -1
		if pr.prev != nil {
			w.State, w.Error = pr.prev.State, pr.prev.Error
		}
		p.free(d, pr)
		if !pr.started || pr.late {
			e.released = true
			p.writes.add(w)
			return
		}
	}
	text := storableText(withoutToken(r.Text, pr))
	if text == "" {
		text = r.Outcome.String()
	}
	p.outcomes = append(p.outcomes, pairOutcome{
		deliveryID: d.row.ID, messageID: d.row.MessageID, deviceID: pr.dev.ID, recipient: d.row.Recipient,
		transport: pr.dev.Transport, token: MaskToken(string(pr.dev.Token)), outcome: r.Outcome, unsent: r.Unsent,
		text: text, providerID: storableText(r.ProviderID), retryAfter: r.RetryAfter,
	})
	w.Error = string(pr.dev.Transport) + " " + text
	devErr := fmt.Sprintf("%s device %d: %s", pr.dev.Transport, pr.dev.ID, text)
	switch r.Outcome {
	case OutcomeAccepted:
		w.State, w.ProviderID, w.Error = driver.AttemptAccepted, storableText(r.ProviderID), ""
		d.accepted = true
	case OutcomeInvalidToken:
		w.State = driver.AttemptInvalid
		p.dead = append(p.dead, invalidKey{DeviceKey: driver.DeviceKey{ID: pr.dev.ID, Recipient: pr.dev.Recipient, Token: string(pr.dev.Token)}, deliveryID: d.row.ID})
		d.note(devErr)
	case OutcomeRejected:
		w.State = driver.AttemptRejected
		d.note(devErr)
	case OutcomeRetry:
		if !r.Unsent {
			w.State = driver.AttemptRetry
			p.free(d, pr) // answered "later": not delivered
		}
		e.failed = true
		e.wait = max(e.wait, r.RetryAfter)
		d.note(devErr)
	case OutcomeMaybeSent:
		w.State, w.AmbiguousDelta = driver.AttemptAmbiguous, 1
		d.ambiguous = true
		if d.policy != AmbiguityAtMostOnce {
			e.failed = true
			e.wait = max(e.wait, r.RetryAfter)
		}
		d.note(devErr)
	}
	p.writes.add(w)
}

// free gives back a campaign pair's token in its campaign: this submission
// did not reach the device. A pair with an earlier submission that may have
// (its answer lost, or accepted and then sent again) keeps the token: another
// recipient's delivery taking it over could reach the device a second time.
func (p *recordPlan) free(d *delivery, pr *pair) {
	if pr.prev != nil && mayHaveReached(pr.prev) {
		return
	}
	if d.row.Campaign {
		p.freed = append(p.freed, driver.CampaignTokenKey{MessageID: d.row.MessageID, Transport: string(pr.dev.Transport), TokenKey: pr.tokenKey, DeliveryID: d.row.ID})
	}
}

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

// filter returns the writes of the deliveries keep accepts.
func (w *attemptWrites) filter(keep func(deliveryID int64) bool) []driver.DeviceAttemptUpsert {
	out := w.rows[:0:0]
	for _, r := range w.rows {
		if keep(r.DeliveryID) {
			out = append(out, r)
		}
	}
	return out
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
// panic, must not put a token into the ledger the API shows, nor into the
// outcome log. The match ignores the case of ASCII letters: APNs tokens are
// hexadecimal, stored in lower case, and may come back in upper case.
func withoutToken(text string, p *pair) string {
	for _, secret := range []string{string(p.dev.Token), p.tokenKey} {
		if len(secret) >= 8 {
			text = fold.Replace(text, secret, MaskToken(string(p.dev.Token)))
		}
	}
	return text
}

// mayHaveReached tells whether a ledger row shows a submission that may have
// reached the device: accepted, an answer lost (now or ever), or a mark whose
// run never recorded.
func mayHaveReached(a *driver.DeviceAttempt) bool { return reachedAtMost(a.State, a.Ambiguous) > 0 }

// reachedAtMost counts the submissions of a ledger row (its state, and how
// many of its answers were lost) that may have reached the device: every
// lost answer, and the accepted submission or the one marked and not yet
// recorded. Every other answer said the device was not reached. A row is
// ambiguous only with a lost answer counted; the floor of one keeps the rule
// true of a row written otherwise.
func reachedAtMost(state string, ambiguous int) int {
	switch state {
	case driver.AttemptAccepted, driver.AttemptSending:
		return ambiguous + 1
	case driver.AttemptAmbiguous:
		return max(ambiguous, 1)
	}
	return ambiguous
}
