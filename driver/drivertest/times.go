package drivertest

import (
	"errors"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
)

// testTimesTheAPICanWrite: a send or a campaign whose times could be stored
// but not written back in RFC 3339 (an expiry after 9999-12-31T23:59:59Z,
// a time before year 0) is refused at the call site, naming the field, with
// or without a dedup key, and writes nothing; the last instant there is
// is taken and read back as it was given.
func testTimesTheAPICanWrite[TTx any](t *testing.T, h Harness[TTx]) {
	b := setup(t, h, nil, "r1")
	latest := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	day := 24 * time.Hour
	wantField := func(what, field string, err error) {
		t.Helper()
		var ve *oncepush.ValidationError
		if !errors.As(err, &ve) || ve.Field != field {
			t.Errorf("%s: err = %v, want a ValidationError naming %s", what, err, field)
		}
	}
	for _, tc := range []struct {
		name string
		opts oncepush.SendOptions
	}{
		{"scheduled at the last second", oncepush.SendOptions{ScheduledAt: latest}},
		{"expiring after the last second", oncepush.SendOptions{ScheduledAt: latest.Add(-day), Lifetime: day + time.Second}},
		{"expiring after the last second, with a key", oncepush.SendOptions{ScheduledAt: latest, DedupKey: "far"}},
		{"before year 0, with a key", oncepush.SendOptions{ScheduledAt: time.Date(-1, 6, 1, 0, 0, 0, 0, time.UTC), DedupKey: "long-ago"}},
	} {
		_, err := b.client.Send(b.ctx, []string{"r1"}, msg("t"), &tc.opts)
		wantField(tc.name, "scheduledAt", err)
	}
	if ds := b.deliveries("r1"); len(ds) != 0 {
		t.Fatalf("refused sends left %d deliveries", len(ds))
	}
	res := b.send([]string{"r1"}, msg("t"), &oncepush.SendOptions{ScheduledAt: latest.Add(-day), Lifetime: day})
	if m, err := b.client.Message(b.ctx, res.MessageID); err != nil || !m.ExpiresAt.Equal(latest) {
		t.Fatalf("expiring at the last second: %+v, %v", m, err)
	}

	spec := campaignSpec("sale")
	spec.LocalTime = &oncepush.LocalTime{Date: "9999-12-31", Time: "09:00"}
	_, err := b.client.CreateCampaign(b.ctx, spec)
	wantField("a local time on the last day", "localTime.date", err)
	spec.LocalTime = &oncepush.LocalTime{Date: "2027-03-28", Time: "9:00"}
	_, err = b.client.CreateCampaign(b.ctx, spec)
	wantField("a one-digit hour", "localTime.time", err)
	c := b.createCampaign(campaignSpec("sale"))
	_, err = b.client.ScheduleCampaign(b.ctx, c.ID, latest)
	wantField("a campaign starting at the last second", "startAt", err)
	_, err = b.client.ScheduleCampaign(b.ctx, c.ID, time.Date(-1, 6, 1, 0, 0, 0, 0, time.UTC))
	wantField("a campaign starting before year 0", "startAt", err)
	if got := b.campaign(c.ID); got.Status != oncepush.CampaignDraft || !got.StartAt.IsZero() {
		t.Fatalf("refused schedules left the campaign %s at %s", got.Status, got.StartAt)
	}
	if cs, err := b.client.Campaigns(b.ctx, oncepush.CampaignQuery{}); err != nil || len(cs.Campaigns) != 1 {
		t.Fatalf("campaigns: %+v, %v; want only the one created", cs, err)
	}
}
