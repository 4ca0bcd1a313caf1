package e2e

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/fakepush"
	"github.com/oncepush/oncepush/internal/testlog"
	"github.com/oncepush/oncepush/pushtest"
)

func withLogs(logs *testlog.Buffer) func(*oncepush.Config) {
	return func(c *oncepush.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
}

// TestOutcomesAreLogged: a run that sends, is asked to retry, is rejected and
// meets a dead token logs one summary at info with the counts by transport,
// a warn line per answer that is not a success in the provider's words, and
// every device's outcome at debug — never a token.
func TestOutcomesAreLogged(t *testing.T) {
	t.Parallel()
	logs := &testlog.Buffer{}
	e := setup(t, withLogs(logs))
	devs := map[oncepush.Transport]*oncepush.Device{}
	for i, tr := range transports() {
		devs[tr] = e.register("u_log", tr, 700+i)
	}
	e.fake.Program(oncepush.TransportAPNs, "", fakepush.DeadTokenAnswer(oncepush.TransportAPNs))
	e.fake.Program(oncepush.TransportRuStore, "", pushtest.RuStoreError(503, "UNAVAILABLE", "The service is currently unavailable."))
	e.fake.Program(oncepush.TransportWebPush, "", pushtest.WebPushError(413))
	e.sendAndDrain([]string{"u_log"}, oncepush.Message{Title: "logged"})

	var summary map[string]any
	warns := map[string]map[string]any{}
	debug := map[string]map[string]any{}
	for _, l := range logs.Records(t) {
		switch l["level"] {
		case "INFO":
			if l["msg"] == "delivery run" {
				summary = l
			}
		case "WARN":
			warns[l["transport"].(string)] = l
		case "DEBUG":
			if l["msg"] == "device outcome" {
				debug[l["transport"].(string)] = l
			}
		}
	}
	if summary == nil {
		t.Fatalf("no run summary at info:\n%s", logs)
	}
	if summary["claimed"] != 1.0 || summary["submitted"] != float64(len(transports())) {
		t.Errorf("summary %v: want 1 claimed, %d submitted", summary, len(transports()))
	}
	for tr, want := range map[string]string{"fcm": "sent", "apns": "invalid_token", "rustore": "retry", "webpush": "rejected", "hms": "sent"} {
		g, _ := summary[tr].(map[string]any)
		if len(g) != 1 || g[want] != 1.0 {
			t.Errorf("summary's %s: %v, want {%s: 1}", tr, g, want)
		}
	}
	for tr, want := range map[string]struct{ msg, text string }{
		"apns":    {"invalid token; device deleted", "apns 410 Unregistered"},
		"rustore": {"provider asked to retry", "rustore 503 UNAVAILABLE: The service is currently unavailable."},
		"webpush": {"provider rejected the notification", "webpush 413"},
	} {
		w := warns[tr]
		if w == nil || w["msg"] != want.msg || !strings.HasPrefix(w["error"].(string), want.text) {
			t.Errorf("%s warn line %v: want %q with error %q…", tr, w, want.msg, want.text)
			continue
		}
		if w["delivery_id"] == nil || w["recipient"] != "u_log" || w["device_id"] != float64(devs[oncepush.Transport(tr)].ID) {
			t.Errorf("%s warn line %v does not say which delivery and device", tr, w)
		}
	}
	if warns["fcm"] != nil {
		t.Errorf("an accepted send logged at warn: %v", warns["fcm"])
	}
	for _, tr := range transports() {
		d := debug[string(tr)]
		if d == nil || d["token"] != oncepush.MaskToken(string(devs[tr].Token)) {
			t.Errorf("%s: device outcome at debug %v, want one with the masked token", tr, d)
		}
	}
	if d := debug["fcm"]; d == nil || d["outcome"] != "accepted" || d["provider_id"] == "" {
		t.Errorf("fcm's device outcome %v: want accepted with the provider's id", d)
	}
	for tr, d := range devs {
		if strings.Contains(logs.String(), string(d.Token)) {
			t.Errorf("the log holds %s's token", tr)
		}
	}
}

// TestRepeatedAnswersAreLimited: an outage that fails every send writes a
// few lines a minute per answer, not one per send; the first line of the
// next minute says how many were withheld, and the run summary counts all.
func TestRepeatedAnswersAreLimited(t *testing.T) {
	t.Parallel()
	logs := &testlog.Buffer{}
	clock := pushtest.NewClock(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC))
	e := setup(t, func(c *oncepush.Config) {
		withLogs(logs)(c)
		c.Clock = clock
	})
	// RuStore: its service token does not depend on the time, which the
	// test moves for the client only.
	names := e.registerMany(12, oncepush.TransportRuStore, 800)
	e.fake.Program(oncepush.TransportRuStore, "", pushtest.RuStoreError(503, "UNAVAILABLE", "The service is currently unavailable."))
	count := func() (warned, suppressed, retries int) {
		for _, l := range logs.Records(t) {
			switch {
			case l["msg"] == "provider asked to retry":
				warned++
				if n, ok := l["suppressed"].(float64); ok {
					suppressed += int(n)
				}
			case l["msg"] == "delivery run":
				g, _ := l["rustore"].(map[string]any)
				n, _ := g["retry"].(float64)
				retries += int(n)
			}
		}
		return
	}
	e.sendAndDrain(names, oncepush.Message{Title: "outage"})
	if w, s, r := count(); w != 5 || s != 0 || r != 12 {
		t.Fatalf("first minute: %d warn lines (%d suppressed), %d retries counted; want 5, 0, 12\n%s", w, s, r, logs)
	}
	clock.Advance(2 * time.Minute) // past the backoff and the log's minute
	if _, err := e.client.Drain(e.ctx); err != nil {
		t.Fatal(err)
	}
	if w, s, r := count(); w != 10 || s != 7 || r != 24 {
		t.Fatalf("second minute: %d warn lines (%d suppressed), %d retries counted; want 10, 7, 24", w, s, r)
	}
}
