package oncepush

import (
	"crypto/sha256"
	"encoding/json"
	"slices"
	"time"
)

// RequestHash is the identity of a send, for SendOptions.RequestHash: the
// SHA-256 of what it would write, with the defaults in force applied (the
// ambiguity policy of the send, else its category's, else the client's; the
// lifetime, else Config.MessageLifetime). Two sends that would write the same
// notification to the same recipients are one request however they were
// spelled: a field left out and the same field at its default, empty data
// and none, the recipients in another order or one listed twice. DedupKey is
// not part of it (it names the request); the rest of opts and all of msg are.
// It validates the send as Send does and returns the same errors.
//
// The server and `oncepush send` both use it, so a dedup key used over HTTP
// and then from the command line with the same notification is a replay.
func (c *Client[TTx]) RequestHash(recipients []string, msg Message, opts SendOptions) ([]byte, error) {
	p, err := c.prepare(recipients, &msg, &opts)
	if err != nil {
		return nil, err
	}
	return requestHash(p, &msg, &opts), nil
}

// requestIdentity is what RequestHash hashes: the prepared send, defaults
// applied, in a fixed order.
type requestIdentity struct {
	Recipients  []string        `json:"recipients"`
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Body        string          `json:"body"`
	Data        json.RawMessage `json:"data"`
	Link        string          `json:"link"`
	Image       string          `json:"image"`
	Category    string          `json:"category"`
	Ambiguity   AmbiguityPolicy `json:"ambiguity"`
	ScheduledAt string          `json:"scheduledAt"`
	Lifetime    time.Duration   `json:"lifetime"`
}

func requestHash(p *prepared, msg *Message, opts *SendOptions) []byte {
	id := requestIdentity{
		Recipients: slices.Sorted(slices.Values(p.recipients)),
		Type:       msg.Type, Title: msg.Title, Body: msg.Body, Data: json.RawMessage("{}"),
		Link: msg.Link, Image: msg.Image, Category: opts.Category,
		Ambiguity: p.policy, Lifetime: p.lifetime,
	}
	if len(p.data) > 0 {
		id.Data = p.data // as stored: keys sorted, numbers as written
	}
	if !opts.ScheduledAt.IsZero() {
		id.ScheduledAt = opts.ScheduledAt.UTC().Format(time.RFC3339Nano)
	}
	b, err := json.Marshal(id)
	if err != nil {
		panic("oncepush: encode a request's identity: " + err.Error()) // every field encodes
	}
	sum := sha256.Sum256(append([]byte("oncepush request v1\n"), b...))
	return sum[:]
}
