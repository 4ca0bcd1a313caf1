package upgradetest

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/sqlfile"
	"github.com/oncepush/oncepush/pushtest"
)

// campaignVersion is the engine version just before campaign deliveries
// left the dedup keys' space (migration 8) and campaigns held their tokens
// (migration 9): the version whose rows RunMidCampaign writes.
const campaignVersion = 7

// t0 is when the older build wrote the rows RunMidCampaign starts from; the
// engine's clock starts 3 hours later, past every backoff and lease in them.
var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// The campaigns' and messages' titles, by which the checks find their rows.
const (
	titleA = "spring sale" // campaign 1: mid-way, at-most-once
	titleB = "winter sale" // campaign 2: completed
)

// RunMidCampaign checks that a database engine version 7 wrote — a campaign
// mid-way, a completed one, plain sends with and without a caller's dedup
// key — migrates to this build's version keeping every row, takes the
// campaigns' deliveries out of the dedup keys' space without touching a
// caller's key, records which delivery holds each token a campaign
// submitted to (so that no token is submitted again by another delivery of
// the same campaign), keeps the tallies right, and then drains the
// unfinished campaign with each of its tokens reached once.
func (h Harness[TTx, D]) RunMidCampaign(t *testing.T) {
	ctx := t.Context()
	freshDrv := h.Empty(t)
	MigrateAll(t, freshDrv)
	fresh := h.Schema(t, freshDrv)

	drv := h.Empty(t)
	h.migrateTo(t, drv, campaignVersion)
	if _, err := drv.ServerStore().Migrate(ctx); err != nil {
		t.Fatalf("server Migrate: %v", err)
	}
	old := h.insertCampaignRows(t, drv)

	// What the migrations must keep as it is, read before them.
	kept := map[string]string{
		"messages": `SELECT * FROM oncepush_message`,
		"devices":  `SELECT * FROM oncepush_device`,
		// The columns version 7 had; migration 10 adds counts, zero.
		"campaigns": `SELECT id, name, status, content, audience, filter, start_at, rate_per_minute, message_id,
		                     cursor, written, recipients, invalid_tokens, duplicate_tokens, tries, last_error,
		                     created_at, updated_at, started_at, finished_at FROM oncepush_campaign`,
		"audiences": `SELECT * FROM oncepush_campaign_recipient`,
		"pages":     `SELECT * FROM oncepush_campaign_page`,
		"tally":     `SELECT * FROM oncepush_campaign_tally`,
		"attempts": `SELECT delivery_id, device_id, transport, token_key, state, submissions, ambiguous, provider_id,
		                    error, first_sent_at, last_sent_at, updated_at FROM oncepush_device_attempt`,
		// Every column but the dedup key, checked below.
		"deliveries": `SELECT id, message_id, recipient, notification_id, status, attempts, next_attempt_at,
		                      lease_id, last_error, created_at, finished_at, campaign FROM oncepush_delivery`,
	}
	before := map[string][]string{}
	for name, q := range kept {
		before[name] = h.Rows(t, drv, q)
	}

	res, err := drv.Migrate(ctx)
	if err != nil {
		t.Fatalf("engine Migrate from version %d: %v", campaignVersion, err)
	}
	if want := versions(campaignVersion+1, res.Version); !slices.Equal(res.Applied, want) {
		t.Fatalf("engine Migrate applied %v, want %v", res.Applied, want)
	}

	for name, q := range kept {
		if got := h.Rows(t, drv, q); !slices.Equal(got, before[name]) {
			t.Errorf("%s changed in the upgrade:\n%s", name, diffLines(before[name], got))
		}
	}
	// Batches written before migration 10 counted no recipient they left
	// out: their counts start at zero.
	h.wantRows(t, drv, "the campaigns' counts of recipients not written", []string{"1 | 0", "2 | 0"}, `
SELECT id, unreached_no_device + unreached_filtered_out + unreached_malformed + unreached_duplicate
FROM oncepush_campaign ORDER BY id`)
	// The campaigns' deliveries lost the key "campaign:<id>"; callers' keys,
	// one of them spelled like a campaign's, are as they were.
	wantKeys := []string{
		"lookalike | a1 | campaign:99", "receipt | u_p | order-42", "caller | u_c | campaign:2",
		"hello | u_h | -",
	}
	for _, r := range []string{"a1", "a2", "a3", "a4", "a5"} {
		wantKeys = append(wantKeys, titleA+" | "+r+" | -")
	}
	for _, r := range []string{"a1", "b2"} {
		wantKeys = append(wantKeys, titleB+" | "+r+" | -")
	}
	h.wantRows(t, drv, "the deliveries' dedup keys", wantKeys, `
SELECT m.title, d.recipient, coalesce(d.dedup_key, '-')
FROM oncepush_delivery d JOIN oncepush_message m ON m.id = d.message_id`)
	// A recorded request lives as long as a delivery holds its key (D35):
	// the one a caller's send under campaign 1's key left, when the
	// campaign's delivery made it a duplicate, goes with that key.
	h.wantRows(t, drv, "the recorded requests", []string{
		"campaign:99 | 1 | 0", "order-42 | 1 | 0",
	}, `SELECT key, queued, duplicates FROM oncepush_idempotency`)

	// Each token a campaign submitted to is held by the delivery whose
	// submission reached it, or may have: an accepted one before all, then
	// one in flight or settled, and only when none of those exist the one
	// whose submission provably did not reach it, which leaves it free.
	wantHolders := []string{
		titleA + " | " + old.token("a1") + " | a1 | held", // accepted
		titleA + " | " + old.token("a3") + " | a3 | held", // in flight
		titleA + " | " + old.token("m") + " | a4 | held",  // ambiguous, though a2's "retry" is older
		titleA + " | " + old.token("a5") + " | a5 | free", // answered "retry later"
		titleB + " | " + old.token("a1") + " | a1 | held", // the same token in another campaign
		titleB + " | " + old.token("x") + " | b2 | held",  // accepted, though a1's "retry" is older
		titleB + " | " + old.token("b2") + " | b2 | held",
	}
	holders := `
SELECT m.title, t.token_key, d.recipient, CASE WHEN t.free THEN 'free' ELSE 'held' END
FROM oncepush_campaign_token t
     JOIN oncepush_delivery d ON d.id = t.delivery_id AND d.message_id = t.message_id
     JOIN oncepush_message m ON m.id = t.message_id
WHERE t.transport = 'fcm'`
	h.wantRows(t, drv, "the campaigns' token holders", wantHolders, holders)
	if n := h.Rows(t, drv, `SELECT count(*) FROM oncepush_campaign_token`); !slices.Equal(n, []string{fmt.Sprint(len(wantHolders))}) {
		t.Errorf("oncepush_campaign_token holds %v rows, want %d", n, len(wantHolders))
	}

	// One campaign delivery per (message, recipient); a new recipient is
	// still written.
	dup := `INSERT INTO oncepush_delivery (message_id, recipient, notification_id, next_attempt_at, created_at, campaign)
SELECT id, '%s', 'probe', %s, %s, true FROM oncepush_message WHERE title = '` + titleA + `'`
	if err := h.Try(t, drv, fmt.Sprintf(dup, "a1", h.Time(t0), h.Time(t0))); err == nil {
		t.Error("a second campaign delivery for (message, a1) was written")
	}
	if err := h.Try(t, drv, fmt.Sprintf(dup, "zz", h.Time(t0), h.Time(t0))); err != nil {
		t.Errorf("a campaign delivery for a new recipient: %v", err)
	}
	// The attempt states: "duplicate" is one, garbage is none.
	probe := `INSERT INTO oncepush_device_attempt (delivery_id, device_id, transport, token_key, state, updated_at)
SELECT id, 1, 'fcm', 'probe-token', '%s', %s FROM oncepush_delivery WHERE recipient = 'u_h'`
	if err := h.Try(t, drv, fmt.Sprintf(probe, "duplicate", h.Time(t0))); err != nil {
		t.Errorf("an attempt in state duplicate: %v", err)
	}
	if err := h.Try(t, drv, fmt.Sprintf(probe, "garbage", h.Time(t0))); err == nil {
		t.Error("an attempt in state garbage was written")
	}

	if got := h.Schema(t, drv); !slices.Equal(got, fresh) {
		t.Errorf("the upgraded schema differs from a fresh one:\n%s", diffLines(fresh, got))
	}
	if h.CheckFile != nil {
		h.CheckFile(t, drv)
	}

	// The engine takes it from here.
	fcm := pushtest.NewProvider(oncepush.TransportFCM)
	client, err := oncepush.NewClient(drv, &oncepush.Config{
		Clock:     pushtest.NewClock(t0.Add(3 * time.Hour)),
		Logger:    slog.New(slog.DiscardHandler),
		Providers: []oncepush.Provider{fcm},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.CheckSchema(ctx); err != nil {
		t.Fatalf("CheckSchema after the upgrade: %v", err)
	}
	for _, id := range []int64{1, 2} {
		h.wantTotalsRecounted(t, drv, client, id)
	}
	// The caller's key is free of the campaign's rows: a send under it is
	// new, not the replay of a record only the campaign's deliveries kept.
	again, err := client.Send(ctx, []string{"a1"}, oncepush.Message{Type: "news", Title: "caller again"},
		&oncepush.SendOptions{DedupKey: "campaign:1", RequestHash: []byte{0x0c}})
	if err != nil || again.Replayed || again.Queued != 1 {
		t.Errorf("a send under campaign:1 to a1 after the upgrade: %+v, %v; want it queued", again, err)
	}

	st, err := client.ExpandCampaigns(ctx)
	if err != nil || st.Written != 2 || st.Completed != 1 {
		t.Fatalf("the expansion after the upgrade: %+v, %v; want a6 and a7 written, the campaign completed", st, err)
	}
	if _, err := client.Drain(ctx); err != nil {
		t.Fatalf("Drain: %v", err)
	}
	reached := map[string]int{}
	for _, s := range fcm.Submissions() {
		if s.Title == titleA {
			reached[string(s.Token)]++
		}
	}
	// a1's token was accepted, a3's may have been (in flight when the old
	// build stopped; at most once), and the token that moved to a7 may
	// have been through a4: none is sent again. a5's answered "retry
	// later" before, and a6 is new.
	want := map[string]int{old.token("a5"): 1, old.token("a6"): 1}
	if !maps.Equal(reached, want) {
		t.Errorf("the campaign's submissions after the upgrade, per token: %v, want %v", reached, want)
	}
	a, err := client.Campaign(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != oncepush.CampaignCompleted || a.Totals.Queued != 0 {
		t.Errorf("campaign 1 after the drain: %s, totals %+v; want completed, nothing queued", a.Status, *a.Totals)
	}
	if a.DuplicateTokens != 1 {
		t.Errorf("campaign 1's duplicate tokens: %d, want 1 (a7's token, reached through a4)", a.DuplicateTokens)
	}
	for _, id := range []int64{1, 2} {
		h.wantTotalsRecounted(t, drv, client, id)
	}
	// a5 took its free token back to send it; a6 took its own; a7 found
	// its token held by a4 and did not take it.
	wantHolders[3] = titleA + " | " + old.token("a5") + " | a5 | held"
	h.wantRows(t, drv, "the campaigns' token holders after the drain", append(wantHolders,
		titleA+" | "+old.token("a6")+" | a6 | held"), holders)
}

// oldCampaignRows names what insertCampaignRows wrote.
type oldCampaignRows struct {
	tokens map[string]string
}

// token is the FCM token of a name: a recipient's own, "m" the one that
// moved from a2 to a4 to a7, "x" the one that moved from a1 to b2.
func (o oldCampaignRows) token(name string) string { return o.tokens[name] }

// insertCampaignRows writes, in the version 7 schema, what that build wrote.
//
// Campaign 1 ("spring sale", at-most-once) is mid-way: recipients a1..a7
// uploaded, deliveries written for a1..a5 under the key "campaign:1":
// a1 sent (accepted); a2 waiting to retry its token m, which answered
// "retry later" and then moved to a4; a3 in flight (its attempt sending,
// its lease expired: the process died); a4 ambiguous, its send of m lost;
// a5 waiting to retry its own token, answered "retry later". m has moved on
// to a7 since. Campaign 2 ("winter sale") is completed: a1 reached on a1's
// token, its second token x answered "retry later" and moved to b2, whose
// delivery had x and its own accepted. Plain sends: "receipt" pending under
// the caller's key order-42, "hello" sent with no key, "lookalike" sent to
// a1 under a caller's key campaign:99 (recorded), "caller" sent under
// campaign:2 to a recipient campaign 2 does not have; and a caller's send
// under campaign:1 to a1, which campaign 1's delivery made a duplicate: its
// recorded request and its message, with no delivery. The tally is what
// the triggers wrote.
func (h Harness[TTx, D]) insertCampaignRows(t *testing.T, drv D) oldCampaignRows {
	t.Helper()
	tok := map[string]string{}
	for i, name := range []string{"a1", "a3", "a5", "a6", "m", "x", "b2", "u_p", "u_h", "u_c"} {
		tok[name] = fmt.Sprintf("fcm-example-token-%d", 100+i)
	}
	at := func(d time.Duration) string { return h.Time(t0.Add(d)) }
	campaignID := func(recipient, key string) string {
		return oncepush.NotificationID("news", recipient, map[string]any{"dedupKey": key})
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+";\n", args...) }

	for _, d := range [][2]string{{"a1", "a1"}, {"a3", "a3"}, {"a5", "a5"}, {"a6", "a6"}, {"a7", "m"},
		{"b2", "x"}, {"b2", "b2"}, {"u_p", "u_p"}, {"u_h", "u_h"}, {"u_c", "u_c"}} {
		w(`INSERT INTO oncepush_device (recipient, transport, token, token_key, created_at, registered_at)
VALUES ('%s', 'fcm', '%s', '%s', %s, %s)`, d[0], tok[d[1]], tok[d[1]], at(-time.Hour), at(-time.Hour))
	}
	for _, m := range [][2]string{{titleA, "at-most-once"}, {titleB, "resend"}, {"receipt", "resend"},
		{"hello", "resend"}, {"lookalike", "resend"}, {"caller", "resend"}, {"caller late", "resend"}} {
		w(`INSERT INTO oncepush_message (type, title, body, ambiguity, scheduled_at, expires_at, created_at)
VALUES ('news', '%s', 'b', '%s', %s, %s, %s)`, m[0], m[1], at(0), at(48*time.Hour), at(0))
	}
	w(`INSERT INTO oncepush_campaign (name, status, content, audience, message_id, cursor, written, recipients,
                               created_at, updated_at, started_at)
SELECT 'spring', 'sending', '{"type":"news","title":"%s","body":"b","ambiguity":"at-most-once"}', 'recipients',
       id, 'a5', 5, 7, %s, %s, %s
FROM oncepush_message WHERE title = '%s'`, titleA, at(-time.Hour), at(time.Minute), at(0), titleA)
	w(`INSERT INTO oncepush_campaign (name, status, content, audience, message_id, cursor, written, recipients,
                               created_at, updated_at, started_at, finished_at)
SELECT 'winter', 'completed', '{"type":"news","title":"%s","body":"b"}', 'recipients',
       id, 'b2', 2, 2, %s, %s, %s, %s
FROM oncepush_message WHERE title = '%s'`, titleB, at(-time.Hour), at(time.Minute), at(0), at(time.Minute), titleB)
	for _, r := range []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7"} {
		w(`INSERT INTO oncepush_campaign_recipient (campaign_id, recipient) VALUES (1, '%s')`, r)
	}
	for _, r := range []string{"a1", "b2"} {
		w(`INSERT INTO oncepush_campaign_recipient (campaign_id, recipient) VALUES (2, '%s')`, r)
	}
	w(`INSERT INTO oncepush_campaign_page (campaign_id, page, digest, size) VALUES (1, 1, %s, 7), (2, 1, %s, 2)`,
		h.Blob("a1a1"), h.Blob("b2b2"))

	// Deliveries: (message, recipient, key, status, attempts, due, lease,
	// finished, campaign).
	type delivery struct {
		msg, recipient, key, status string
		attempts                    int
		due                         time.Duration
		lease                       string
		finished                    bool
		campaign                    bool
	}
	for _, d := range []delivery{
		{titleA, "a1", "campaign:1", "sent", 1, 0, "NULL", true, true},
		{titleA, "a2", "campaign:1", "pending", 1, time.Hour, "NULL", false, true},
		{titleA, "a3", "campaign:1", "pending", 0, 5 * time.Minute, "777", false, true},
		{titleA, "a4", "campaign:1", "ambiguous", 1, 0, "NULL", true, true},
		{titleA, "a5", "campaign:1", "pending", 1, 30 * time.Minute, "NULL", false, true},
		{titleB, "a1", "campaign:2", "sent", 1, 0, "NULL", true, true},
		{titleB, "b2", "campaign:2", "sent", 1, 0, "NULL", true, true},
		{"receipt", "u_p", "order-42", "pending", 0, 0, "NULL", false, false},
		{"hello", "u_h", "", "sent", 1, 0, "NULL", true, false},
		{"lookalike", "a1", "campaign:99", "sent", 1, 0, "NULL", true, false},
		{"caller", "u_c", "campaign:2", "sent", 1, 0, "NULL", true, false},
	} {
		key, nid := "NULL", oncepush.NotificationID("news", d.recipient, map[string]any{"random": d.msg})
		if d.key != "" {
			key, nid = "'"+d.key+"'", campaignID(d.recipient, d.key)
		}
		finished := "NULL"
		if d.finished {
			finished = at(2 * time.Minute)
		}
		w(`INSERT INTO oncepush_delivery (message_id, recipient, notification_id, dedup_key, status, attempts,
                               next_attempt_at, lease_id, created_at, finished_at, campaign)
SELECT id, '%s', '%s', %s, '%s', %d, %s, %s, %s, %s, %t FROM oncepush_message WHERE title = '%s'`,
			d.recipient, nid, key, d.status, d.attempts, at(d.due), d.lease, at(0), finished, d.campaign, d.msg)
	}

	// Attempts: (message, recipient, token, device, state, submissions,
	// ambiguous). Moved tokens' attempts name the registrations they had
	// then, since replaced.
	type attempt struct {
		msg, recipient, token string
		device                int
		state                 string
		submissions, ambig    int
	}
	for _, a := range []attempt{
		{titleA, "a1", "a1", 1, "accepted", 1, 0},
		{titleA, "a2", "m", 9001, "retry", 1, 0},
		{titleA, "a3", "a3", 2, "sending", 1, 0},
		{titleA, "a4", "m", 9002, "ambiguous", 1, 1},
		{titleA, "a5", "a5", 3, "retry", 1, 0},
		{titleB, "a1", "a1", 1, "accepted", 1, 0},
		{titleB, "a1", "x", 9003, "retry", 1, 0},
		{titleB, "b2", "x", 6, "accepted", 1, 0},
		{titleB, "b2", "b2", 7, "accepted", 1, 0},
		{"hello", "u_h", "u_h", 9, "accepted", 1, 0},
		{"lookalike", "a1", "a1", 1, "accepted", 1, 0},
		{"caller", "u_c", "u_c", 10, "accepted", 1, 0},
	} {
		providerID, errText := "", ""
		switch a.state {
		case "accepted":
			providerID = "projects/p/messages/" + a.recipient
		case "retry":
			errText = "fcm 503 UNAVAILABLE"
		case "ambiguous":
			errText = "fcm the answer was lost: context deadline exceeded"
		}
		w(`INSERT INTO oncepush_device_attempt (delivery_id, device_id, transport, token_key, state, submissions,
                                     ambiguous, provider_id, error, first_sent_at, last_sent_at, updated_at)
SELECT d.id, %d, 'fcm', '%s', '%s', %d, %d, '%s', '%s', %s, %s, %s
FROM oncepush_delivery d JOIN oncepush_message m ON m.id = d.message_id
WHERE m.title = '%s' AND d.recipient = '%s'`,
			a.device, tok[a.token], a.state, a.submissions, a.ambig, providerID, errText,
			at(time.Minute), at(time.Minute), at(time.Minute), a.msg, a.recipient)
	}

	// Recorded requests: the caller's, and the one whose send campaign 1's
	// delivery to a1 made a duplicate (message 0: nothing queued).
	for _, r := range []struct {
		key, msg           string
		queued, duplicates int
	}{
		{"order-42", "receipt", 1, 0}, {"campaign:99", "lookalike", 1, 0},
	} {
		w(`INSERT INTO oncepush_idempotency (key, request_hash, message_id, queued, duplicates, created_at)
SELECT '%s', %s, id, %d, %d, %s FROM oncepush_message WHERE title = '%s'`,
			r.key, h.Blob("0b"), r.queued, r.duplicates, at(0), r.msg)
	}
	w(`INSERT INTO oncepush_idempotency (key, request_hash, message_id, queued, duplicates, created_at)
VALUES ('campaign:1', %s, 0, 0, 1, %s)`, h.Blob("0c"), at(3*time.Minute))

	if err := h.Exec(t, drv, b.String()); err != nil {
		t.Fatalf("the version %d rows: %v", campaignVersion, err)
	}
	if ids := h.Rows(t, drv, `SELECT id FROM oncepush_campaign`); !slices.Equal(ids, []string{"1", "2"}) {
		t.Fatalf("campaign ids %v, want 1 and 2 (their deliveries' keys name them)", ids)
	}
	return oldCampaignRows{tokens: tok}
}

// wantTotalsRecounted fails unless the campaign's totals, which the tally
// keeps, are what its rows say: nothing here was deleted, so the rows are
// all there is to count.
func (h Harness[TTx, D]) wantTotalsRecounted(t *testing.T, drv D, client *oncepush.Client[TTx], id int64) {
	t.Helper()
	c, err := client.Campaign(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, l := range h.Rows(t, drv, fmt.Sprintf(`
SELECT d.status, count(*) FROM oncepush_delivery d
WHERE d.campaign = true AND d.message_id = %[1]d GROUP BY d.status
UNION ALL
SELECT 'attempt:' || a.state, count(*)
FROM oncepush_device_attempt a JOIN oncepush_delivery d ON d.id = a.delivery_id
WHERE d.campaign = true AND d.message_id = %[1]d AND a.state IN ('accepted', 'invalid', 'rejected', 'duplicate')
GROUP BY a.state
UNION ALL
SELECT 'attempt:ambiguous', count(*)
FROM oncepush_device_attempt a JOIN oncepush_delivery d ON d.id = a.delivery_id
WHERE d.campaign = true AND d.message_id = %[1]d AND a.ambiguous > 0`, c.MessageID)) {
		var state string
		var count int
		if _, err := fmt.Sscanf(strings.ReplaceAll(l, " | ", " "), "%s %d", &state, &count); err != nil {
			t.Fatalf("recount row %q: %v", l, err)
		}
		n[state] = count
	}
	want := oncepush.CampaignTotals{
		Queued: n["pending"], Sent: n["sent"], Failed: n["failed"], Skipped: n["skipped"], Expired: n["expired"],
		Ambiguous: n["ambiguous"], NoDevices: n["no_devices"], Canceled: n["canceled"],
		Accepted: n["attempt:accepted"], InvalidTokens: n["attempt:invalid"], Rejected: n["attempt:rejected"],
		AmbiguousAttempts: n["attempt:ambiguous"],
	}
	if *c.Totals != want {
		t.Errorf("campaign %d's totals %+v, its rows recounted %+v", id, *c.Totals, want)
	}
}

// wantRows fails unless the query's rows are want, in any order.
func (h Harness[TTx, D]) wantRows(t *testing.T, drv D, what string, want []string, query string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	if got := h.Rows(t, drv, query); !slices.Equal(got, want) {
		t.Errorf("%s:\n%s", what, diffLines(want, got))
	}
}

// migrateTo migrates drv's database to engine version upTo with this
// build's migration files, as a build whose latest migration was upTo did.
func (h Harness[TTx, D]) migrateTo(t *testing.T, drv D, upTo int) {
	t.Helper()
	ms, err := sqlfile.Migrations(h.Engine, h.EngineDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) <= upTo {
		t.Fatalf("%d engine migrations: nothing after version %d to upgrade through", len(ms), upTo)
	}
	h.apply(t, drv, ms[:upTo], "migration")
}
