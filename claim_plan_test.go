package oncepush

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/oncepush/oncepush/driver"
)

// Messages of the claim tests: m1 lives an hour under resend, m2 an hour
// under at-most-once, m9 expired at the claim's now.
var (
	m1 = &driver.Message{ID: 1, Type: "t", Title: "one", Ambiguity: string(AmbiguityResend), ExpiresAt: t0.Add(time.Hour)}
	m2 = &driver.Message{ID: 2, Type: "t", Title: "two", Ambiguity: string(AmbiguityAtMostOnce), ExpiresAt: t0.Add(time.Hour)}
	m9 = &driver.Message{ID: 9, Type: "t", Title: "old", Ambiguity: string(AmbiguityResend), ExpiresAt: t0}
)

// row is delivery id of message msg to recipient, with attempts recorded before.
func row(id, msg int64, recipient string, attempts int) *driver.ClaimedDelivery {
	return &driver.ClaimedDelivery{ID: id, MessageID: msg, Recipient: recipient, NotificationID: fmt.Sprintf("n%d", id), Attempts: attempts}
}

// dev is device id of recipient; its token key is "t<id>" unless key is given.
func dev(id int64, recipient string, tr Transport, key ...string) *driver.Device {
	k := fmt.Sprintf("t%d", id)
	if len(key) > 0 {
		k = key[0]
	}
	return &driver.Device{ID: id, Recipient: recipient, Transport: string(tr), Token: "token-of-" + k, TokenKey: k}
}

// att is the ledger row of delivery's pair with device dev (token key "t<dev>").
func att(delivery, devID int64, tr Transport, state string, submissions int) *driver.DeviceAttempt {
	return &driver.DeviceAttempt{DeliveryID: delivery, DeviceID: devID, Transport: string(tr), TokenKey: fmt.Sprintf("t%d", devID),
		State: state, Submissions: submissions, Error: string(tr) + " earlier text"}
}

func pairStrings(ps []*pair) []string {
	out := []string{}
	for _, p := range ps {
		s := fmt.Sprintf("d%d dev%d %s/%s", p.d.row.ID, p.dev.ID, p.dev.Transport, p.tokenKey)
		if p.prev != nil {
			s += " after " + p.prev.State
		}
		out = append(out, s)
	}
	return out
}

func TestPlanClaim(t *testing.T) {
	t.Parallel()
	boom := errors.New("rule broke")
	skip := func(rs ...string) map[int64]eligibilityAnswer {
		ds := map[string]Decision{}
		for _, r := range rs {
			ds[r] = DecisionSkip
		}
		return map[int64]eligibilityAnswer{1: {decisions: ds}}
	}
	delay := func(r string, until time.Time) map[int64]eligibilityAnswer {
		return map[int64]eligibilityAnswer{1: {decisions: map[string]Decision{r: DelayUntil(until)}}}
	}
	for _, tc := range []struct {
		name      string
		in        claimInput
		answers   map[int64]eligibilityAnswer
		updates   []string
		writes    []string
		pairs     []string
		recovered int
	}{
		{
			name:  "every device of a due delivery is sent to",
			in:    claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 0)}, messages: []*driver.Message{m1}, devices: []*driver.Device{dev(1, "r", TransportFCM), dev(2, "r", TransportAPNs)}},
			pairs: []string{"d1 dev1 fcm/t1", "d1 dev2 apns/t2"},
		},
		{
			name:    "a recipient with no device ends no_devices",
			in:      claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 0)}, messages: []*driver.Message{m1}},
			updates: []string{"d1 no_devices a0"},
		},
		{
			name:    "an expired message ends expired",
			in:      claimInput{rows: []*driver.ClaimedDelivery{row(1, 9, "r", 0)}, messages: []*driver.Message{m9}, devices: []*driver.Device{dev(1, "r", TransportFCM)}},
			updates: []string{"d1 expired a0 err=expired: its lifetime ended at 2026-01-05T09:00:00Z before it was sent"},
		},
		{
			name: "an expired message a device accepted before ends sent",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 9, "r", 1)}, messages: []*driver.Message{m9},
				devices:  []*driver.Device{dev(1, "r", TransportFCM), dev(2, "r", TransportAPNs)},
				attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptAccepted, 1), att(1, 2, TransportAPNs, driver.AttemptRetry, 1)}},
			updates: []string{"d1 sent a1"},
		},
		{
			name:    "a missing message backs off, never strands the row",
			in:      claimInput{rows: []*driver.ClaimedDelivery{row(1, 5, "r", 0)}, devices: []*driver.Device{dev(1, "r", TransportFCM)}},
			updates: []string{"d1 pending a1 in 15s err=message not found"},
		},
		{
			name:    "a missing message on its last attempt ends failed",
			in:      claimInput{rows: []*driver.ClaimedDelivery{row(1, 5, "r", 5)}},
			updates: []string{"d1 failed a6 err=message not found"},
		},
		{
			name:    "skip ends skipped",
			in:      claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 0), row(2, 1, "s", 0)}, messages: []*driver.Message{m1}, devices: []*driver.Device{dev(1, "r", TransportFCM), dev(2, "s", TransportFCM)}},
			answers: skip("r"),
			updates: []string{"d1 skipped a0 err=skipped: the eligibility rule said skip"},
			pairs:   []string{"d2 dev2 fcm/t2"},
		},
		{
			name: "skip after a device accepted ends sent",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 1)}, messages: []*driver.Message{m1},
				devices: []*driver.Device{dev(1, "r", TransportFCM), dev(2, "r", TransportAPNs)}, attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptAccepted, 1)}},
			answers: skip("r"),
			updates: []string{"d1 sent a1"},
		},
		{
			name:    "a delay within the lifetime reschedules, no attempt counted",
			in:      claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 0)}, messages: []*driver.Message{m1}, devices: []*driver.Device{dev(1, "r", TransportFCM)}},
			answers: delay("r", t0.Add(30*time.Minute)),
			updates: []string{"d1 pending a0 at+30m0s"},
		},
		{
			name: "a skip says the rule's reason",
			in:   claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 0)}, messages: []*driver.Message{m1}, devices: []*driver.Device{dev(1, "r", TransportFCM)}},
			answers: map[int64]eligibilityAnswer{1: {decisions: map[string]Decision{
				"r": DecisionSkip.Because("opted out of category news")}}},
			updates: []string{"d1 skipped a0 err=skipped: opted out of category news"},
		},
		{
			name: "a delay past the lifetime says the rule's reason",
			in:   claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 0)}, messages: []*driver.Message{m1}, devices: []*driver.Device{dev(1, "r", TransportFCM)}},
			answers: map[int64]eligibilityAnswer{1: {decisions: map[string]Decision{
				"r": DelayUntil(m1.ExpiresAt.Add(time.Hour)).Because("quiet hours")}}},
			updates: []string{"d1 expired a0 err=expired: the eligibility rule delayed it until 2026-01-05T11:00:00Z (quiet hours), at or past the end of its lifetime, 2026-01-05T10:00:00Z"},
		},
		{
			name:    "a delay to the end of the lifetime ends expired",
			in:      claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 0)}, messages: []*driver.Message{m1}, devices: []*driver.Device{dev(1, "r", TransportFCM)}},
			answers: delay("r", m1.ExpiresAt),
			updates: []string{"d1 expired a0 err=expired: the eligibility rule delayed it until 2026-01-05T10:00:00Z, at or past the end of its lifetime, 2026-01-05T10:00:00Z"},
		},
		{
			name: "a delay past the lifetime after a device accepted ends sent",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 1)}, messages: []*driver.Message{m1},
				devices: []*driver.Device{dev(1, "r", TransportFCM), dev(2, "r", TransportAPNs)}, attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptAccepted, 1)}},
			answers: delay("r", t0.Add(2*time.Hour)),
			updates: []string{"d1 sent a1"},
		},
		{
			name: "a failed rule backs off only its message's deliveries",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 0), row(2, 2, "r", 0), row(3, 1, "s", 5)}, messages: []*driver.Message{m1, m2},
				devices: []*driver.Device{dev(1, "r", TransportFCM), dev(2, "s", TransportFCM)}},
			answers: map[int64]eligibilityAnswer{1: {err: boom}},
			updates: []string{"d1 pending a1 in 15s err=eligibility: rule broke", "d3 failed a6 err=eligibility: rule broke"},
			pairs:   []string{"d2 dev1 fcm/t1"},
		},
		{
			name: "settled pairs are not sent again; accepted on one ends sent",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 1)}, messages: []*driver.Message{m1},
				devices:  []*driver.Device{dev(1, "r", TransportFCM), dev(2, "r", TransportAPNs)},
				attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptAccepted, 1), att(1, 2, TransportAPNs, driver.AttemptRejected, 1)}},
			updates: []string{"d1 sent a1"},
		},
		{
			name: "every pair settled, none accepted, ends failed",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 1)}, messages: []*driver.Message{m1},
				devices:  []*driver.Device{dev(1, "r", TransportFCM), dev(2, "r", TransportAPNs)},
				attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptInvalid, 1), att(1, 2, TransportAPNs, driver.AttemptRejected, 1)}},
			updates: []string{"d1 failed a1"},
		},
		{
			name: "a retry goes only to the devices that failed",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 1)}, messages: []*driver.Message{m1},
				devices:  []*driver.Device{dev(1, "r", TransportFCM), dev(2, "r", TransportAPNs), dev(3, "r", TransportFCM)},
				attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptAccepted, 1), att(1, 2, TransportAPNs, driver.AttemptRetry, 1), att(1, 3, TransportFCM, driver.AttemptPending, 0)}},
			pairs: []string{"d1 dev2 apns/t2 after retry", "d1 dev3 fcm/t3 after pending"},
		},
		{
			name: "resend: an ambiguous pair is sent again",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 1)}, messages: []*driver.Message{m1},
				devices: []*driver.Device{dev(1, "r", TransportFCM)}, attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptAmbiguous, 1)}},
			pairs: []string{"d1 dev1 fcm/t1 after ambiguous"},
		},
		{
			name: "at-most-once: an ambiguous pair is never sent again, and ends the delivery ambiguous",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 2, "r", 0)}, messages: []*driver.Message{m2},
				devices: []*driver.Device{dev(1, "r", TransportFCM)}, attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptAmbiguous, 1)}},
			updates: []string{"d1 ambiguous a0"},
		},
		{
			name: "resend: a pair a dead run left sending is ambiguous, counted, and sent again",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 0)}, messages: []*driver.Message{m1},
				devices: []*driver.Device{dev(1, "r", TransportFCM)}, attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptSending, 1)}},
			writes:    []string{"d1 dev1 fcm/t1 ambiguous amb+1 err=" + textAbandoned},
			pairs:     []string{"d1 dev1 fcm/t1 after ambiguous"},
			recovered: 1,
		},
		{
			name: "at-most-once: a pair a dead run left sending ends ambiguous, never sent again",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 2, "r", 0)}, messages: []*driver.Message{m2},
				devices:  []*driver.Device{dev(1, "r", TransportFCM), dev(2, "r", TransportAPNs)},
				attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptSending, 1)}},
			writes:    []string{"d1 dev1 fcm/t1 ambiguous amb+1 err=" + textAbandoned},
			pairs:     []string{"d1 dev2 apns/t2"},
			recovered: 1,
		},
		{
			name: "a recovery that uses the last attempt ends the delivery",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 5)}, messages: []*driver.Message{m1},
				devices: []*driver.Device{dev(1, "r", TransportFCM)}, attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptSending, 1)}},
			updates:   []string{"d1 ambiguous a6"},
			writes:    []string{"d1 dev1 fcm/t1 ambiguous amb+1 err=" + textAbandoned},
			recovered: 1,
		},
		{
			name: "a recovered expired message ends expired, its pair recorded ambiguous",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 9, "r", 0)}, messages: []*driver.Message{m9},
				devices: []*driver.Device{dev(1, "r", TransportFCM)}, attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptSending, 1)}},
			updates:   []string{"d1 expired a1 err=expired: its lifetime ended at 2026-01-05T09:00:00Z before it was sent"},
			writes:    []string{"d1 dev1 fcm/t1 ambiguous amb+1 err=" + textAbandoned},
			recovered: 1,
		},
		{
			name: "a token registered again (new device id) is the same, settled pair",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 2, "r", 0)}, messages: []*driver.Message{m2},
				devices: []*driver.Device{dev(7, "r", TransportFCM, "t1")}, attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptAmbiguous, 1)}},
			updates: []string{"d1 ambiguous a0"},
		},
		{
			name: "one token under two transports is two pairs",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 0)}, messages: []*driver.Message{m1},
				devices: []*driver.Device{dev(1, "r", TransportFCM, "same"), dev(2, "r", TransportAPNs, "same")}, attempts: []*driver.DeviceAttempt{{DeliveryID: 1, DeviceID: 1, Transport: "fcm", TokenKey: "same", State: driver.AttemptAccepted}}},
			pairs: []string{"d1 dev2 apns/same"},
		},
		{
			name: "a device with no provider is settled rejected, saying so",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 1, "r", 0), row(2, 1, "s", 0)}, messages: []*driver.Message{m1},
				devices: []*driver.Device{dev(1, "r", TransportRuStore), dev(2, "s", TransportRuStore), dev(3, "s", TransportFCM)}},
			updates: []string{`d1 failed a0 err=rustore device 1: no provider configured for transport "rustore"`},
			writes: []string{
				`d1 dev1 rustore/t1 rejected err=rustore no provider configured for transport "rustore"`,
				`d2 dev2 rustore/t2 rejected err=rustore no provider configured for transport "rustore"`,
			},
			pairs: []string{"d2 dev3 fcm/t3"},
		},
		{
			name: "deliveries are decided message by message, in claim order",
			in: claimInput{rows: []*driver.ClaimedDelivery{row(1, 9, "a", 0), row(2, 1, "b", 0), row(3, 9, "c", 0), row(4, 1, "d", 0)},
				messages: []*driver.Message{m1, m9}, devices: []*driver.Device{dev(1, "b", TransportFCM), dev(2, "d", TransportAPNs)}},
			updates: []string{"d1 expired a0 err=expired: its lifetime ended at 2026-01-05T09:00:00Z before it was sent", "d3 expired a0 err=expired: its lifetime ended at 2026-01-05T09:00:00Z before it was sent"},
			pairs:   []string{"d2 dev1 fcm/t1", "d4 dev2 apns/t2"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := tc.in
			in.now = t0
			p := planClaim(&in, tc.answers, rules())
			wantStrings(t, "updates", updateStrings(p.updates), tc.updates)
			wantStrings(t, "ledger writes", writeStrings(p.writes.rows), tc.writes)
			wantStrings(t, "pairs", pairStrings(p.pairs), tc.pairs)
			if len(p.recovered) != tc.recovered || len(p.recoveredAttempts) != tc.recovered {
				t.Errorf("recovered %d deliveries, %d attempts; want %d", len(p.recovered), len(p.recoveredAttempts), tc.recovered)
			}
			var fromDeliveries []*pair
			for _, d := range p.deliveries {
				fromDeliveries = append(fromDeliveries, d.pairs...)
			}
			if !slices.Equal(fromDeliveries, p.pairs) {
				t.Errorf("the plan's pairs are not its deliveries' pairs")
			}
		})
	}
}

func TestPlanClaimRecoveryCountsTheDeliveryOnce(t *testing.T) {
	t.Parallel()
	in := &claimInput{now: t0, rows: []*driver.ClaimedDelivery{row(1, 1, "r", 2)}, messages: []*driver.Message{m1},
		devices:  []*driver.Device{dev(1, "r", TransportFCM), dev(2, "r", TransportAPNs)},
		attempts: []*driver.DeviceAttempt{att(1, 1, TransportFCM, driver.AttemptSending, 1), att(1, 2, TransportAPNs, driver.AttemptSending, 1)}}
	p := planClaim(in, nil, rules())
	if len(p.recovered) != 1 || len(p.recoveredAttempts) != 2 {
		t.Fatalf("recovered %d deliveries and %d attempts, want 1 and 2", len(p.recovered), len(p.recoveredAttempts))
	}
	if d := p.recovered[0]; d.attempts != 3 || !d.ambiguous || len(d.pairs) != 2 {
		t.Fatalf("recovered delivery: attempts %d, ambiguous %v, %d pairs; want 3 (one more), true, both pairs resent", d.attempts, d.ambiguous, len(d.pairs))
	}
}

func TestEligibilityAsks(t *testing.T) {
	t.Parallel()
	in := &claimInput{now: t0,
		rows: []*driver.ClaimedDelivery{row(1, 2, "b", 0), row(2, 1, "a", 0), row(3, 9, "x", 0), row(4, 2, "a", 0), row(5, 2, "b", 0), row(6, 5, "y", 0)},
		// m9 has expired and message 5 is missing: neither is asked about.
		messages: []*driver.Message{m1, m2, m9},
	}
	var got []string
	for _, a := range eligibilityAsks(in) {
		got = append(got, fmt.Sprintf("m%d %v", a.msg.ID, a.recipients))
	}
	wantStrings(t, "asks", got, []string{"m2 [b a]", "m1 [a]"})
}

func TestStrangers(t *testing.T) {
	t.Parallel()
	ask := eligibilityAsk{msg: m1, recipients: []string{"a", "b"}}
	for name, tc := range map[string]struct {
		ans  map[string]Decision
		fail bool
	}{
		"no answer":             {nil, false},
		"answers about asked":   {map[string]Decision{"a": DecisionSkip, "b": DelayUntil(t0)}, false},
		"answers about another": {map[string]Decision{"a": DecisionSkip, "stranger": DecisionSkip}, true},
	} {
		err := strangers(ask, tc.ans)
		if (err != nil) != tc.fail {
			t.Errorf("%s: strangers = %v, want failure %v", name, err, tc.fail)
		}
		if err != nil && err.Error() != `answered about recipient "stranger", who was not asked about` {
			t.Errorf("%s: %q does not name the stranger", name, err)
		}
	}
}

func TestBuildSubmissions(t *testing.T) {
	t.Parallel()
	msg := &driver.Message{ID: 1, Type: "invoice", Category: "billing", Title: "Paid", Body: "Thanks", Link: "/inv/1", Image: "https://x/i.png",
		Data: []byte(`{"s":"text","n":12345678901234567890,"o":{"k":[1,2]},"b":true}`), Ambiguity: string(AmbiguityResend), ExpiresAt: t0.Add(time.Hour)}
	in := &claimInput{now: t0, rows: []*driver.ClaimedDelivery{row(10, 1, "r", 0), row(11, 1, "s", 0)}, messages: []*driver.Message{msg},
		devices:  []*driver.Device{dev(1, "r", TransportFCM), dev(2, "r", TransportAPNs), dev(3, "s", TransportFCM)},
		attempts: []*driver.DeviceAttempt{att(10, 2, TransportAPNs, driver.AttemptAmbiguous, 1)}}
	p := planClaim(in, nil, rules())
	buildSubmissions(p.deliveries)
	if len(p.pairs) != 3 {
		t.Fatalf("%d pairs, want 3", len(p.pairs))
	}
	wantData := map[string]string{"s": "text", "n": "12345678901234567890", "o": `{"k":[1,2]}`, "b": "true"}
	for _, pr := range p.pairs {
		s := pr.sub
		want := maps.Clone(wantData)
		want["oncepush_id"] = pr.d.row.NotificationID
		if !maps.Equal(s.Data, want) {
			t.Errorf("d%d: data %v, want %v", pr.d.row.ID, s.Data, want)
		}
		if s.NotificationID != pr.d.row.NotificationID || s.CollapseID != s.NotificationID || s.DeliveryID != pr.d.row.ID ||
			s.SubmissionID != SubmissionID(pr.d.row.ID, pr.dev.Transport, pr.tokenKey) {
			t.Errorf("d%d dev%d: identity %+v", pr.d.row.ID, pr.dev.ID, s)
		}
		if s.Type != "invoice" || s.Category != "billing" || s.Title != "Paid" || s.Body != "Thanks" || s.Link != "/inv/1" ||
			s.Image != "https://x/i.png" || !s.ExpiresAt.Equal(msg.ExpiresAt) ||
			s.DeviceID != pr.dev.ID || s.Token != pr.dev.Token || s.Token == "" {
			t.Errorf("d%d dev%d: content %+v", pr.d.row.ID, pr.dev.ID, s)
		}
		if wantResend := pr.dev.ID == 2; s.Resend != wantResend {
			t.Errorf("d%d dev%d: Resend %v, want %v (only a pair submitted before is a resend)", pr.d.row.ID, pr.dev.ID, s.Resend, wantResend)
		}
	}
	// The devices of one delivery share its data; deliveries do not.
	p.pairs[0].sub.Data["x"] = "y"
	if p.pairs[1].sub.Data["x"] != "y" || p.pairs[2].sub.Data["x"] == "y" {
		t.Error("data is not shared per delivery, or is shared across deliveries")
	}
	if d := flattenData([]byte("not json")); len(d) != 0 {
		t.Errorf("flattenData of undecodable data: %v, want empty", d)
	}
	if d := flattenData(nil); len(d) != 0 {
		t.Errorf("flattenData(nil): %v, want empty", d)
	}
}
