package server

import (
	"testing"
	"time"

	"github.com/oncepush/oncepush/driver/serverstore"
)

func TestQuietUntil(t *testing.T) {
	t.Parallel()
	zurich, _ := time.LoadLocation("Europe/Zurich")
	night := &serverstore.Preference{QuietStart: "22:00", QuietEnd: "07:00", TimeZone: "Europe/Zurich"}
	lunch := &serverstore.Preference{QuietStart: "12:00", QuietEnd: "13:30", TimeZone: "Europe/Zurich"}
	at := func(d, h, m int) time.Time { return time.Date(2026, 3, d, h, m, 0, 0, zurich) }
	for _, tc := range []struct {
		p     *serverstore.Preference
		now   time.Time
		quiet bool
		until time.Time
	}{
		{night, at(5, 21, 59), false, time.Time{}},
		{night, at(5, 22, 0), true, at(6, 7, 0)},
		{night, at(5, 23, 30), true, at(6, 7, 0)},
		{night, at(6, 3, 0), true, at(6, 7, 0)},
		{night, at(6, 7, 0), false, time.Time{}},
		{lunch, at(5, 11, 59), false, time.Time{}},
		{lunch, at(5, 12, 30), true, at(5, 13, 30)},
		{lunch, at(5, 13, 30), false, time.Time{}},
		// The clock of the claim is UTC; the window is the recipient's.
		{night, time.Date(2026, 3, 5, 21, 30, 0, 0, time.UTC), true, at(6, 7, 0)},
		// Across the spring-forward night (2026-03-29 02:00 → 03:00 in Zurich).
		{night, at(28, 23, 0), true, at(29, 7, 0)},
	} {
		until, quiet := quietUntil(tc.p, tc.now)
		if quiet != tc.quiet || !until.Equal(tc.until) {
			t.Errorf("%s–%s at %s: quiet %v until %s; want %v until %s", tc.p.QuietStart, tc.p.QuietEnd, tc.now, quiet, until, tc.quiet, tc.until)
		}
	}
}
