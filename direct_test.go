package oncepush_test

import (
	"strings"
	"testing"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/internal/testdb"
)

// TestDeviceRecipientIsAContract pins the implicit recipient of direct sends:
// its derivation is documented (docs/api.md) and ledgers are read under it,
// so a change would split a device's history in two.
func TestDeviceRecipientIsAContract(t *testing.T) {
	t.Parallel()
	c, err := oncepush.NewClient(testdb.SQLite(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	sub := oncepush.WebPushSubscription{Endpoint: "https://push.example.net/sub/7", P256dh: append([]byte{4}, make([]byte, 64)...), Auth: make([]byte, 16)}
	spaced := strings.ReplaceAll(string(sub.Token()), ",", ", ")
	for _, tc := range []struct {
		tr    oncepush.Transport
		token string
		want  string
	}{
		{oncepush.TransportFCM, "dQw4w9WgXcQ:APA91bExample", "device:fcm:3945fafe82f4f1b11099bd21bca1396c"},
		{oncepush.TransportRuStore, "dQw4w9WgXcQ:APA91bExample", "device:rustore:3945fafe82f4f1b11099bd21bca1396c"},
		{oncepush.TransportWebPush, string(sub.Token()), "device:webpush:92901018c1cb07a528adec419e0584ad"},
		{oncepush.TransportWebPush, spaced, "device:webpush:92901018c1cb07a528adec419e0584ad"}, // another spelling, the same device
	} {
		got, err := c.DeviceRecipient(tc.tr, oncepush.Token(tc.token))
		if err != nil || got != tc.want {
			t.Errorf("DeviceRecipient(%s, %s) = %q, %v; want %q", tc.tr, oncepush.MaskToken(tc.token), got, err, tc.want)
		}
		if err := oncepush.ValidateRecipient(got); err != nil {
			t.Errorf("%s: the implicit recipient %q is not a valid recipient: %v", tc.tr, got, err)
		}
	}
	// An APNs token's case makes no other device; the id never holds the token.
	lower := strings.Repeat("ab", 32)
	a, _ := c.DeviceRecipient(oncepush.TransportAPNs, oncepush.Token(lower))
	b, _ := c.DeviceRecipient(oncepush.TransportAPNs, oncepush.Token(strings.ToUpper(lower)))
	if a != b || strings.Contains(a, lower[:16]) {
		t.Errorf("APNs implicit recipients %q and %q: want one, without the token", a, b)
	}
	if _, err := c.DeviceRecipient(oncepush.TransportFCM, "no spaces allowed"); err == nil {
		t.Error("DeviceRecipient took an invalid token")
	}
}
