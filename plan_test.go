package oncepush

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush/driver"
)

// Unit tests of the run's pure planning (plan.go, claim_plan.go,
// submit_plan.go, record_plan.go): no database, no provider, no clock.

// t0 is the claims' now in these tests.
var t0 = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// rules: 6 attempts, backoff 15 s doubling to 1 h with no jitter (a draw of
// 0.5 is a factor of exactly 1), FCM and APNs served.
func rules() planRules {
	return planRules{
		maxAttempts: 6, backoffMin: 15 * time.Second, backoffMax: time.Hour,
		jitter:    func() float64 { return 0.5 },
		providers: map[Transport]Provider{TransportFCM: nil, TransportAPNs: nil},
	}
}

// updateString shows a delivery update as "d1 pending a1 in 15s err=…".
func updateString(u driver.DeliveryUpdate) string {
	s := fmt.Sprintf("d%d %s a%d", u.ID, u.Status, u.Attempts)
	if u.NextAttemptAt != nil {
		s += " at+" + u.NextAttemptAt.Sub(t0).String()
	}
	if u.Delay != 0 {
		s += " in " + u.Delay.String()
	}
	if u.LastError != nil {
		s += " err=" + *u.LastError
	}
	return s
}

func updateStrings(us []driver.DeliveryUpdate) []string {
	out := []string{}
	for _, u := range us {
		out = append(out, updateString(u))
	}
	return out
}

// writeStrings shows ledger writes as "d1 dev2 fcm/t2 ambiguous amb+1 err=…".
func writeStrings(ws []driver.DeviceAttemptUpsert) []string {
	out := []string{}
	for _, w := range ws {
		s := fmt.Sprintf("d%d dev%d %s/%s %s", w.DeliveryID, w.DeviceID, w.Transport, w.TokenKey, w.State)
		if w.SubmissionsDelta != 0 {
			s += fmt.Sprintf(" subs%+d", w.SubmissionsDelta)
		}
		if w.AmbiguousDelta != 0 {
			s += fmt.Sprintf(" amb%+d", w.AmbiguousDelta)
		}
		if w.ProviderID != "" {
			s += " id=" + w.ProviderID
		}
		if w.Error != "" {
			s += " err=" + w.Error
		}
		out = append(out, s)
	}
	return out
}

func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if want == nil {
		want = []string{}
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}

func TestSettled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		state              string
		resend, atMostOnce bool
	}{
		{driver.AttemptPending, false, false},
		{driver.AttemptSending, false, false},
		{driver.AttemptRetry, false, false},
		{driver.AttemptAccepted, true, true},
		{driver.AttemptInvalid, true, true},
		{driver.AttemptRejected, true, true},
		{driver.AttemptAmbiguous, false, true},
	} {
		if got := settled(tc.state, AmbiguityResend); got != tc.resend {
			t.Errorf("settled(%s, resend) = %v, want %v", tc.state, got, tc.resend)
		}
		if got := settled(tc.state, AmbiguityAtMostOnce); got != tc.atMostOnce {
			t.Errorf("settled(%s, at-most-once) = %v, want %v", tc.state, got, tc.atMostOnce)
		}
	}
}

func TestFinalStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		accepted, ambiguous, hasDevices bool
		want                            string
	}{
		{true, true, true, driver.StatusSent},
		{true, false, false, driver.StatusSent},
		{false, true, true, driver.StatusAmbiguous},
		{false, true, false, driver.StatusAmbiguous},
		{false, false, false, driver.StatusNoDevices},
		{false, false, true, driver.StatusFailed},
	} {
		d := &delivery{accepted: tc.accepted, ambiguous: tc.ambiguous}
		if got := d.finalStatus(tc.hasDevices); got != tc.want {
			t.Errorf("finalStatus(accepted %v, ambiguous %v, devices %v) = %s, want %s", tc.accepted, tc.ambiguous, tc.hasDevices, got, tc.want)
		}
	}
}

func TestEndAndRetry(t *testing.T) {
	t.Parallel()
	row := func() *driver.ClaimedDelivery { return &driver.ClaimedDelivery{ID: 1} }
	for _, tc := range []struct {
		name string
		do   func() driver.DeliveryUpdate
		want string
	}{
		{"end keeps its status", func() driver.DeliveryUpdate {
			return (&delivery{row: row()}).end(driver.StatusExpired)
		}, "d1 expired a0"},
		{"an accepted device ends it sent whatever ended it", func() driver.DeliveryUpdate {
			return (&delivery{row: row(), accepted: true, attempts: 2}).end(driver.StatusSkipped)
		}, "d1 sent a2"},
		{"notes become the last error, storable", func() driver.DeliveryUpdate {
			d := &delivery{row: row()}
			d.note("fcm device 1: bad\x00")
			d.note("apns device 2: worse")
			return d.end(driver.StatusFailed)
		}, "d1 failed a0 err=fcm device 1: bad; apns device 2: worse"},
		{"first retry backs off the minimum", func() driver.DeliveryUpdate {
			return rules().retryOrEnd(&delivery{row: row()}, "503", 0, true)
		}, "d1 pending a1 in 15s err=503"},
		{"backoff doubles per attempt", func() driver.DeliveryUpdate {
			return rules().retryOrEnd(&delivery{row: row(), attempts: 3}, "", 0, true)
		}, "d1 pending a4 in 2m0s"},
		{"backoff is capped", func() driver.DeliveryUpdate {
			r := rules()
			r.maxAttempts = 20
			return r.retryOrEnd(&delivery{row: row(), attempts: 12}, "", 0, true)
		}, "d1 pending a13 in 1h0m0s"},
		{"a longer wait (Retry-After) wins over the backoff", func() driver.DeliveryUpdate {
			return rules().retryOrEnd(&delivery{row: row()}, "", 10*time.Minute, true)
		}, "d1 pending a1 in 10m0s"},
		{"a shorter wait loses to the backoff", func() driver.DeliveryUpdate {
			return rules().retryOrEnd(&delivery{row: row()}, "", time.Second, true)
		}, "d1 pending a1 in 15s"},
		{"the last attempt ends failed", func() driver.DeliveryUpdate {
			return rules().retryOrEnd(&delivery{row: row(), attempts: 5}, "503", 0, true)
		}, "d1 failed a6 err=503"},
		{"the last attempt ends sent when a device accepted", func() driver.DeliveryUpdate {
			return rules().retryOrEnd(&delivery{row: row(), attempts: 5, accepted: true}, "", 0, true)
		}, "d1 sent a6"},
		{"the last attempt ends ambiguous when a submission may be lost", func() driver.DeliveryUpdate {
			return rules().retryOrEnd(&delivery{row: row(), attempts: 5, ambiguous: true}, "", 0, true)
		}, "d1 ambiguous a6"},
	} {
		if got := updateString(tc.do()); got != tc.want {
			t.Errorf("%s:\n got  %s\n want %s", tc.name, got, tc.want)
		}
	}
	// Jitter: ±20 %, drawn from the rules.
	r := rules()
	for draw, want := range map[float64]time.Duration{0: 12 * time.Second, 0.999999: 18 * time.Second} {
		r.jitter = func() float64 { return draw }
		got := r.retryOrEnd(&delivery{row: row()}, "", 0, true).Delay
		if got.Round(time.Second) != want {
			t.Errorf("jitter draw %v: delay %s, want about %s", draw, got, want)
		}
	}
}

func TestPlanRulesFollowConfig(t *testing.T) {
	t.Parallel()
	cfg, err := (&Config{MaxAttempts: 3, BackoffMin: time.Second, BackoffMax: time.Minute}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	c := &clientCore{cfg: cfg, providers: map[Transport]Provider{TransportFCM: nil}}
	r := c.planRules()
	if r.maxAttempts != 3 || r.backoffMin != time.Second || r.backoffMax != time.Minute || r.jitter != nil {
		t.Errorf("rules %+v do not follow the configuration", r)
	}
	if !r.serves(TransportFCM) || r.serves(TransportAPNs) {
		t.Error("rules do not serve exactly the configured providers' transports")
	}
}
