package oncepush_test

import (
	"context"
	"fmt"
	"time"

	"github.com/oncepush/oncepush"
)

// The notification id depends on what the notification is, never on when or
// how often it is sent: compute it where the event happens and every retry
// carries the same id.
func ExampleNotificationID() {
	id := oncepush.NotificationID("invoice.paid", "u_8831", map[string]any{"invoice": "inv_2201"})
	again := oncepush.NotificationID("invoice.paid", "u_8831", map[string]any{"invoice": "inv_2201"})
	fmt.Println(len(id), id == again)
	// Output: 32 true
}

// An eligibility rule reads the application's own settings for the whole
// batch (here two maps; in an application, one query through oncepush.ClaimTx
// for every recipient of every ask) and answers each ask only about the
// recipients it names.
func ExampleEligibility() {
	quietUntil := map[string]time.Time{"u_night_owl": time.Date(2026, 1, 5, 7, 0, 0, 0, time.UTC)}
	optedOut := map[string]bool{"u_no_news": true}

	var rule oncepush.Eligibility = func(_ context.Context, asks []oncepush.Ask) ([]oncepush.Answer, error) {
		out := make([]oncepush.Answer, len(asks))
		for i, a := range asks {
			out[i].Decisions = map[string]oncepush.Decision{}
			for _, r := range a.Recipients {
				switch {
				case a.Notice.Category == "news" && optedOut[r]:
					out[i].Decisions[r] = oncepush.DecisionSkip.Because("opted out of category news")
				case a.Notice.Now.Before(quietUntil[r]):
					out[i].Decisions[r] = oncepush.DelayUntil(quietUntil[r]).Because("quiet hours")
				}
			}
		}
		return out, nil
	}

	now := time.Date(2026, 1, 5, 2, 0, 0, 0, time.UTC)
	ans, _ := rule(context.Background(), []oncepush.Ask{
		{Notice: oncepush.Notice{Category: "news", Now: now}, Recipients: []string{"u_no_news", "u_night_owl", "u_awake"}},
		{Notice: oncepush.Notice{Category: "billing", Now: now}, Recipients: []string{"u_no_news"}},
	})
	news, billing := ans[0].Decisions, ans[1].Decisions
	until, delayed := news["u_night_owl"].Until()
	fmt.Println(news["u_no_news"].IsSkip(), delayed, until.Format(time.Kitchen))
	_, decided := news["u_awake"]
	fmt.Println("u_awake decided:", decided, "| billing to u_no_news decided:", len(billing) > 0)
	// Output:
	// true true 7:00AM
	// u_awake decided: false | billing to u_no_news decided: false
}
