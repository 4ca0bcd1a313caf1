package oncepush_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/oncepush/oncepush"
)

func TestMaskToken(t *testing.T) {
	t.Parallel()
	fcm := "dGhpc2lzYXZlcnlsb25nZmNtdG9rZW4:APA91bHun4MxP5egoKMwt2KZFBaFUH"
	if got, want := oncepush.MaskToken(fcm), fcm[:6]+"…"+fcm[len(fcm)-4:]; got != want {
		t.Fatalf("MaskToken = %q", got)
	}
	if got := oncepush.MaskToken("short"); got != "…" {
		t.Fatalf("short token masked as %q", got)
	}
	sub := (&oncepush.WebPushSubscription{
		Endpoint: "https://fcm.googleapis.com/fcm/send/secret-endpoint-id-123456",
		P256dh:   append([]byte{4}, make([]byte, 64)...), Auth: make([]byte, 16),
	}).Token()
	got := oncepush.MaskToken(string(sub))
	if got != "fcm.googleapis.com/…123456" {
		t.Fatalf("web push token masked as %q", got)
	}
}

func TestTokensAndDevicesLogRedacted(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	secret := "fcm-secret-token-abcdefghijklmnop"
	d := oncepush.Device{ID: 7, Recipient: "u1", Transport: oncepush.TransportFCM, Token: oncepush.Token(secret)}
	log.Info("device", slog.Any("device", d), slog.Any("token", d.Token))
	log.Info("formatted " + d.Token.String())
	if strings.Contains(buf.String(), "token-abcdefghij") {
		t.Fatalf("a token reached the log: %s", buf.String())
	}
}

func TestWebPushSubscriptionRoundTrip(t *testing.T) {
	t.Parallel()
	key := append([]byte{4}, bytes.Repeat([]byte{7}, 64)...)
	auth := bytes.Repeat([]byte{9}, 16)
	// Browsers may pad base64url; both forms parse.
	raw := `{"endpoint":"https://updates.push.services.mozilla.com/wpush/v2/abc","keys":{"p256dh":"` +
		base64.URLEncoding.EncodeToString(key) + `","auth":"` + base64.RawURLEncoding.EncodeToString(auth) + `"}}`
	s, err := oncepush.ParseWebPushSubscription(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.P256dh, key) || !bytes.Equal(s.Auth, auth) || s.Endpoint != "https://updates.push.services.mozilla.com/wpush/v2/abc" {
		t.Fatalf("parsed %+v", s)
	}
	again, err := oncepush.ParseWebPushSubscription(string(s.Token()))
	if err != nil || !bytes.Equal(again.P256dh, key) {
		t.Fatalf("round trip: %+v, %v", again, err)
	}
	for _, bad := range []string{
		`not json`,
		`{"endpoint":"http://push.example/x","keys":{"p256dh":"` + base64.RawURLEncoding.EncodeToString(key) + `","auth":"` + base64.RawURLEncoding.EncodeToString(auth) + `"}}`,
		`{"endpoint":"https://push.example/x","keys":{"p256dh":"AAAA","auth":"` + base64.RawURLEncoding.EncodeToString(auth) + `"}}`,
		`{"endpoint":"https://push.example/x","keys":{"p256dh":"` + base64.RawURLEncoding.EncodeToString(key) + `","auth":"AAAA"}}`,
	} {
		if _, err := oncepush.ParseWebPushSubscription(bad); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// A subscription is read as I-JSON, its members named exactly: encoding/json
// took the last of two endpoints, an "ENDPOINT" for the endpoint, text after
// the object, and a lone surrogate as U+FFFD, so the endpoint used was not
// the one the document (and a schema validator) read.
func TestWebPushSubscriptionIsReadStrictly(t *testing.T) {
	t.Parallel()
	keys := `"keys": {"p256dh": "` + base64.RawURLEncoding.EncodeToString(append([]byte{4}, bytes.Repeat([]byte{7}, 64)...)) +
		`", "auth": "` + base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{9}, 16)) + `"}`
	const ep = `"endpoint": "https://fcm.googleapis.com/fcm/send/abc"`
	for name, token := range map[string]string{
		"endpoint twice":          `{` + ep + `, ` + keys + `, "endpoint": "https://evil.example/x"}`,
		"keys twice":              `{` + ep + `, ` + keys + `, "keys": {}}`,
		"p256dh in capitals":      `{` + ep + `, ` + strings.Replace(keys, "p256dh", "P256DH", 1) + `}`,
		"lone surrogate":          `{"endpoint": "https://fcm.googleapis.com/fcm/send/\ud800", ` + keys + `}`,
		"a second value":          `{` + ep + `, ` + keys + `} {"endpoint": "https://evil.example/x"}`,
		"a bracket after":         `{` + ep + `, ` + keys + `}]`,
		"expirationTime too big":  `{` + ep + `, ` + keys + `, "expirationTime": 1e400}`,
		"expirationTime a string": `{` + ep + `, ` + keys + `, "expirationTime": "soon"}`,
	} {
		_, err := oncepush.ParseWebPushSubscription(token)
		var ve *oncepush.ValidationError
		if !errors.As(err, &ve) || ve.Field != "token" {
			t.Errorf("%s: got %v, want a validation error naming the token", name, err)
		}
	}
	// What browsers send is still read: expirationTime null or a number,
	// members in any order, and a member of another name is another member.
	for _, token := range []string{
		`{` + ep + `, "expirationTime": null, ` + keys + `}`,
		`{` + keys + `, "expirationTime": 1767225600000, ` + ep + `}`,
		`{` + ep + `, ` + keys + `, "ENDPOINT": "https://evil.example/x"}`,
	} {
		if s, err := oncepush.ParseWebPushSubscription(token); err != nil || s.Endpoint != "https://fcm.googleapis.com/fcm/send/abc" {
			t.Errorf("%s: %+v, %v", token, s, err)
		}
	}
}
