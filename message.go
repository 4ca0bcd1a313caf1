package oncepush

import (
	"bytes"
	"cmp"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oncepush/oncepush/internal/strictjson"
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
	// notification id so a client can keep a seen-set; so are the keys any of
	// the client's transports reserves (TransportSpec.ReservedDataKey: FCM's
	// from, gcm, message_type, google…, collapse_key…). Numbers travel as
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
	// ScheduledAt delays the first send; zero means now. A time in the past
	// is sent at once if its lifetime has not ended; one whose lifetime has
	// ended is refused (a *ValidationError naming scheduledAt), unless the
	// send has a DedupKey: a retry must answer as the send it repeats, so its
	// deliveries are written and expire, their last error saying why. A
	// time before EarliestTime, or whose lifetime ends after LatestTime, is
	// refused with or without a key: it could not be written back.
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
	// is refused, never silently dropped. The record lives exactly as long
	// as the key it guards: until no delivery holds DedupKey any more (each
	// is deleted Config.Retention after it finished, or with its recipient),
	// however long a delivery stays pending first. Requires DedupKey; at most
	// 64 bytes.
	RequestHash []byte
	// RecordRequest makes the send a recorded request whose identity is what
	// Client.RequestHash would return for it, computed by the send itself
	// from the send as it validates it, once: the server and `oncepush send`
	// use it, so a key used over HTTP and then from the command line with the
	// same notification is a replay. Requires DedupKey; not with RequestHash.
	RecordRequest bool
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
	// MaxDataBytes is the most bytes the encoded data may take (less when a
	// transport of Config.Transports carries less: its MaxPayload).
	MaxDataBytes = 4096
	// MaxPayloadBytes bounds title, body, data, link and image together with
	// the built-in transports, whose MaxPayload it is: a client's bound is the
	// smallest MaxPayload of its Config.Transports.
	MaxPayloadBytes = 4096
	// MaxLifetime is the longest lifetime (FCM's TTL limit).
	MaxLifetime = 28 * 24 * time.Hour
	// LatestTime is the latest a notification's expiry (ScheduledAt plus
	// its lifetime) or a campaign's may be, in RFC 3339: its last second.
	// A later time could be stored and never written back: RFC 3339 and
	// encoding/json have four digits for the year.
	LatestTime = "9999-12-31T23:59:59Z"
	// EarliestTime is the earliest a ScheduledAt may be, in RFC 3339,
	// for the same reason.
	EarliestTime = "0000-01-01T00:00:00Z"
	maxTypeLen   = 100
	maxKeyLen    = 200
)

// latestTime and earliestTime are LatestTime and EarliestTime.
var (
	latestTime   = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	earliestTime = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
)

// endsInTime refuses, naming field, a notification that from at for
// lifetime would expire after LatestTime: its times could not be written
// back. (Compared so that no addition can overflow.)
func endsInTime(field string, at time.Time, lifetime time.Duration) error {
	if at.After(latestTime.Add(-lifetime)) {
		return invalid(field, "%s with a lifetime of %s would expire after %s, the latest time RFC 3339 writes: give an earlier time",
			at.UTC().Format(time.RFC3339), lifetime, LatestTime)
	}
	return nil
}

// prepared is a validated send, ready to write.
type prepared struct {
	recipients []string // deduplicated, in order
	dupes      int      // recipients listed more than once
	data       []byte   // encoded data, or nil
	dataSize   int      // what data counts against the limits (see encodeData)
	image      string   // "" when an http image was dropped
	dropped    string   // the dropped http image, for the warning
	policy     AmbiguityPolicy
	lifetime   time.Duration
	hash       []byte // the request's identity, when it records itself (RecordRequest)
}

// prepareCaller is prepare for a send to recipients the caller names,
// which may not be the engine's implicit ones (refuseImplicit).
func (c *clientCore) prepareCaller(recipients []string, msg *Message, opts *SendOptions) (*prepared, error) {
	p, err := c.prepare(recipients, msg, opts)
	if err != nil {
		return nil, err
	}
	if err := refuseImplicitIn("recipients", recipients); err != nil {
		return nil, err
	}
	return p, nil
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
	if err := c.prepareContent(p, msg, opts); err != nil {
		return nil, err
	}
	if opts.RecordRequest {
		p.hash = requestHash(p, msg, opts)
	}
	return p, nil
}

// recorded is the options a prepared send writes with: opts, with the
// request's identity when the send records itself (RecordRequest).
func (p *prepared) recorded(opts *SendOptions) *SendOptions {
	if p.hash == nil {
		return opts
	}
	o := *opts
	o.RequestHash = p.hash
	return &o
}

// prepareContent validates a send's message and options into p: all of
// prepare but the recipients (a campaign's content is checked by it too).
func (c *clientCore) prepareContent(p *prepared, msg *Message, opts *SendOptions) error {
	if len(msg.Type) > maxTypeLen {
		return invalid("type", "must be at most %d bytes", maxTypeLen)
	}
	for _, f := range []struct{ name, text string }{
		{"type", msg.Type}, {"title", msg.Title}, {"body", msg.Body}, {"link", msg.Link}, {"image", msg.Image},
		{"dedupKey", opts.DedupKey}, {"category", opts.Category},
	} {
		if err := checkText(f.name, f.text); err != nil {
			return err
		}
	}
	if strings.TrimSpace(msg.Title) == "" && strings.TrimSpace(msg.Body) == "" {
		return invalid("title", "title and body are both empty; a notification needs at least one")
	}
	if msg.Data != nil {
		var err error
		if p.data, p.dataSize, err = encodeData(msg.Data, c.transports.reservedDataKey, min(MaxDataBytes, c.transports.maxPayload)); err != nil {
			return err
		}
	}
	if msg.Link != "" {
		u, err := url.Parse(msg.Link)
		if err != nil || !strings.HasPrefix(msg.Link, "/") || strings.HasPrefix(msg.Link, "//") || u.Scheme != "" || u.Host != "" {
			return invalid("link", "must be an absolute in-app path such as /orders/42")
		}
	}
	if msg.Image != "" {
		u, err := url.Parse(msg.Image)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalid("image", "must be an http or https URL")
		}
		if u.Scheme == "http" {
			p.dropped = msg.Image // providers show only https images
		} else {
			p.image = msg.Image
		}
	}
	if size, limit := len(msg.Title)+len(msg.Body)+p.dataSize+len(msg.Link)+len(p.image), c.transports.maxPayload; size > limit {
		return invalid(largestField(msg, p), "title, body, data, link and image take %d bytes together, at most %d allowed", size, limit)
	}

	if len(opts.DedupKey) > maxKeyLen {
		return invalid("dedupKey", "must be at most %d bytes", maxKeyLen)
	}
	if opts.RequestHash != nil && (opts.DedupKey == "" || len(opts.RequestHash) == 0 || len(opts.RequestHash) > 64) {
		return invalid("dedupKey", "a recorded request (RequestHash, 1 to 64 bytes) needs a dedup key")
	}
	if opts.RecordRequest && (opts.DedupKey == "" || opts.RequestHash != nil) {
		return invalid("dedupKey", "a recorded request (RecordRequest) needs a dedup key and no RequestHash of the caller's")
	}
	if len(opts.Category) > maxTypeLen {
		return invalid("category", "must be at most %d bytes", maxTypeLen)
	}
	var cat Category
	if c.cfg.Categories != nil && opts.Category != "" {
		var ok bool
		if cat, ok = c.cfg.Categories[opts.Category]; !ok {
			return invalid("category", "%q is not a declared category", opts.Category)
		}
	}
	switch {
	case opts.Lifetime < 0:
		return invalid("lifetime", "must not be negative")
	case opts.Lifetime > MaxLifetime:
		return invalid("lifetime", "is longer than %s", MaxLifetime)
	case opts.Lifetime == 0:
		p.lifetime = c.cfg.MessageLifetime
	default:
		p.lifetime = opts.Lifetime
	}
	// A time in the past is sent at once while its lifetime lasts; past
	// that, it could only ever expire, which a caller would not learn until
	// it read the ledger. A send with a dedup key is the exception: it may be
	// a retry of one already written, which must answer as that one did (a
	// replay, or duplicates); what it does write expires at its claim, saying
	// why. Without Config.Clock, "now" is this process's clock, not the
	// database's: they differ by the hosts' skew.
	// A time the API could not write back is refused whatever the key: no
	// earlier send can have written it.
	if at := opts.ScheduledAt; !at.IsZero() {
		if at.Before(earliestTime) {
			return invalid("scheduledAt", "%s is before %s, the earliest time RFC 3339 writes", at.UTC().Format(time.RFC3339), EarliestTime)
		}
		if err := endsInTime("scheduledAt", at, p.lifetime); err != nil {
			return err
		}
	}
	if at := opts.ScheduledAt; !at.IsZero() && opts.DedupKey == "" && !at.Add(p.lifetime).After(c.clockNow()) {
		return invalid("scheduledAt", "%s is so far in the past that its lifetime (%s) has ended: "+
			"give a later time, none (now), or a longer lifetime", at.UTC().Format(time.RFC3339), p.lifetime)
	}
	if opts.Ambiguity != "" && !opts.Ambiguity.valid() {
		return invalid("ambiguity", "%q is neither %q nor %q", opts.Ambiguity, AmbiguityResend, AmbiguityAtMostOnce)
	}
	p.policy = cmp.Or(opts.Ambiguity, cat.Ambiguity, c.cfg.Ambiguity)
	return nil
}

func largestField(msg *Message, p *prepared) string {
	field, size := "title", len(msg.Title)
	for _, f := range []struct {
		name string
		n    int
	}{{"body", len(msg.Body)}, {"data", p.dataSize}, {"link", len(msg.Link)}, {"image", len(p.image)}} {
		if f.n > size {
			field, size = f.name, f.n
		}
	}
	return field
}

// checkText refuses text that the databases would not store alike: bytes that
// are not UTF-8 (PostgreSQL refuses them, SQLite keeps them) and the NUL
// character (PostgreSQL's text and jsonb cannot hold it; SQLite can).
func checkText(field, s string) error {
	if !utf8.ValidString(s) {
		return invalid(field, "is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return invalid(field, "holds a NUL character (U+0000), which cannot be stored")
	}
	return nil
}

// encodeData encodes a message's data for storage, refusing what would not
// arrive as the caller wrote it: reserved keys, a size above limit, and at
// any depth, keys and strings that checkText refuses or a lone surrogate.
// The size counts each number at the longer of its literal and its plain
// notation, which PostgreSQL's jsonb stores and hands back (see
// plainNumberLen): 1e300 takes 5 bytes as written and 301 once stored, and
// would otherwise carry a 4 KB limit past 200 KB, or fail the write.
func encodeData(data map[string]any, reserved func(string) bool, limit int) (out []byte, size int, err error) {
	for k := range data {
		if reserved(k) {
			return nil, 0, invalid("data", "key %q is reserved", k)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(data); err != nil {
		return nil, 0, invalid("data", "cannot be encoded as JSON: %v", err)
	}
	out = bytes.TrimSpace(buf.Bytes())
	if len(out) > limit {
		return nil, 0, invalid("data", "is %d bytes encoded, at most %d allowed", len(out), limit)
	}
	// encoding/json replaces a Go string's invalid bytes with U+FFFD, so
	// those are looked for in the values; what the encoding holds (NUL
	// escapes, and the text of json.RawMessage and other marshalers) is
	// looked for in it.
	if path, ok := invalidUTF8(reflect.ValueOf(data), "data", 0); ok {
		return nil, 0, invalid("data", "%s is not valid UTF-8", path)
	}
	doc, err := strictjson.Parse(out)
	if err != nil {
		var se *strictjson.Error
		if errors.As(err, &se) && se.Path != "" {
			return nil, 0, invalid("data", "%s %s", strictjson.Under("data", se.Path), se.Reason)
		}
		return nil, 0, invalid("data", "is not valid JSON: %v", err)
	}
	if path := nulPath(doc, "data"); path != "" {
		return nil, 0, invalid("data", "%s holds a NUL character (U+0000), which cannot be stored", path)
	}
	size = len(out) + numbersGrowth(doc)
	if size > limit {
		return nil, 0, invalid("data", "is %d bytes with its numbers in plain notation, as they are stored (1e300 is 301 digits), at most %d allowed", size, limit)
	}
	return out, size, nil
}

// nulPath returns the path of the first string or name in v that holds a
// NUL character, or "".
func nulPath(v *strictjson.Value, path string) string {
	switch v.Kind {
	case strictjson.String:
		if strings.IndexByte(v.Text, 0) >= 0 {
			return path
		}
	case strictjson.Object:
		for _, m := range v.Members {
			if strings.IndexByte(m.Name, 0) >= 0 {
				return "a name in " + path
			}
			if p := nulPath(m.Value, strictjson.Join(path, m.Name)); p != "" {
				return p
			}
		}
	case strictjson.Array:
		for i, e := range v.Elems {
			if p := nulPath(e, strictjson.Index(path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// invalidUTF8 finds a string in v — a value or a map key, at any depth — that
// is not valid UTF-8, and returns its path. Values that marshal themselves
// are left to the check of the encoding. v has been encoded already, so it
// holds no cycle; depth bounds the walk anyway.
func invalidUTF8(v reflect.Value, path string, depth int) (string, bool) {
	if !v.IsValid() || depth > 1000 {
		return "", false
	}
	if (v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface) && v.IsNil() {
		return "", false
	}
	if t := v.Type(); t.Implements(marshalerType) || t.Implements(textMarshalerType) ||
		reflect.PointerTo(t).Implements(marshalerType) || reflect.PointerTo(t).Implements(textMarshalerType) {
		return "", false
	}
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return path, true
		}
	case reflect.Pointer, reflect.Interface:
		return invalidUTF8(v.Elem(), path, depth+1)
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			k := it.Key()
			name := fmt.Sprint(k.Interface())
			if k.Kind() == reflect.String && !utf8.ValidString(k.String()) {
				return "a name in " + path, true
			}
			if p, bad := invalidUTF8(it.Value(), strictjson.Join(path, name), depth+1); bad {
				return p, true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "", false // bytes travel as base64
		}
		for i := range v.Len() {
			if p, bad := invalidUTF8(v.Index(i), strictjson.Index(path, i), depth+1); bad {
				return p, true
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			if p, bad := invalidUTF8(v.Field(i), strictjson.Join(path, f.Name), depth+1); bad {
				return p, true
			}
		}
	}
	return "", false
}

// numbersGrowth is how many bytes v's numbers gain written in plain
// notation; it saturates rather than overflow.
func numbersGrowth(v *strictjson.Value) int {
	switch v.Kind {
	case strictjson.Number:
		return max(0, plainNumberLen(v.Text)-len(v.Text))
	case strictjson.Object:
		n := 0
		for _, m := range v.Members {
			n = min(n+numbersGrowth(m.Value), math.MaxInt32)
		}
		return n
	case strictjson.Array:
		n := 0
		for _, e := range v.Elems {
			n = min(n+numbersGrowth(e), math.MaxInt32)
		}
		return n
	}
	return 0
}

// plainNumberLen is the length of a JSON number literal written as
// PostgreSQL's numeric writes it — and so jsonb, which stores numbers as
// numeric: no exponent, the decimal point where the exponent puts it, as
// many decimals as the literal's own, less the exponent ("1.50e1" is
// "15.0", "1e-3" is "0.001"), and no sign on zero. An exponent PostgreSQL
// refuses outright (a magnitude of 2^30 - 1 or more, whatever the digits)
// counts as math.MaxInt32.
func plainNumberLen(n string) int {
	neg := strings.HasPrefix(n, "-")
	mantissa, exponent, _ := strings.Cut(strings.ToLower(strings.TrimPrefix(n, "-")), "e")
	exp := 0
	if exponent != "" {
		e, err := strconv.ParseInt(exponent, 10, 64)
		if err != nil || e >= 1<<30-1 || e <= -(1<<30-1) {
			return math.MaxInt32
		}
		exp = int(e)
	}
	whole, frac, _ := strings.Cut(mantissa, ".")
	digits := strings.TrimLeft(whole+frac, "0")
	// The decimal point lies after point digits of the significant ones.
	point := len(whole) + exp - (len(whole+frac) - len(digits))
	size := 1 // the integer part: "0" when there is none
	if digits != "" {
		size = max(point, 1)
	}
	if scale := len(frac) - exp; scale > 0 {
		size += 1 + scale
	}
	if neg && digits != "" {
		size++
	}
	return size
}
