package oncepush

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Device is a registration of a device token to a recipient.
type Device struct {
	// ID identifies the registration. A token that moves to another recipient
	// gets a new ID.
	ID int64
	// Recipient is the caller's id for the person or account owning the device.
	Recipient string
	// Transport is the push service the token belongs to.
	Transport Transport
	// Token is the provider's device token; for Web Push, the subscription as JSON:
	// {"endpoint": "https://…", "keys": {"p256dh": "…", "auth": "…"}}.
	Token Token
	// Platform is free-form: "ios", "android", "web", … (≤ 32 bytes).
	Platform string
	// Session optionally binds the device to a login session; revoking the
	// session stops the device's pushes at once.
	Session string
	// Locale is a BCP 47 tag ("de-CH"), optional.
	Locale string
	// TimeZone is an IANA zone ("Europe/Zurich"), optional.
	TimeZone string
	// Tags are the app's segments for the device ("beta", "plan:pro"), which
	// a campaign's DeviceFilter selects on: at most 32, each 1 to 64 bytes of
	// letters, digits and "_.:-". Each registration replaces them (none
	// given: none kept); they are stored sorted and distinct.
	Tags []string
	// CreatedAt is when this registration was first made.
	CreatedAt time.Time
	// RegisteredAt is when it was last registered (renewed).
	RegisteredAt time.Time
}

// LogValue implements slog.LogValuer: the token is masked.
func (d Device) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int64("id", d.ID),
		slog.String("recipient", d.Recipient),
		slog.String("transport", string(d.Transport)),
		slog.Any("token", d.Token),
	)
}

// Limits on registration fields.
const (
	maxRecipientLen = 200
	maxTokenLen     = 4096
	maxSmallField   = 200
)

// ValidateRecipient reports whether r is a recipient id oncepush accepts: 1
// to 200 bytes of UTF-8 without a NUL character. The error is a
// *ValidationError naming "recipient". Send, RegisterDevice and the other
// calls that take a recipient check it themselves; a caller that takes
// recipient ids from outside (the server's paths) checks them the same way.
func ValidateRecipient(r string) error { return validateRecipient("recipient", r) }

func validateRecipient(field, r string) error {
	switch {
	case r == "":
		return invalid(field, "must not be empty")
	case len(r) > maxRecipientLen:
		return invalid(field, "is %d bytes, at most %d allowed", len(r), maxRecipientLen)
	}
	return checkText(field, r)
}

// validateSession checks a session id given to revoke.
func validateSession(s string) error {
	if s == "" || len(s) > maxSmallField {
		return invalid("session", "must be 1 to %d bytes", maxSmallField)
	}
	return checkText("session", s)
}

// normalizeDevice checks a registration and returns the token in its canonical
// form and the key that makes it unique within its transport (t's rules).
func (t *transportTable) normalizeDevice(d *Device) (token, tokenKey string, err error) {
	if err := validateRecipient("recipient", d.Recipient); err != nil {
		return "", "", err
	}
	if err := refuseImplicit("recipient", d.Recipient); err != nil {
		return "", "", err
	}
	token, tokenKey, err = t.normalizeToken(d.Transport, string(d.Token))
	if err != nil {
		return "", "", err
	}
	for _, f := range []struct{ name, text string }{
		{"platform", d.Platform}, {"session", d.Session}, {"locale", d.Locale}, {"timeZone", d.TimeZone},
	} {
		if err := checkText(f.name, f.text); err != nil {
			return "", "", err
		}
	}
	if len(d.Platform) > 32 {
		return "", "", invalid("platform", "is longer than 32 bytes")
	}
	if len(d.Session) > maxSmallField {
		return "", "", invalid("session", "must be at most %d bytes", maxSmallField)
	}
	if len(d.Locale) > 35 || strings.ContainsAny(d.Locale, " \t\n/") {
		return "", "", invalid("locale", "%q is not a BCP 47 language tag", d.Locale)
	}
	if d.TimeZone != "" {
		if _, err := time.LoadLocation(d.TimeZone); err != nil || d.TimeZone == "Local" {
			return "", "", invalid("timeZone", "%q is not an IANA time zone", d.TimeZone)
		}
	}
	tags, err := normalizeTags("tags", d.Tags)
	if err != nil {
		return "", "", err
	}
	d.Tags = tags
	return token, tokenKey, nil
}

// Tag limits (Device.Tags, DeviceFilter.Tags).
const (
	MaxTags   = 32
	maxTagLen = 64
)

// normalizeTags checks tags and returns them sorted and distinct; field
// names the list in errors ("tags", "filter.tags").
func normalizeTags(field string, tags []string) ([]string, error) {
	if len(tags) > MaxTags {
		return nil, invalid(field, "has %d entries, at most %d", len(tags), MaxTags)
	}
	for i, t := range tags {
		if !validTag(t) {
			return nil, invalid(fmt.Sprintf("%s[%d]", field, i), "%q is not a tag: 1 to %d bytes of letters, digits and _.:-", t, maxTagLen)
		}
	}
	if len(tags) == 0 {
		return nil, nil
	}
	out := slices.Clone(tags)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func validTag(t string) bool {
	if t == "" || len(t) > maxTagLen {
		return false
	}
	for _, r := range t {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.', r == ':', r == '-':
		default:
			return false
		}
	}
	return true
}
