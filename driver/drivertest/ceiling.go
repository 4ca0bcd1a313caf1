package drivertest

import (
	"slices"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver"
)

// The per-transport ceiling on campaign submissions (D96): one window
// shared by every process, transactional sends never held.

// testCampaignCeiling: with a ceiling of 120 FCM submissions a minute (12
// windows of 5 s allowing 10 each), two clients draining one campaign in
// turn submit 10 per window between them, while transactional sends made
// meanwhile go at once; deliveries put back keep their attempts.
func testCampaignCeiling[TTx any](t *testing.T, h Harness[TTx]) {
	ceiling := func(c *oncepush.Config) {
		c.CampaignCeilings = map[oncepush.Transport]int{oncepush.TransportFCM: 120}
		c.BatchSize = 7
	}
	b := setup(t, h, ceiling)
	other := b.newClient(b.db.Driver(t, 0), func(c *oncepush.Config) {
		ceiling(c)
		c.Providers = []oncepush.Provider{b.fcm}
	})
	rs := b.recipientsNamed("ceil-", 45)
	c := b.startCampaign(campaignSpec("paced by the ceiling"), rs...)
	b.expand(b.client)
	urgent := b.recipientsNamed("urgent-", 5)
	if _, err := b.client.Send(b.ctx, urgent, msg("urgent"), nil); err != nil {
		t.Fatal(err)
	}
	campaignSends := func() (n, urgentSends int) {
		for _, s := range b.fcm.Submissions() {
			switch s.Title {
			case "paced by the ceiling":
				n++
			case "urgent":
				urgentSends++
			}
		}
		return n, urgentSends
	}
	var perWindow []int
	prev := 0
	for step := range 8 {
		// One client spends the window; the other, a process of its own
		// budget if the window were not shared, must find it spent.
		drain(t, b.client)
		drain(t, other)
		n, u := campaignSends()
		if step == 0 && u != 5 {
			t.Fatalf("the transactional sends: %d of 5 went in the first window", u)
		}
		perWindow = append(perWindow, n-prev)
		prev = n
		b.clock.Advance(5 * time.Second)
	}
	if want := []int{10, 10, 10, 10, 5, 0, 0, 0}; !slices.Equal(perWindow, want) {
		t.Fatalf("campaign submissions per 5 s window: %v, want %v", perWindow, want)
	}
	b.deliveredOnce(slices.DeleteFunc(b.fcm.Submissions(), func(s oncepush.Submission) bool { return s.Title == "urgent" }), "paced by the ceiling", rs)
	ds, err := b.drv.Exec().DeliveryListByMessage(b.ctx, b.campaign(c.ID).MessageID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Attempts != 0 || d.Status != driver.StatusSent {
			t.Fatalf("delivery %d: %s with %d failed attempts; want sent with none (being put back is no attempt)", d.ID, d.Status, d.Attempts)
		}
	}
}
