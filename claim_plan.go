package oncepush

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"github.com/oncepush/oncepush/driver"
)

// What the claim decides without a provider, as functions of what it read.
// claim.go does the reading and writing; see plan.go.

const textAbandoned = "no answer recorded: the run that submitted it ended before recording, and its lease expired"

// claimInput is what the claim read: the deliveries it leased, their
// messages, their recipients' devices and their pairs' ledger rows, and the
// claim's now as the database saw it.
type claimInput struct {
	now      time.Time
	rows     []*driver.ClaimedDelivery
	messages []*driver.Message
	devices  []*driver.Device
	attempts []*driver.DeviceAttempt
}

// eligibilityAsk is one call of the eligibility rule: a message that exists
// and has not expired, with its due recipients, each once, in claim order.
type eligibilityAsk struct {
	msg        *driver.Message
	recipients []string
}

// eligibilityAnswer is what the rule said about one message's recipients:
// its decisions, or why it failed.
type eligibilityAnswer struct {
	decisions map[string]Decision
	err       error
}

// claimPlan is what the claim decided.
type claimPlan struct {
	// updates finish or reschedule the deliveries that will not be sent.
	updates []driver.DeliveryUpdate
	// writes are the ledger rows the claim settles: recovered ambiguities,
	// devices whose transport has no provider.
	writes *attemptWrites
	// deliveries are those with pairs to send, and pairs those pairs.
	deliveries []*delivery
	pairs      []*pair
	// recovered are the deliveries found with attempts a dead run left
	// sending, and recoveredAttempts the transports of those attempts.
	recovered         []*delivery
	recoveredAttempts []Transport
}

// eligibilityAsks returns the rule's calls for a claim: one per message that
// exists and has not expired, in claim order.
func eligibilityAsks(in *claimInput) []eligibilityAsk {
	msgs := messagesByID(in.messages)
	var asks []eligibilityAsk
	index := map[int64]int{}
	seen := map[int64]map[string]bool{}
	for _, r := range in.rows {
		m := msgs[r.MessageID]
		if m == nil || !in.now.Before(m.ExpiresAt) {
			continue
		}
		i, ok := index[m.ID]
		if !ok {
			i = len(asks)
			index[m.ID] = i
			seen[m.ID] = map[string]bool{}
			asks = append(asks, eligibilityAsk{msg: m})
		}
		if !seen[m.ID][r.Recipient] {
			seen[m.ID][r.Recipient] = true
			asks[i].recipients = append(asks[i].recipients, r.Recipient)
		}
	}
	return asks
}

// strangers reports an answer about a recipient the rule was not asked about:
// a rule that answers for others is wrong about the rest too.
func strangers(ask eligibilityAsk, decisions map[string]Decision) error {
	if len(decisions) == 0 {
		return nil
	}
	asked := make(map[string]bool, len(ask.recipients))
	for _, r := range ask.recipients {
		asked[r] = true
	}
	for r := range decisions {
		if !asked[r] {
			return fmt.Errorf("answered about recipient %q, who was not asked about", r)
		}
	}
	return nil
}

// planClaim decides each claimed delivery: finish it, delay it, or send to its
// unsettled devices. answers holds the eligibility rule's answer per message
// id (none: send to everyone).
func planClaim(in *claimInput, answers map[int64]eligibilityAnswer, rules planRules) *claimPlan {
	p := &claimPlan{writes: &attemptWrites{}}
	msgs := messagesByID(in.messages)
	devices := map[string][]*driver.Device{}
	for _, d := range in.devices {
		devices[d.Recipient] = append(devices[d.Recipient], d)
	}
	prior := map[int64]map[pairKey]*driver.DeviceAttempt{}
	for _, a := range in.attempts {
		m := prior[a.DeliveryID]
		if m == nil {
			m = map[pairKey]*driver.DeviceAttempt{}
			prior[a.DeliveryID] = m
		}
		m[pairKey{a.Transport, a.TokenKey}] = a
	}

	// Group by message, in claim order, as the rule was asked.
	var order []int64
	groups := map[int64][]*delivery{}
	for _, r := range in.rows {
		d := &delivery{row: r, msg: msgs[r.MessageID], attempts: r.Attempts, prior: prior[r.ID]}
		if d.msg != nil {
			d.policy = AmbiguityPolicy(d.msg.Ambiguity)
		}
		p.recover(d)
		if _, ok := groups[r.MessageID]; !ok {
			order = append(order, r.MessageID)
		}
		groups[r.MessageID] = append(groups[r.MessageID], d)
	}
	for _, id := range order {
		p.planMessage(in.now, msgs[id], groups[id], answers[id], devices, rules)
	}
	return p
}

// recover reads the delivery's ledger rows. Attempts still sending were left
// by a run that never recorded: the provider may have them. They become
// ambiguous, and count as one attempt of the delivery.
func (p *claimPlan) recover(d *delivery) {
	recovered := false
	for _, a := range d.prior {
		switch a.State {
		case driver.AttemptAccepted:
			d.accepted = true
		case driver.AttemptAmbiguous:
			d.ambiguous = true
		case driver.AttemptDuplicate:
			d.duplicate = true
		case driver.AttemptSending:
			p.writes.add(driver.DeviceAttemptUpsert{
				DeliveryID: d.row.ID, DeviceID: a.DeviceID, Transport: a.Transport, TokenKey: a.TokenKey,
				State: driver.AttemptAmbiguous, AmbiguousDelta: 1, Error: textAbandoned,
			})
			a.State = driver.AttemptAmbiguous
			d.ambiguous, recovered = true, true
			p.recoveredAttempts = append(p.recoveredAttempts, Transport(a.Transport))
		}
	}
	if recovered {
		d.attempts++
		p.recovered = append(p.recovered, d)
	}
}

// planMessage decides one message's deliveries: all of them, when the
// message is missing, expired or its rule failed; else each on its own.
func (p *claimPlan) planMessage(now time.Time, msg *driver.Message, ds []*delivery, ans eligibilityAnswer,
	devices map[string][]*driver.Device, rules planRules,
) {
	var aud *audience
	var audErr error
	if msg != nil {
		aud, audErr = parseAudience(msg.Audience)
	}
	for _, d := range ds {
		switch {
		case msg == nil: // cannot happen under the foreign key; never strand the rows
			p.updates = append(p.updates, rules.retryOrEnd(d, "message not found", 0, true))
		case !now.Before(msg.ExpiresAt):
			if !d.accepted {
				d.note("expired: its lifetime ended at " + stamp(msg.ExpiresAt) + " before it was sent")
			}
			p.updates = append(p.updates, d.end(driver.StatusExpired))
		case ans.err != nil:
			p.updates = append(p.updates, rules.retryOrEnd(d, "eligibility: "+ans.err.Error(), 0, true))
		case audErr != nil:
			p.updates = append(p.updates, rules.retryOrEnd(d, audErr.Error(), 0, true))
		case aud != nil:
			p.planDelivery(d, ans.decisions[d.row.Recipient], aud.devices(rules.transports, devices[d.row.Recipient]), rules)
		default:
			p.planDelivery(d, ans.decisions[d.row.Recipient], devices[d.row.Recipient], rules)
		}
	}
}

// planDelivery decides one delivery of a live message by its rule's decision
// and its devices.
func (p *claimPlan) planDelivery(d *delivery, dec Decision, devices []*driver.Device, rules planRules) {
	switch dec.kind {
	case decideSkip:
		if !d.accepted {
			d.note("skipped: " + cmp.Or(dec.reason, "the eligibility rule said skip"))
		}
		p.updates = append(p.updates, d.end(driver.StatusSkipped))
		return
	case decideDelay:
		if !dec.until.Before(d.msg.ExpiresAt) {
			if !d.accepted {
				why := ""
				if dec.reason != "" {
					why = " (" + dec.reason + ")"
				}
				d.note("expired: the eligibility rule delayed it until " + stamp(dec.until) + why +
					", at or past the end of its lifetime, " + stamp(d.msg.ExpiresAt))
			}
			p.updates = append(p.updates, d.end(driver.StatusExpired))
			return
		}
		until := dec.until
		p.updates = append(p.updates, driver.DeliveryUpdate{ID: d.row.ID, Status: driver.StatusPending, Attempts: d.attempts, NextAttemptAt: &until})
		return
	}
	if d.attempts >= rules.maxAttempts { // only a recovery can get here
		p.updates = append(p.updates, d.end(d.finalStatus(len(devices) > 0)))
		return
	}
	for _, dev := range devices {
		p.addPair(d, dev, rules)
	}
	if len(d.pairs) == 0 {
		p.updates = append(p.updates, d.end(d.finalStatus(len(devices) > 0)))
		return
	}
	p.deliveries = append(p.deliveries, d)
	p.pairs = append(p.pairs, d.pairs...)
}

// addPair adds the (delivery, device) pair to send, unless the ledger has it
// settled; a device whose transport has no provider is settled here, as
// rejected.
func (p *claimPlan) addPair(d *delivery, dev *driver.Device, rules planRules) {
	prev := d.prior[pairKey{dev.Transport, dev.TokenKey}]
	if prev != nil && settled(prev.State, d.policy) {
		return
	}
	if !rules.serves(Transport(dev.Transport)) {
		text := fmt.Sprintf("no provider configured for transport %q", dev.Transport)
		p.writes.add(driver.DeviceAttemptUpsert{DeliveryID: d.row.ID, DeviceID: dev.ID, Transport: dev.Transport,
			TokenKey: dev.TokenKey, State: driver.AttemptRejected, Error: dev.Transport + " " + text})
		d.note(fmt.Sprintf("%s device %d: %s", dev.Transport, dev.ID, text))
		return
	}
	d.pairs = append(d.pairs, &pair{d: d, dev: deviceFromRow(dev), tokenKey: dev.TokenKey, prev: prev})
}

func messagesByID(msgs []*driver.Message) map[int64]*driver.Message {
	out := make(map[int64]*driver.Message, len(msgs))
	for _, m := range msgs {
		out[m.ID] = m
	}
	return out
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

// stamp is an instant as the ledger's texts write it: RFC 3339, UTC.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
