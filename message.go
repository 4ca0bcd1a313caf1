package oncepush

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Message is the content of a notification, stored once however many recipients
// it has.
type Message struct {
	// Type names the kind of notification ("invoice.paid"). Optional; it enters
	// the notification id and is passed to eligibility.
	Type string
	// Title and Body are shown to the user; at least one must be set.
	Title string
	Body  string
	// Data travels with the push (as string values: strings as they are, other
	// values JSON-encoded). At most 4096 bytes encoded, the smallest provider's
	// payload limit. The key "oncepush_id" is reserved: it carries the
	// notification id so a client can keep a seen-set. Numbers travel as
	// encoding/json writes them: give json.Number (or json.RawMessage) to keep
	// digits a float64 cannot hold, such as 9007199254740993.
	Data map[string]any
	// Link is the in-app path a tap opens ("/invoices/inv_2201"); it must be an
	// absolute path.
	Link string
	// Image is an https URL shown with the notification. An http URL is dropped
	// (and logged as a warning) rather than failing the send.
	Image string
}

// AmbiguityPolicy says what to do with a device attempt that may or may not have
// reached its provider (the answer was lost, or the run died after sending).
type AmbiguityPolicy string

const (
	// AmbiguityResend sends again with the same collapse id and apns-id, so the
	// device replaces the first banner instead of stacking a second. The default.
	AmbiguityResend AmbiguityPolicy = "resend"
	// AmbiguityAtMostOnce never sends again: the attempt ends ambiguous. No
	// (notification, device) pair is ever submitted twice.
	AmbiguityAtMostOnce AmbiguityPolicy = "at-most-once"
)

func (p AmbiguityPolicy) valid() bool {
	return p == AmbiguityResend || p == AmbiguityAtMostOnce
}

// SendOptions are the optional parts of a send.
type SendOptions struct {
	// DedupKey makes the send idempotent per recipient: while a delivery with this
	// key is pending, or finished within Config.Retention, sending it again to the
	// same recipient queues nothing. Without a key every call sends.
	DedupKey string
	// Category is the caller's classification ("news", "bookings"); eligibility
	// sees it, and Config.Categories may give it its own ambiguity policy. When
	// Config.Categories is set, an unknown category is refused.
	Category string
	// ScheduledAt delays the first send; zero means now.
	ScheduledAt time.Time
	// Lifetime bounds how long after ScheduledAt the notification may still be
	// sent; after it, the delivery ends expired. Zero means Config.MessageLifetime
	// (1 day). At most 28 days.
	Lifetime time.Duration
	// Ambiguity overrides the category's and the client's policy.
	Ambiguity AmbiguityPolicy
	// RequestHash identifies the request that carries DedupKey (say, the
	// SHA-256 of its body) and makes the send a recorded request: the first
	// send with the key records its result in the same atomic write, and a
	// later send with the same key writes nothing and returns that result
	// (SendResult.Replayed) when RequestHash matches, or fails with
	// ErrDedupConflict when it does not — the same key for a different request
	// is refused, never silently dropped. The record lives as long as
	// deliveries (Config.Retention). Requires DedupKey; at most 64 bytes.
	RequestHash []byte
	// DeferWake writes no wake-up into SendTx's transaction. PostgreSQL commits
	// transactions that NOTIFY one at a time, so at high send rates the
	// in-transaction wake-up makes commits queue; with DeferWake, call
	// Client.Wake after the transaction commits (or the workers find the
	// deliveries at their next poll). Send always wakes after its commit.
	DeferWake bool
}

// SendResult says what a send queued.
type SendResult struct {
	// MessageID identifies the stored message; zero when nothing was queued.
	MessageID int64
	// Queued is the number of deliveries created (one per new recipient).
	Queued int
	// Duplicates is the number of recipients skipped: their dedup key was already
	// used, or they were listed twice.
	Duplicates int
	// Replayed is true when the send was a recorded request already made
	// (SendOptions.RequestHash): nothing was written, and the other fields are
	// the first send's.
	Replayed bool
}

// Send limits.
const (
	// MaxRecipients is the most recipients one send takes; use a campaign beyond.
	MaxRecipients = 10000
	// MaxDataBytes is the most bytes the encoded data may take.
	MaxDataBytes = 4096
	// MaxPayloadBytes bounds title, body, data, link and image together, so that
	// every provider's limit (4096 bytes for FCM, APNs and Web Push) can hold them.
	MaxPayloadBytes = 4096
	// MaxLifetime is the longest lifetime (FCM's TTL limit).
	MaxLifetime = 28 * 24 * time.Hour
	maxTypeLen  = 100
	maxKeyLen   = 200
)

// reservedDataKeys are refused in Data: oncepush's own key, and FCM's reserved words.
func reservedDataKey(k string) bool {
	return k == "oncepush_id" || k == "from" || k == "gcm" || k == "message_type" ||
		strings.HasPrefix(k, "google") || strings.HasPrefix(k, "collapse_key")
}

// prepared is a validated send, ready to write.
type prepared struct {
	recipients []string // deduplicated, in order
	dupes      int      // recipients listed more than once
	data       []byte   // encoded data, or nil
	image      string   // "" when an http image was dropped
	dropped    string   // the dropped http image, for the warning
	policy     AmbiguityPolicy
	lifetime   time.Duration
}

// prepare validates a send completely before anything is written.
func (c *clientCore) prepare(recipients []string, msg *Message, opts *SendOptions) (*prepared, error) {
	if opts == nil {
		opts = &SendOptions{}
	}
	p := &prepared{}
	if len(recipients) == 0 {
		return nil, invalid("recipients", "must name at least one recipient")
	}
	if len(recipients) > MaxRecipients {
		return nil, invalid("recipients", "has %d entries, at most %d per send (use a campaign)", len(recipients), MaxRecipients)
	}
	seen := make(map[string]struct{}, len(recipients))
	for i, r := range recipients {
		if err := validateRecipient(fmt.Sprintf("recipients[%d]", i), r); err != nil {
			return nil, err
		}
		if _, dup := seen[r]; dup {
			p.dupes++
			continue
		}
		seen[r] = struct{}{}
		p.recipients = append(p.recipients, r)
	}

	if len(msg.Type) > maxTypeLen || !utf8.ValidString(msg.Type) {
		return nil, invalid("type", "must be valid UTF-8 of at most %d bytes", maxTypeLen)
	}
	if strings.TrimSpace(msg.Title) == "" && strings.TrimSpace(msg.Body) == "" {
		return nil, invalid("title", "title and body are both empty; a notification needs at least one")
	}
	if !utf8.ValidString(msg.Title) {
		return nil, invalid("title", "is not valid UTF-8")
	}
	if !utf8.ValidString(msg.Body) {
		return nil, invalid("body", "is not valid UTF-8")
	}
	if msg.Data != nil {
		for k := range msg.Data {
			if reservedDataKey(k) {
				return nil, invalid("data", "key %q is reserved", k)
			}
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(msg.Data); err != nil {
			return nil, invalid("data", "cannot be encoded as JSON: %v", err)
		}
		p.data = bytes.TrimSpace(buf.Bytes())
		if len(p.data) > MaxDataBytes {
			return nil, invalid("data", "is %d bytes encoded, at most %d allowed", len(p.data), MaxDataBytes)
		}
	}
	if msg.Link != "" {
		u, err := url.Parse(msg.Link)
		if err != nil || !strings.HasPrefix(msg.Link, "/") || strings.HasPrefix(msg.Link, "//") || u.Scheme != "" || u.Host != "" {
			return nil, invalid("link", "must be an absolute in-app path such as /orders/42")
		}
	}
	if msg.Image != "" {
		u, err := url.Parse(msg.Image)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, invalid("image", "must be an http or https URL")
		}
		if u.Scheme == "http" {
			p.dropped = msg.Image // providers show only https images
		} else {
			p.image = msg.Image
		}
	}
	if size := len(msg.Title) + len(msg.Body) + len(p.data) + len(msg.Link) + len(p.image); size > MaxPayloadBytes {
		return nil, invalid(largestField(msg, p), "title, body, data, link and image take %d bytes together, at most %d allowed", size, MaxPayloadBytes)
	}

	if len(opts.DedupKey) > maxKeyLen || !utf8.ValidString(opts.DedupKey) {
		return nil, invalid("dedupKey", "must be valid UTF-8 of at most %d bytes", maxKeyLen)
	}
	if opts.RequestHash != nil && (opts.DedupKey == "" || len(opts.RequestHash) == 0 || len(opts.RequestHash) > 64) {
		return nil, invalid("dedupKey", "a recorded request (RequestHash, 1 to 64 bytes) needs a dedup key")
	}
	if len(opts.Category) > maxTypeLen || !utf8.ValidString(opts.Category) {
		return nil, invalid("category", "must be valid UTF-8 of at most %d bytes", maxTypeLen)
	}
	var cat Category
	if c.cfg.Categories != nil && opts.Category != "" {
		var ok bool
		if cat, ok = c.cfg.Categories[opts.Category]; !ok {
			return nil, invalid("category", "%q is not a declared category", opts.Category)
		}
	}
	switch {
	case opts.Lifetime < 0:
		return nil, invalid("lifetime", "must not be negative")
	case opts.Lifetime > MaxLifetime:
		return nil, invalid("lifetime", "is longer than %s", MaxLifetime)
	case opts.Lifetime == 0:
		p.lifetime = c.cfg.MessageLifetime
	default:
		p.lifetime = opts.Lifetime
	}
	if opts.Ambiguity != "" && !opts.Ambiguity.valid() {
		return nil, invalid("ambiguity", "%q is neither %q nor %q", opts.Ambiguity, AmbiguityResend, AmbiguityAtMostOnce)
	}
	p.policy = cmp.Or(opts.Ambiguity, cat.Ambiguity, c.cfg.Ambiguity)
	return p, nil
}

func largestField(msg *Message, p *prepared) string {
	field, size := "title", len(msg.Title)
	for _, f := range []struct {
		name string
		n    int
	}{{"body", len(msg.Body)}, {"data", len(p.data)}, {"link", len(msg.Link)}, {"image", len(p.image)}} {
		if f.n > size {
			field, size = f.name, f.n
		}
	}
	return field
}
