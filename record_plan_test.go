package oncepush

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush/driver"
)

// recDelivery is a leased delivery with the given pairs, as the record
// finds it after the sends.
func recDelivery(id int64, policy AmbiguityPolicy, attempts int, pairs ...*pair) *delivery {
	d := &delivery{row: &driver.ClaimedDelivery{ID: id}, policy: policy, attempts: attempts}
	for _, p := range pairs {
		p.d = d
		d.pairs = append(d.pairs, p)
	}
	return d
}

// answered is a pair marked, started and answered res; its device is id on
// transport tr, token "token-<id>-secret".
func answered(id int64, tr Transport, res Result) *pair {
	p := &pair{dev: Device{ID: id, Recipient: "r", Transport: tr, Token: Token(fmt.Sprintf("token-%d-secret", id))}, tokenKey: fmt.Sprintf("t%d", id)}
	p.marked, p.started, p.res = true, true, res
	return p
}

// unsent is a pair that never left: marked or not, started or refused at
// the write (late), held by a throttle for releaseWait.
func unsent(id int64, marked, late bool, releaseWait time.Duration, prev *driver.DeviceAttempt) *pair {
	p := answered(id, TransportFCM, Result{})
	p.marked, p.started, p.late, p.releaseWait, p.prev = marked, late, late, releaseWait, prev
	if late {
		p.res = Result{Outcome: OutcomeRetry, Unsent: true, Text: "not started: too late"}
	}
	return p
}

var (
	accepted   = Result{Outcome: OutcomeAccepted, ProviderID: "projects/p/messages/1"}
	unregister = Result{Outcome: OutcomeInvalidToken, Text: "404 UNREGISTERED: Requested entity was not found."}
	malformed  = Result{Outcome: OutcomeRejected, Text: "400 INVALID_ARGUMENT: bad payload"}
	busy       = Result{Outcome: OutcomeRetry, Text: "503 UNAVAILABLE"}
	lost       = Result{Outcome: OutcomeMaybeSent, Text: "no answer after the request was written: timeout"}
)

func TestPlanRecord(t *testing.T) {
	t.Parallel()
	prevRetry := &driver.DeviceAttempt{State: driver.AttemptRetry, Error: "fcm 503 earlier", Submissions: 1}
	for _, tc := range []struct {
		name    string
		d       *delivery
		update  string
		writes  []string
		deleted []string
	}{
		{
			name:   "accepted: settled with the provider's id, the delivery sent",
			d:      recDelivery(1, AmbiguityResend, 0, answered(1, TransportFCM, accepted)),
			update: "d1 sent a0",
			writes: []string{"d1 dev1 fcm/t1 accepted id=projects/p/messages/1"},
		},
		{
			name:    "invalid token: settled, the registration deleted, no attempt counted",
			d:       recDelivery(1, AmbiguityResend, 0, answered(1, TransportFCM, unregister)),
			update:  "d1 failed a0 err=fcm device 1: 404 UNREGISTERED: Requested entity was not found.",
			writes:  []string{"d1 dev1 fcm/t1 invalid err=fcm 404 UNREGISTERED: Requested entity was not found."},
			deleted: []string{"d1 dev1 r token-1-secret"},
		},
		{
			name:   "rejected: settled, the token kept, no attempt counted",
			d:      recDelivery(1, AmbiguityResend, 0, answered(1, TransportAPNs, malformed)),
			update: "d1 failed a0 err=apns device 1: 400 INVALID_ARGUMENT: bad payload",
			writes: []string{"d1 dev1 apns/t1 rejected err=apns 400 INVALID_ARGUMENT: bad payload"},
		},
		{
			name:   "retry: an attempt counted, backoff",
			d:      recDelivery(1, AmbiguityResend, 0, answered(1, TransportFCM, busy)),
			update: "d1 pending a1 in 15s err=fcm device 1: 503 UNAVAILABLE",
			writes: []string{"d1 dev1 fcm/t1 retry err=fcm 503 UNAVAILABLE"},
		},
		{
			name:   "retry: a Retry-After longer than the backoff wins",
			d:      recDelivery(1, AmbiguityResend, 1, answered(1, TransportFCM, Result{Outcome: OutcomeRetry, Text: "429", RetryAfter: 10 * time.Minute})),
			update: "d1 pending a2 in 10m0s err=fcm device 1: 429",
			writes: []string{"d1 dev1 fcm/t1 retry err=fcm 429"},
		},
		{
			name:   "retry: a Retry-After shorter than the backoff loses",
			d:      recDelivery(1, AmbiguityResend, 1, answered(1, TransportFCM, Result{Outcome: OutcomeRetry, Text: "429", RetryAfter: time.Second})),
			update: "d1 pending a2 in 30s err=fcm device 1: 429",
			writes: []string{"d1 dev1 fcm/t1 retry err=fcm 429"},
		},
		{
			name:   "retry on the last attempt ends failed",
			d:      recDelivery(1, AmbiguityResend, 5, answered(1, TransportFCM, busy)),
			update: "d1 failed a6 err=fcm device 1: 503 UNAVAILABLE",
			writes: []string{"d1 dev1 fcm/t1 retry err=fcm 503 UNAVAILABLE"},
		},
		{
			name: "retry of a request that never left: the submission taken back, an attempt counted",
			d: recDelivery(1, AmbiguityResend, 0, func() *pair {
				p := answered(1, TransportFCM, Result{Outcome: OutcomeRetry, Unsent: true, Text: "dial tcp: connection refused"})
				p.prev = prevRetry
				return p
			}()),
			update: "d1 pending a1 in 15s err=fcm device 1: dial tcp: connection refused",
			writes: []string{"d1 dev1 fcm/t1 retry subs-1 err=fcm dial tcp: connection refused"},
		},
		{
			name:   "maybe sent under resend: ambiguous, counted, tried again",
			d:      recDelivery(1, AmbiguityResend, 0, answered(1, TransportFCM, lost)),
			update: "d1 pending a1 in 15s err=fcm device 1: no answer after the request was written: timeout",
			writes: []string{"d1 dev1 fcm/t1 ambiguous amb+1 err=fcm no answer after the request was written: timeout"},
		},
		{
			name:   "maybe sent under at-most-once: ambiguous, final, never tried again",
			d:      recDelivery(1, AmbiguityAtMostOnce, 0, answered(1, TransportFCM, lost)),
			update: "d1 ambiguous a0 err=fcm device 1: no answer after the request was written: timeout",
			writes: []string{"d1 dev1 fcm/t1 ambiguous amb+1 err=fcm no answer after the request was written: timeout"},
		},
		{
			name:   "maybe sent under at-most-once beside an accepted device: sent",
			d:      recDelivery(1, AmbiguityAtMostOnce, 0, answered(1, TransportFCM, lost), answered(2, TransportAPNs, accepted)),
			update: "d1 sent a0 err=fcm device 1: no answer after the request was written: timeout",
			writes: []string{
				"d1 dev1 fcm/t1 ambiguous amb+1 err=fcm no answer after the request was written: timeout",
				"d1 dev2 apns/t2 accepted id=projects/p/messages/1",
			},
		},
		{
			name:   "accepted by one device, failing on another: pending until nothing is left, the attempt counted",
			d:      recDelivery(1, AmbiguityResend, 0, answered(1, TransportFCM, accepted), answered(2, TransportAPNs, busy)),
			update: "d1 pending a1 in 15s err=apns device 2: 503 UNAVAILABLE",
			writes: []string{"d1 dev1 fcm/t1 accepted id=projects/p/messages/1", "d1 dev2 apns/t2 retry err=apns 503 UNAVAILABLE"},
		},
		{
			name:   "accepted by one device, failing on another, attempts used up: sent",
			d:      recDelivery(1, AmbiguityResend, 5, answered(1, TransportFCM, accepted), answered(2, TransportAPNs, busy)),
			update: "d1 sent a6 err=apns device 2: 503 UNAVAILABLE",
			writes: []string{"d1 dev1 fcm/t1 accepted id=projects/p/messages/1", "d1 dev2 apns/t2 retry err=apns 503 UNAVAILABLE"},
		},
		{
			name:    "accepted by one device, invalid on another: sent, that registration deleted",
			d:       recDelivery(1, AmbiguityResend, 0, answered(1, TransportFCM, unregister), answered(2, TransportRuStore, accepted)),
			update:  "d1 sent a0 err=fcm device 1: 404 UNREGISTERED: Requested entity was not found.",
			writes:  []string{"d1 dev1 fcm/t1 invalid err=fcm 404 UNREGISTERED: Requested entity was not found.", "d1 dev2 rustore/t2 accepted id=projects/p/messages/1"},
			deleted: []string{"d1 dev1 r token-1-secret"},
		},
		{
			name:   "never marked (budget, stop, lost lease): no ledger write, due again at once",
			d:      recDelivery(1, AmbiguityResend, 2, unsent(1, false, false, 0, nil)),
			update: "d1 pending a2",
		},
		{
			name:   "held by a provider-wide throttle before the mark: due again after it",
			d:      recDelivery(1, AmbiguityResend, 0, unsent(1, false, false, time.Minute, nil)),
			update: "d1 pending a0 in 1m0s",
		},
		{
			name:   "marked, not started: the pair's previous state back, its submission taken back",
			d:      recDelivery(1, AmbiguityResend, 1, unsent(1, true, false, 0, prevRetry)),
			update: "d1 pending a1",
			writes: []string{"d1 dev1 fcm/t1 retry subs-1 err=fcm 503 earlier"},
		},
		{
			name:   "marked, not started, first time: back to pending",
			d:      recDelivery(1, AmbiguityResend, 0, unsent(1, true, false, 0, nil)),
			update: "d1 pending a0",
			writes: []string{"d1 dev1 fcm/t1 pending subs-1"},
		},
		{
			name:   "refused at the write (CheckStart): released as never started",
			d:      recDelivery(1, AmbiguityAtMostOnce, 0, unsent(1, true, true, 0, nil)),
			update: "d1 pending a0",
			writes: []string{"d1 dev1 fcm/t1 pending subs-1"},
		},
		{
			name:   "a retry beside a throttled pair waits for the longer of the backoff and the throttle",
			d:      recDelivery(1, AmbiguityResend, 0, answered(1, TransportAPNs, busy), unsent(2, false, false, 5*time.Minute, nil)),
			update: "d1 pending a1 in 5m0s err=apns device 1: 503 UNAVAILABLE",
			writes: []string{"d1 dev1 apns/t1 retry err=apns 503 UNAVAILABLE"},
		},
		{
			name:   "an accepted pair beside a released one: pending, the release does not count an attempt",
			d:      recDelivery(1, AmbiguityResend, 0, answered(1, TransportFCM, accepted), unsent(2, false, false, 0, nil)),
			update: "d1 pending a0",
			writes: []string{"d1 dev1 fcm/t1 accepted id=projects/p/messages/1"},
		},
		{
			name:   "the provider's text is recorded without the token, and an empty one as the outcome",
			d:      recDelivery(1, AmbiguityResend, 0, answered(1, TransportFCM, Result{Outcome: OutcomeRejected, Text: "no such token token-1-secret\x00"}), answered(2, TransportFCM, Result{Outcome: OutcomeRejected})),
			update: "d1 failed a0 err=fcm device 1: no such token token-…cret; fcm device 2: rejected",
			writes: []string{"d1 dev1 fcm/t1 rejected err=fcm no such token token-…cret", "d1 dev2 fcm/t2 rejected err=fcm rejected"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := planRecord([]*delivery{tc.d}, rules())
			wantStrings(t, "updates", updateStrings(p.updates), []string{tc.update})
			wantStrings(t, "ledger writes", writeStrings(p.writes.rows), tc.writes)
			var deleted []string
			for _, k := range p.dead {
				deleted = append(deleted, fmt.Sprintf("d%d dev%d %s %s", k.deliveryID, k.ID, k.Recipient, k.Token))
			}
			wantStrings(t, "deleted", deleted, tc.deleted)
		})
	}
}

func TestPlanRecordKeepsClaimNotes(t *testing.T) {
	t.Parallel()
	// A device settled at claim (no provider) left a note; the record's
	// update carries it with the providers' words.
	d := recDelivery(1, AmbiguityResend, 0, answered(2, TransportFCM, malformed))
	d.note(`rustore device 1: no provider configured for transport "rustore"`)
	p := planRecord([]*delivery{d}, rules())
	want := `d1 failed a0 err=rustore device 1: no provider configured for transport "rustore"; fcm device 2: 400 INVALID_ARGUMENT: bad payload`
	if got := updateString(p.updates[0]); got != want {
		t.Fatalf("update\n got  %s\n want %s", got, want)
	}
}

func TestAttemptWrites(t *testing.T) {
	t.Parallel()
	w := &attemptWrites{}
	w.add(driver.DeviceAttemptUpsert{DeliveryID: 1, Transport: "fcm", TokenKey: "a", State: driver.AttemptAmbiguous, AmbiguousDelta: 1, Error: "abandoned"})
	w.add(driver.DeviceAttemptUpsert{DeliveryID: 2, Transport: "fcm", TokenKey: "a", State: driver.AttemptAccepted})
	// The same pair again: one row, deltas summed; a sending write keeps the text.
	w.add(driver.DeviceAttemptUpsert{DeliveryID: 1, Transport: "fcm", TokenKey: "a", State: driver.AttemptSending, SubmissionsDelta: 1, Error: "ignored"})
	wantStrings(t, "merged", writeStrings(w.rows), []string{
		"d1 dev0 fcm/a sending subs+1 amb+1 err=abandoned",
		"d2 dev0 fcm/a accepted",
	})
	w.add(driver.DeviceAttemptUpsert{DeliveryID: 1, Transport: "fcm", TokenKey: "a", State: driver.AttemptRetry, Error: "503\x00"})
	wantStrings(t, "replaced", writeStrings(w.rows), []string{
		"d1 dev0 fcm/a retry subs+1 amb+1 err=503",
		"d2 dev0 fcm/a accepted",
	})
	wantStrings(t, "filtered", writeStrings(w.filter(func(id int64) bool { return id == 2 })), []string{"d2 dev0 fcm/a accepted"})
}

func TestStorableText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"nul\x00byte", "nulbyte"},
		{"bad \xff\xfe utf8", "bad \uFFFD utf8"},
		{"line\r\nbreak\ttab", "line  break tab"},
		{"esc \x1b[31mred", "esc \uFFFD[31mred"},
		{"bidi \u202eevil \u2066x", "bidi \uFFFDevil \uFFFDx"},
	} {
		if got := storableText(tc.in); got != tc.want {
			t.Errorf("storableText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := storableText(strings.Repeat("a", maxTextBytes-1) + "é" + "tail")
	if !strings.HasSuffix(long, "a…") || len(long) > maxTextBytes+len("…") {
		t.Errorf("a long text cut inside a rune or too long: …%q (%d bytes)", long[len(long)-8:], len(long))
	}
}

// The log's view of a record: one outcome per pair whose send started, in
// the ledger's words and with the token masked; pairs that never left are
// not among them.
func TestPlanRecordOutcomes(t *testing.T) {
	t.Parallel()
	echo := Result{Outcome: OutcomeRejected, Text: "400 bad token token-3-secret"}
	refused := Result{Outcome: OutcomeRetry, Unsent: true, Text: "dial: connection refused"}
	slow := busy
	slow.RetryAfter = 30 * time.Second
	d := recDelivery(7, AmbiguityResend, 1,
		answered(1, TransportFCM, accepted), answered(2, TransportAPNs, unregister), answered(3, TransportFCM, echo),
		answered(4, TransportRuStore, slow), answered(5, TransportWebPush, lost), answered(6, TransportFCM, refused),
		unsent(8, true, false, 0, nil), unsent(9, true, true, 0, nil))
	d.row.MessageID, d.row.Recipient = 70, "u_7"
	got := planRecord([]*delivery{d}, rules()).outcomes
	want := []pairOutcome{
		{outcome: OutcomeAccepted, text: "accepted", providerID: "projects/p/messages/1"},
		{outcome: OutcomeInvalidToken, text: unregister.Text},
		{outcome: OutcomeRejected, text: "400 bad token " + MaskToken("token-3-secret")},
		{outcome: OutcomeRetry, text: busy.Text, retryAfter: 30 * time.Second},
		{outcome: OutcomeMaybeSent, text: lost.Text},
		{outcome: OutcomeRetry, text: refused.Text, unsent: true},
	}
	if len(got) != len(want) {
		t.Fatalf("%d outcomes, want %d: %+v", len(got), len(want), got)
	}
	for i, o := range got {
		w := want[i]
		id := int64(i + 1)
		w.deliveryID, w.messageID, w.deviceID, w.recipient = 7, 70, id, "u_7"
		w.transport = d.pairs[i].dev.Transport
		w.token = MaskToken(fmt.Sprintf("token-%d-secret", id))
		if o != w {
			t.Errorf("outcome %d:\n got %+v\nwant %+v", i, o, w)
		}
		if strings.Contains(o.text, "secret") || strings.Contains(o.token, "secret") {
			t.Errorf("outcome %d holds the token: %+v", i, o)
		}
	}
}

// TestPlanRecordCampaignTokens: a campaign pair whose submission provably
// did not reach its device gives its token back to the campaign (a retry
// answered, a request that never left), one that may have reached it keeps
// it; a pair the mark settled as a duplicate writes nothing more, and a
// delivery left with nothing but duplicates ends skipped, not failed.
func TestPlanRecordCampaignTokens(t *testing.T) {
	t.Parallel()
	campaign := func(d *delivery) *delivery {
		d.row.Campaign, d.row.MessageID = true, 5
		return d
	}
	rules := planRules{maxAttempts: 6, backoffMin: time.Second, backoffMax: time.Minute, jitter: func() float64 { return 0 }}
	p := planRecord([]*delivery{
		campaign(recDelivery(1, AmbiguityResend, 0, answered(11, TransportFCM, busy), answered(12, TransportFCM, accepted), answered(13, TransportFCM, lost))),
		campaign(recDelivery(2, AmbiguityResend, 0, unsent(21, true, true, 0, nil))),
		recDelivery(3, AmbiguityResend, 0, answered(31, TransportFCM, busy)), // not a campaign's
	}, rules)
	var freed []string
	for _, k := range p.freed {
		freed = append(freed, fmt.Sprintf("%d/%s/%s@%d", k.MessageID, k.Transport, k.TokenKey, k.DeliveryID))
	}
	if got, want := strings.Join(freed, " "), "5/fcm/t11@1 5/fcm/t21@2"; got != want {
		t.Fatalf("freed %q, want %q", got, want)
	}

	// A pair whose earlier submission may have reached the device (it was
	// ambiguous, or accepted and sent again) keeps the token, whatever this
	// try says: a "later" now does not undo what the lost answer may have
	// delivered, and another recipient's delivery must not take it over.
	wasLost := &driver.DeviceAttempt{State: driver.AttemptAmbiguous, Submissions: 1, Ambiguous: 1}
	retriedAfterLost := answered(51, TransportFCM, busy)
	retriedAfterLost.prev = wasLost
	neverLeftAfterLost := unsent(52, true, true, 0, wasLost)
	busyAfterBusy := answered(53, TransportFCM, busy)
	busyAfterBusy.prev = &driver.DeviceAttempt{State: driver.AttemptRetry, Submissions: 1}
	p = planRecord([]*delivery{campaign(recDelivery(5, AmbiguityResend, 0, retriedAfterLost, neverLeftAfterLost, busyAfterBusy))}, rules)
	freed = freed[:0]
	for _, k := range p.freed {
		freed = append(freed, fmt.Sprintf("%s@%d", k.TokenKey, k.DeliveryID))
	}
	if got, want := strings.Join(freed, " "), "t53@5"; got != want {
		t.Fatalf("after an ambiguous submission: freed %q, want %q (only the pair whose every submission was refused)", got, want)
	}

	dup := answered(41, TransportFCM, Result{})
	dup.marked, dup.started, dup.duplicate = false, false, true
	p = planRecord([]*delivery{campaign(recDelivery(4, AmbiguityResend, 0, dup))}, rules)
	if len(p.writes.rows) != 0 || len(p.freed) != 0 {
		t.Fatalf("a duplicate pair wrote %+v and freed %+v, want nothing (the mark wrote it)", p.writes.rows, p.freed)
	}
	if u := p.updates[0]; u.Status != driver.StatusSkipped || u.LastError == nil || !strings.Contains(*u.LastError, "reached the token through another") {
		t.Fatalf("a delivery whose only device was a duplicate: %+v, want skipped saying why", u)
	}
}

// TestReachedAtMost: the ledger's rule of which submissions may have reached
// a device, as the API's verdict reads it. A retry after a definite refusal
// is no second copy; a resend after a lost answer may be.
func TestReachedAtMost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		state     AttemptState
		ambiguous int
		want      int
	}{
		{"never submitted", AttemptPending, 0, 0},
		{"accepted first time", AttemptAccepted, 0, 1},
		{"503, then accepted", AttemptAccepted, 0, 1},
		{"refused, retrying", AttemptRetry, 0, 0},
		{"rejected", AttemptRejected, 0, 0},
		{"invalid token", AttemptInvalid, 0, 0},
		{"answer lost", AttemptAmbiguous, 1, 1},
		{"answer lost, then accepted", AttemptAccepted, 1, 2},
		{"answer lost, then refused", AttemptRetry, 1, 1},
		{"answer lost, then rejected", AttemptRejected, 1, 1},
		{"answer lost, resend in flight", AttemptSending, 1, 2},
		{"in flight", AttemptSending, 0, 1},
		{"two answers lost", AttemptAmbiguous, 2, 2},
	} {
		a := DeviceAttempt{State: c.state, Ambiguous: c.ambiguous}
		if got := a.ReachedAtMost(); got != c.want {
			t.Errorf("%s: ReachedAtMost = %d, want %d", c.name, got, c.want)
		}
		row := &driver.DeviceAttempt{State: string(c.state), Ambiguous: c.ambiguous}
		if got := mayHaveReached(row); got != (c.want > 0) {
			t.Errorf("%s: mayHaveReached = %v, want %v", c.name, got, c.want > 0)
		}
		d := Delivery{Devices: []DeviceAttempt{{State: AttemptAccepted}, a}}
		if got := d.MayHaveReachedTwice(); got != (c.want > 1) {
			t.Errorf("%s: MayHaveReachedTwice = %v, want %v", c.name, got, c.want > 1)
		}
	}
}
