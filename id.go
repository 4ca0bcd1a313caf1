package oncepush

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

// NotificationID returns the content-derived id of a notification: the first 16
// bytes, in hex (32 characters), of the SHA-256 of the canonical JSON
// {"k": key, "r": recipient, "t": typ} — object keys sorted at every level, no
// HTML escaping, no whitespace. The same inputs give the same id on every machine
// and every attempt; put in key only what makes this notification this one (an
// invoice id, a comment id), never a timestamp, nonce or attempt number.
//
// oncepush uses it as the collapse id at the provider and as "oncepush_id" in the
// payload, so a device can drop what it has already shown.
func NotificationID(typ, recipient string, key map[string]any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if key == nil {
		key = map[string]any{}
	}
	// encoding/json sorts map keys, which makes this canonical.
	if err := enc.Encode(map[string]any{"k": key, "r": recipient, "t": typ}); err != nil {
		// Only unencodable key values (channels, functions) get here: a
		// programming error in the caller, not an input to recover from.
		panic(fmt.Sprintf("oncepush: NotificationID: key cannot be encoded: %v", err))
	}
	sum := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	return hex.EncodeToString(sum[:16])
}

// notificationIDFor gives a delivery's notification id: content-derived from the
// dedup key when there is one, random otherwise (every keyless call sends).
func notificationIDFor(typ, recipient, dedupKey string) string {
	if dedupKey != "" {
		return NotificationID(typ, recipient, map[string]any{"dedupKey": dedupKey})
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// submissionNamespace is the UUID namespace of submission ids (apns-id).
var submissionNamespace = [16]byte{0x6f, 0x6e, 0x63, 0x65, 0x70, 0x75, 0x73, 0x68, 0x8a, 0x1d, 0x4b, 0x5e, 0x9c, 0x1f, 0x2d, 0x3a}

// SubmissionID returns the UUID v5 (RFC 9562) of a (delivery, device) pair, in
// lowercase: the same on every resend, so APNs' apns-id (and provider logs) join
// oncepush's ledger without a lookup. The device is named by its transport and
// token key (the token; a Web Push subscription's endpoint), not by its
// registration id, so a token registered again keeps its identity.
func SubmissionID(deliveryID int64, transport Transport, tokenKey string) string {
	h := sha1.New()
	h.Write(submissionNamespace[:])
	h.Write([]byte(strconv.FormatInt(deliveryID, 10) + ":" + string(transport) + ":" + tokenKey))
	var u [16]byte
	copy(u[:], h.Sum(nil))
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
