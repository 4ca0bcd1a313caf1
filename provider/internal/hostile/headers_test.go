package hostile

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oncepush/oncepush/provider"
	"github.com/oncepush/oncepush/provider/apns"
	"github.com/oncepush/oncepush/provider/hms"
)

// injection is text that would add a header if it reached one unchecked.
const injection = "x\r\nX-Injected: 1\r\n\r\nGET /evil HTTP/1.1"

// The headers each provider's request carries, and no other: what message
// text can change is in the body.
var wantHeaders = map[provider.Transport][]string{
	provider.TransportFCM:     {"Accept-Encoding", "Authorization", "Content-Length", "Content-Type", "User-Agent"},
	provider.TransportAPNs:    {"Accept-Encoding", "Apns-Collapse-Id", "Apns-Expiration", "Apns-Id", "Apns-Priority", "Apns-Push-Type", "Apns-Topic", "Authorization", "Content-Length", "Content-Type", "User-Agent"},
	provider.TransportWebPush: {"Accept-Encoding", "Authorization", "Content-Encoding", "Content-Length", "Content-Type", "Topic", "Ttl", "Urgency", "User-Agent"},
	provider.TransportRuStore: {"Accept-Encoding", "Authorization", "Content-Length", "Content-Type", "User-Agent"},
	hms.Name:                  {"Accept-Encoding", "Authorization", "Content-Length", "Content-Type", "Push-Type", "User-Agent"},
}

// TestMessageTextCannotAddHeaders: CR, LF and a whole second request in
// every text of a message — title, body, type, category, link, image, data
// keys and values — travel in the request's body; the request has exactly
// its provider's headers, the collapse id's among them unchanged.
func TestMessageTextCannotAddHeaders(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, tr := range transports {
		s := w.submission(tr)
		s.Title, s.Body, s.Type, s.Category = "T"+injection, "B"+injection, "t"+injection, "c"+injection
		s.Link, s.Image = "/l"+injection, "https://img.example/i.png"+injection
		s.Data = map[string]string{"oncepush_id": s.NotificationID, "k" + injection: "v" + injection}
		if res := w.send(s); res.Outcome != provider.OutcomeAccepted {
			t.Errorf("%s: %v %q, want accepted (the text is the body's)", tr, res.Outcome, res.Text)
		}
	}
	got := w.requests()
	if len(got) != len(transports) {
		t.Fatalf("the push service received %d requests, want %d", len(got), len(transports))
	}
	for _, r := range got {
		tr := transportOf(r.path)
		var names []string
		for k := range r.header {
			names = append(names, k)
		}
		slices.Sort(names)
		if !slices.Equal(names, wantHeaders[tr]) {
			t.Errorf("%s: headers %v, want %v", tr, names, wantHeaders[tr])
		}
		for _, h := range []string{"Apns-Collapse-Id", "Topic"} {
			if v := r.header.Get(h); v != "" && v != "0123456789abcdef0123456789abcdef" {
				t.Errorf("%s: %s is %q", tr, h, v)
			}
		}
		if strings.Contains(r.path, "evil") {
			t.Errorf("%s: the path is %q", tr, r.path)
		}
	}
}

// TestHeaderValuesAreChecked: a collapse id or apns-id that is not a
// header-safe value (engine-made ones are hex and a UUID; a Provider is
// public API) is refused by APNs before any request, rather than left to
// net/http to refuse as "not sent" and retried; Web Push leaves such a
// Topic out; FCM carries it in JSON. An APNs topic (a bundle id) that could
// not be a header value is a configuration error.
func TestHeaderValuesAreChecked(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, field := range []string{"collapse id", "apns-id"} {
		s := w.submission(provider.TransportAPNs)
		if field == "collapse id" {
			s.CollapseID = "c" + injection
		} else {
			s.SubmissionID = "9b2f4c1e" + injection
		}
		if res := w.send(s); res.Outcome != provider.OutcomeRejected || !strings.Contains(res.Text, "apns-") {
			t.Errorf("apns with an unsafe %s: %v %q, want rejected, naming the header", field, res.Outcome, res.Text)
		}
	}
	if n := len(w.requests()); n != 0 {
		t.Errorf("the push service received %d requests", n)
	}
	for _, tr := range []provider.Transport{provider.TransportWebPush, provider.TransportFCM} {
		s := w.submission(tr)
		s.CollapseID = "c" + injection
		if res := w.send(s); res.Outcome != provider.OutcomeAccepted {
			t.Errorf("%s with an unsafe collapse id: %v %q, want sent", tr, res.Outcome, res.Text)
		}
	}
	for _, r := range w.requests() {
		if transportOf(r.path) == provider.TransportWebPush && r.header.Get("Topic") != "" {
			t.Errorf("webpush: Topic %q sent", r.header.Get("Topic"))
		}
	}

	for _, topic := range []string{"com.example.app" + injection, "com.example app", "com.example.app\x00", "com.exämple.app"} {
		_, err := apns.New(apns.Config{Key: p8(t), KeyID: "KEYID12345", TeamID: "TEAMID1234", Topic: topic})
		var ce *apns.ConfigError
		if err == nil || !errors.As(err, &ce) || ce.Field != "Topic" {
			t.Errorf("apns.New with Topic %q: %v, want a ConfigError naming Topic", topic, err)
		}
	}
	for _, topic := range []string{"com.example.app", "com.example.app.voip", "com.example-app.complication", "A1B2C3.com.Example"} {
		if _, err := apns.New(apns.Config{Key: p8(t), KeyID: "KEYID12345", TeamID: "TEAMID1234", Topic: topic}); err != nil {
			t.Errorf("apns.New with Topic %q: %v", topic, err)
		}
	}
}

// TestImagesAreNotFetched: a message's image URL is handed to the provider,
// which shows it (or the app fetches it); oncepush itself never requests
// it, not even when it names an internal address.
func TestImagesAreNotFetched(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var hits atomic.Int64
	img := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(img.Close)
	for _, u := range []string{img.URL + "/latest/meta-data/a.png", w.internal.URL + "/a.png"} {
		for _, tr := range transports {
			s := w.submission(tr)
			s.Image = u
			if res := w.send(s); res.Outcome != provider.OutcomeAccepted {
				t.Errorf("%s: %v %q", tr, res.Outcome, res.Text)
			}
		}
	}
	if n := hits.Load() + w.internalHits.Load(); n != 0 {
		t.Errorf("the image URLs were requested %d times", n)
	}
	// Handed on (Web Push's body is encrypted; its fake-provider tests read it).
	for _, r := range w.requests() {
		if tr := transportOf(r.path); tr != provider.TransportWebPush {
			b, _ := json.Marshal(w.internal.URL + "/a.png")
			if !strings.Contains(string(r.body), strings.Trim(string(b), `"`)) && !strings.Contains(string(r.body), img.URL) {
				t.Errorf("%s: the request does not carry the image URL: %s", tr, r.body)
			}
		}
	}
}

func transportOf(path string) provider.Transport {
	switch {
	case strings.HasPrefix(path, "/fcm/"):
		return provider.TransportFCM
	case strings.HasPrefix(path, "/3/device/"):
		return provider.TransportAPNs
	case strings.HasPrefix(path, "/push/"):
		return provider.TransportWebPush
	case strings.HasPrefix(path, "/hms/"):
		return hms.Name
	}
	return provider.TransportRuStore
}
