package oncepush_test

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"testing"

	"github.com/oncepush/oncepush"
)

func TestNotificationIDIsCanonical(t *testing.T) {
	t.Parallel()
	a := oncepush.NotificationID("invoice.paid", "u_8831", map[string]any{"invoice": "inv_2201", "amount": 1240})
	b := oncepush.NotificationID("invoice.paid", "u_8831", map[string]any{"amount": 1240, "invoice": "inv_2201"})
	if a != b {
		t.Fatalf("key order changed the id: %s vs %s", a, b)
	}
	// The documented canonical form, hashed by hand: keys sorted at every level,
	// no HTML escaping, no whitespace.
	sum := sha256.Sum256([]byte(`{"k":{"amount":1240,"invoice":"inv_2201"},"r":"u_8831","t":"invoice.paid"}`))
	if want := hex.EncodeToString(sum[:16]); a != want {
		t.Fatalf("NotificationID = %s, want %s", a, want)
	}
	if len(a) != 32 {
		t.Fatalf("length %d, want 32", len(a))
	}
	for _, other := range []string{
		oncepush.NotificationID("invoice.paid", "u_8832", map[string]any{"invoice": "inv_2201", "amount": 1240}),
		oncepush.NotificationID("invoice.sent", "u_8831", map[string]any{"invoice": "inv_2201", "amount": 1240}),
		oncepush.NotificationID("invoice.paid", "u_8831", map[string]any{"invoice": "inv_2202", "amount": 1240}),
	} {
		if other == a {
			t.Fatal("different inputs gave the same id")
		}
	}
	// HTML characters are not escaped (another language's JSON.stringify agrees).
	sum = sha256.Sum256([]byte(`{"k":{"q":"<a&b>"},"r":"r","t":"t"}`))
	if got, want := oncepush.NotificationID("t", "r", map[string]any{"q": "<a&b>"}), hex.EncodeToString(sum[:16]); got != want {
		t.Fatalf("HTML escaping changed the id: %s, want %s", got, want)
	}
}

func TestSubmissionIDIsUUIDv5(t *testing.T) {
	t.Parallel()
	apns := oncepush.TransportAPNs
	id := oncepush.SubmissionID(17, apns, "42")
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(id) {
		t.Fatalf("SubmissionID = %q, not a lowercase UUID v5", id)
	}
	if oncepush.SubmissionID(17, apns, "42") != id {
		t.Fatal("SubmissionID is not stable")
	}
	if oncepush.SubmissionID(17, apns, "43") == id || oncepush.SubmissionID(17, oncepush.TransportFCM, "42") == id ||
		oncepush.SubmissionID(1742, apns, "0") == oncepush.SubmissionID(17, apns, "420") {
		t.Fatal("different pairs share a SubmissionID")
	}
}
