package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/driver/drivertest"
)

// TestCampaignStatements exercises the SQLite statements of campaigns
// (migration 6) one by one; the engine's promises about them are the
// conformance suite's.
func TestCampaignStatements(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, drv := migrated(t)
	ex := drv.Exec()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

	// Insert, get, and the stored documents.
	start := now.Add(time.Hour)
	c, err := ex.CampaignInsert(ctx, &driver.Campaign{
		Name: "spring", Status: driver.CampaignScheduled, Content: []byte(`{"title":"hi"}`),
		Audience: driver.AudienceDevices, Filter: []byte(`{"tags":["a"]}`), StartAt: &start,
		RatePerMinute: 60, CreatedAt: now, Written: 99,
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.ID == 0 || !c.CreatedAt.Equal(now) || !c.UpdatedAt.Equal(now) || c.Written != 0 || c.MessageID != 0 {
		t.Fatalf("inserted %+v", c)
	}
	got, err := ex.CampaignGet(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Content) != `{"title":"hi"}` || string(got.Filter) != `{"tags":["a"]}` ||
		got.StartAt == nil || !got.StartAt.Equal(start) || got.RatePerMinute != 60 || got.StartedAt != nil {
		t.Fatalf("got %+v", got)
	}
	if _, err := ex.CampaignGet(ctx, c.ID+100); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("get of a missing campaign: %v", err)
	}
	if err := drv.InTx(ctx, func(ctx context.Context, _ *sql.Tx, ex driver.Executor) error {
		_, err := ex.CampaignLock(ctx, c.ID+100)
		return err
	}); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("lock of a missing campaign: %v", err)
	}
	c2, err := ex.CampaignInsert(ctx, &driver.Campaign{Status: driver.CampaignDraft, Content: []byte(`{}`),
		Audience: driver.AudienceRecipients})
	if err != nil {
		t.Fatal(err)
	}
	if c2.Filter != nil || c2.StartAt != nil || c2.CreatedAt.IsZero() {
		t.Fatalf("second campaign %+v", c2)
	}

	// Not due yet: nothing to try.
	if res, err := ex.CampaignTry(ctx, &driver.CampaignTryParams{Now: &now, MaxTries: 2}); err != nil || res.Found {
		t.Fatalf("try before start_at: %+v, %v", res, err)
	}
	later := start.Add(time.Minute)
	for i, want := range []driver.CampaignTryResult{
		{Found: true, ID: c.ID, Tries: 1}, {Found: true, ID: c.ID, Tries: 2},
		{Found: true, ID: c.ID, Tries: 2, Interrupted: true}, {},
	} {
		res, err := ex.CampaignTry(ctx, &driver.CampaignTryParams{Now: &later, MaxTries: 2})
		if err != nil || *res != want {
			t.Fatalf("try %d: %+v, %v; want %+v", i, res, err, want)
		}
	}
	if got, _ := ex.CampaignGet(ctx, c.ID); got.Status != driver.CampaignInterrupted || !got.UpdatedAt.Equal(later) {
		t.Fatalf("after the tries ran out: %+v", got)
	}

	// Save under the lock: every field but ID and CreatedAt.
	msg, _, err := ex.MessageInsert(ctx, &driver.MessageInsertParams{Now: &now, Type: "t", Title: "x",
		Ambiguity: "resend", Lifetime: time.Hour, Audience: []byte(`{"tags":["a"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	saved := now.Add(2 * time.Hour)
	err = drv.InTx(ctx, func(ctx context.Context, _ *sql.Tx, ex driver.Executor) error {
		c, err := ex.CampaignLock(ctx, c.ID)
		if err != nil {
			return err
		}
		c.Status, c.MessageID, c.Cursor, c.Written, c.Tries = driver.CampaignSending, msg, "u_1", 5, 0
		c.InvalidTokens, c.DuplicateTokens, c.LastError, c.StartedAt, c.Filter = 1, 2, "boom", &saved, nil
		c.NoDevice, c.FilteredOut, c.MalformedOnly, c.DuplicateOnly = 3, 4, 6, 7
		c.CreatedAt = saved
		return ex.CampaignSave(ctx, c, &saved)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = ex.CampaignGet(ctx, c.ID)
	if got.Status != driver.CampaignSending || got.MessageID != msg || got.Cursor != "u_1" || got.Written != 5 ||
		got.InvalidTokens != 1 || got.DuplicateTokens != 2 || got.NoDevice != 3 || got.FilteredOut != 4 ||
		got.MalformedOnly != 6 || got.DuplicateOnly != 7 || got.LastError != "boom" || got.Filter != nil ||
		got.StartedAt == nil || !got.StartedAt.Equal(saved) || !got.UpdatedAt.Equal(saved) || !got.CreatedAt.Equal(now) {
		t.Fatalf("saved %+v", got)
	}
	m, err := ex.MessageGet(ctx, msg)
	if err != nil || string(m.Audience) != `{"tags":["a"]}` {
		t.Fatalf("message audience %q, %v", m.Audience, err)
	}
	// A campaign's message has no delivery yet, and is kept.
	if n, _, err := ex.MessageSweepOrphans(ctx, &driver.SweepParams{Limit: 10}); err != nil || n != 0 {
		t.Fatalf("sweep deleted %d, %v", n, err)
	}
	if n, err := ex.MessageDeleteOrphans(ctx, []int64{msg}); err != nil || n != 0 {
		t.Fatalf("orphans deleted %d, %v", n, err)
	}
	// Saving MessageID 0 stores NULL.
	got.MessageID = 0
	if err := ex.CampaignSave(ctx, got, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := ex.CampaignGet(ctx, got.ID); got.MessageID != 0 {
		t.Fatalf("message id %d", got.MessageID)
	}

	// List: below the cursor, newest first, by status.
	ids := func(cs []*driver.Campaign) (out []int64) {
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	for _, tc := range []struct {
		p    driver.CampaignListParams
		want []int64
	}{
		{driver.CampaignListParams{BeforeID: 1 << 62, Limit: 10}, []int64{c2.ID, c.ID}},
		{driver.CampaignListParams{BeforeID: c2.ID, Limit: 10}, []int64{c.ID}},
		{driver.CampaignListParams{BeforeID: 1 << 62, Limit: 1}, []int64{c2.ID}},
		{driver.CampaignListParams{BeforeID: 1 << 62, Limit: 10, Status: driver.CampaignSending}, []int64{c.ID}},
		{driver.CampaignListParams{BeforeID: 1 << 62, Limit: 10, Status: driver.CampaignCanceled}, nil},
	} {
		cs, err := ex.CampaignList(ctx, &tc.p)
		if err != nil || !slices.Equal(ids(cs), tc.want) {
			t.Errorf("list %+v: %v, %v; want %v", tc.p, ids(cs), err, tc.want)
		}
	}

	// Pages: added, replayed, conflicting.
	page := func(n int, digest string, rs ...string) (int, bool, error) {
		return ex.CampaignPageAdd(ctx, &driver.CampaignPageParams{CampaignID: c2.ID, Page: n, Digest: []byte(digest), Recipients: rs})
	}
	if added, replayed, err := page(1, "d1", "u_b", "u_a", "u_c"); err != nil || added != 3 || replayed {
		t.Fatalf("page 1: %d %v %v", added, replayed, err)
	}
	if added, replayed, err := page(1, "d1", "u_b", "u_a", "u_c"); err != nil || added != 0 || !replayed {
		t.Fatalf("page 1 again: %d %v %v", added, replayed, err)
	}
	if _, _, err := page(1, "other", "u_z"); !errors.Is(err, driver.ErrPageConflict) {
		t.Fatalf("page 1 with another digest: %v", err)
	}
	if added, replayed, err := page(2, "d2", "u_c", "u_d"); err != nil || added != 1 || replayed {
		t.Fatalf("page 2: %d %v %v", added, replayed, err)
	}
	if got, _ := ex.CampaignGet(ctx, c2.ID); got.Recipients != 4 {
		t.Fatalf("recipients %d, want 4", got.Recipients)
	}
	if rs, err := ex.CampaignRecipientsAfter(ctx, c2.ID, "u_a", 2); err != nil || !slices.Equal(rs, []string{"u_b", "u_c"}) {
		t.Fatalf("recipients after u_a: %v, %v", rs, err)
	}
	if _, err := ex.RecipientDelete(ctx, "u_b"); err != nil {
		t.Fatal(err)
	}
	if rs, err := ex.CampaignRecipientsAfter(ctx, c2.ID, "", 10); err != nil || !slices.Equal(rs, []string{"u_a", "u_c", "u_d"}) {
		t.Fatalf("recipients after deleting u_b: %v, %v", rs, err)
	}

	// Devices with tags, listed after a recipient, revoked sessions left out.
	for _, d := range []driver.DeviceRegisterParams{
		{Recipient: "u_a", Token: "t1", TokenKey: "t1", Tags: []string{"a", "b"}},
		{Recipient: "u_b", Token: "t2", TokenKey: "t2"},
		{Recipient: "u_c", Token: "t3", TokenKey: "t3", Session: "s_gone"},
		{Recipient: "u_c", Token: "t4", TokenKey: "t4", Tags: []string{"c"}},
	} {
		d.Now, d.Transport, d.Platform, d.MaxPerRecipient = &now, "fcm", "android", 10
		if _, err := ex.DeviceRegister(ctx, &d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ex.DeviceRegister(ctx, &driver.DeviceRegisterParams{Now: &now, Recipient: "u_a", Transport: "fcm",
		Token: "t1", TokenKey: "t1", MaxPerRecipient: 10, Tags: []string{"z"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ex.SessionRevoke(ctx, "s_gone", &now); err != nil {
		t.Fatal(err)
	}
	devs, err := ex.DeviceListAfter(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, d := range devs {
		keys = append(keys, d.Recipient+":"+d.TokenKey)
	}
	if !slices.Equal(keys, []string{"u_a:t1", "u_b:t2", "u_c:t4"}) {
		t.Fatalf("devices %v", keys)
	}
	if !slices.Equal(devs[0].Tags, []string{"z"}) || len(devs[1].Tags) != 0 || !slices.Equal(devs[2].Tags, []string{"c"}) {
		t.Fatalf("tags %q %q %q", devs[0].Tags, devs[1].Tags, devs[2].Tags)
	}
	if devs, err := ex.DeviceListAfter(ctx, "u_a", 1); err != nil || len(devs) != 1 || devs[0].Recipient != "u_b" {
		t.Fatalf("devices after u_a: %v, %v", devs, err)
	}

	// A campaign's deliveries of its message, each due at its own time, once
	// per recipient, with no dedup key.
	due := []time.Time{now.Add(time.Second), now.Add(2 * time.Second)}
	p := &driver.CampaignDeliveryInsertParams{Now: &now, MessageID: msg,
		Recipients: []string{"u_a", "u_c"}, NotificationIDs: []string{"n1", "n2"}, DueAt: due}
	if n, err := ex.CampaignDeliveryInsert(ctx, p); err != nil || n != 2 {
		t.Fatalf("insert: %d, %v", n, err)
	}
	p.Recipients, p.NotificationIDs, p.DueAt = []string{"u_c", "u_d"}, []string{"n3", "n4"}, due
	if n, err := ex.CampaignDeliveryInsert(ctx, p); err != nil || n != 1 {
		t.Fatalf("insert again: %d, %v", n, err)
	}
	ds, err := ex.DeliveryListByMessage(ctx, msg, 0, 10)
	if err != nil || len(ds) != 3 {
		t.Fatalf("deliveries %v, %v", ds, err)
	}
	for i, want := range []time.Time{due[0], due[1], due[1]} {
		if !ds[i].NextAttemptAt.Equal(want) || !ds[i].CreatedAt.Equal(now) || ds[i].DedupKey != "" {
			t.Errorf("delivery %d: %+v", i, ds[i])
		}
	}
	if err := ex.DeviceAttemptUpsertMany(ctx, &driver.DeviceAttemptUpsertManyParams{Now: &now, Rows: []driver.DeviceAttemptUpsert{
		{DeliveryID: ds[0].ID, DeviceID: devs[0].ID, Transport: "fcm", TokenKey: "t1", State: driver.AttemptAccepted, SubmissionsDelta: 1},
		{DeliveryID: ds[1].ID, DeviceID: 1, Transport: "fcm", TokenKey: "t4", State: driver.AttemptAccepted, SubmissionsDelta: 1},
		{DeliveryID: ds[2].ID, DeviceID: 1, Transport: "fcm", TokenKey: "t9", State: driver.AttemptRejected},
	}}); err != nil {
		t.Fatal(err)
	}
	counts, err := ex.(drivertest.TestExecutor).DeviceAttemptCountByState(ctx, msg)
	if err != nil || len(counts) != 2 || counts[driver.AttemptAccepted] != 2 || counts[driver.AttemptRejected] != 1 {
		t.Fatalf("attempts by state %v, %v", counts, err)
	}
}
