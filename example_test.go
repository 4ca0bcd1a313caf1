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

// An eligibility rule reads the application's own settings (here a map; in an
// application, one query through oncepush.ClaimTx) and answers only about the
// recipients it was asked about.
func ExampleEligibility() {
	quietUntil := map[string]time.Time{"u_night_owl": time.Date(2026, 1, 5, 7, 0, 0, 0, time.UTC)}
	optedOut := map[string]bool{"u_no_news": true}

	var rule oncepush.Eligibility = func(_ context.Context, n oncepush.Notice, recipients []string) (map[string]oncepush.Decision, error) {
		out := map[string]oncepush.Decision{}
		for _, r := range recipients {
			switch {
			case n.Category == "news" && optedOut[r]:
				out[r] = oncepush.DecisionSkip
			case n.Now.Before(quietUntil[r]):
				out[r] = oncepush.DelayUntil(quietUntil[r])
			}
		}
		return out, nil
	}

	now := time.Date(2026, 1, 5, 2, 0, 0, 0, time.UTC)
	ans, _ := rule(context.Background(), oncepush.Notice{Category: "news", Now: now}, []string{"u_no_news", "u_night_owl", "u_awake"})
	until, delayed := ans["u_night_owl"].Until()
	fmt.Println(ans["u_no_news"].IsSkip(), delayed, until.Format(time.Kitchen))
	_, present := ans["u_awake"]
	fmt.Println("u_awake decided:", present)
	// Output:
	// true true 7:00AM
	// u_awake decided: false
}
