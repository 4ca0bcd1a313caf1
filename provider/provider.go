// Package provider holds the words a push provider and the engine share: the
// Provider contract, the Submission it is handed and the Result it answers,
// transports and their specs, device tokens and how they are masked, and the
// Web Push subscription. It imports no part of the engine, so a provider
// package (provider/fcm, a third party's) depends on what it uses and not on
// the engine, the drivers or their test hooks. Package oncepush names every
// one of these by alias (oncepush.Provider is provider.Provider): code
// written against either name works with the other.
package provider

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Provider submits notifications to one push service. Implementations live in
// provider/<name>; pushtest.Provider is a programmable fake.
//
// Send is called with no database connection held, concurrently (up to
// oncepush.Config.ConcurrentSends per transport per client), under a context
// that carries the send timeout. It must classify every answer into a Result
// and never panic; a panic is recorded as a maybe-sent answer.
type Provider interface {
	// Transport is the transport whose devices this provider serves.
	Transport() Transport
	// Send submits one notification to one device.
	Send(ctx context.Context, s *Submission) Result
}

// TokenValidator is implemented by providers that check device tokens at
// registration beyond their shape (Web Push: the endpoint's host must be on the
// allow-list). A registration it refuses is refused as invalid input.
type TokenValidator interface {
	ValidateToken(token Token) error
}

// Clock tells the time. oncepush.Config.Clock is one: nil there means the
// database's own clock; tests inject pushtest.Clock and move it.
type Clock interface {
	Now() time.Time
}

// ClockUser is implemented by providers that tell time: TTLs and expiration
// headers, access-token and JWT lifetimes, Retry-After dates.
// oncepush.NewClient calls UseClock with Config.Clock, when it is set, before
// the client sends anything, so that a test moving the engine's clock moves
// the providers' too. A provider configured with a clock of its own keeps
// that one. UseClock must be safe to call while the provider is in use (by
// another client).
type ClockUser interface {
	UseClock(Clock)
}

// Submission is one notification for one device.
type Submission struct {
	// NotificationID is the delivery's notification id (32 hex characters);
	// it also travels in Data["oncepush_id"].
	NotificationID string
	// CollapseID is the provider-side collapse identity: APNs apns-collapse-id,
	// FCM android.collapse_key and apns-collapse-id, Web Push Topic. It is the
	// same on every resend of the notification. 32 base64url-safe characters.
	CollapseID string
	// SubmissionID is the UUID of this (delivery, device) pair, the same on every
	// resend: APNs apns-id.
	SubmissionID string
	// Resend is true when an earlier submission of this pair may have reached the
	// provider (an ambiguous attempt sent again under the resend policy).
	Resend bool

	DeliveryID int64
	// DeviceID is the id of the device's registration (oncepush.Device.ID),
	// for the provider's logs.
	DeviceID int64
	// Token is the device token to send to, in its transport's canonical form
	// (TransportSpec.NormalizeToken). It logs itself masked.
	Token Token

	Type     string
	Category string
	Title    string
	Body     string
	// Data is the message data as strings plus "oncepush_id". Shared by all the
	// devices of a delivery: providers must not modify it.
	Data  map[string]string
	Link  string
	Image string
	// ExpiresAt is when the notification stops being worth showing; providers
	// derive TTL / apns-expiration from it.
	ExpiresAt time.Time
}

// Outcome classifies a provider's answer.
type Outcome int

const (
	// OutcomeAccepted: the provider took the notification. The device is settled.
	OutcomeAccepted Outcome = iota + 1
	// OutcomeInvalidToken: the token is dead (unregistered, wrong project). The
	// registration, of this transport only, is deleted.
	OutcomeInvalidToken
	// OutcomeRetry: not sent, or the provider asked to try later (429, 5xx, a
	// connection refused before the request was written). Retried with backoff.
	OutcomeRetry
	// OutcomeRejected: the provider refused this message or our credentials
	// (malformed payload, bad key). Settled; the token is kept.
	OutcomeRejected
	// OutcomeMaybeSent: no answer after the request was written (timeout,
	// reset). What happens next is the message's ambiguity policy.
	OutcomeMaybeSent
)

func (o Outcome) String() string {
	switch o {
	case OutcomeAccepted:
		return "accepted"
	case OutcomeInvalidToken:
		return "invalid_token"
	case OutcomeRetry:
		return "retry"
	case OutcomeRejected:
		return "rejected"
	case OutcomeMaybeSent:
		return "maybe_sent"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is a provider's answer about one submission.
type Result struct {
	Outcome Outcome
	// ProviderID is the provider's id of the accepted message: FCM name, apns-id,
	// RuStore id, Web Push Location.
	ProviderID string
	// Text is the provider's own words, without the transport name, e.g.
	// "404 UNREGISTERED: Requested entity was not found." oncepush records it as
	// "fcm 404 UNREGISTERED: …" on the device and "fcm device 17: 404 …" on the
	// delivery.
	Text string
	// RetryAfter is the provider's requested wait (Retry-After); the retry waits
	// at least this long.
	RetryAfter time.Duration
	// Throttle says RetryAfter applies to the whole provider (a project quota),
	// not only this device: this client starts no send to the transport until
	// it has passed.
	Throttle bool
	// Unsent, with OutcomeRetry, says the request provably never left this
	// process — the dial failed, or CheckStart refused it, or the body was
	// never completely handed to the connection — so nothing can have reached
	// the provider. The ledger takes back the submission it counted. Leave it
	// false whenever the provider may have the request.
	Unsent bool
}

// Accepted is a convenience for providers.
func Accepted(providerID string) Result {
	return Result{Outcome: OutcomeAccepted, ProviderID: providerID}
}

// ErrLateStart is CheckStart's answer when a send may no longer start.
var ErrLateStart = errors.New("oncepush: too late to start this send: the run's budget is spent or its lease could have expired")

type startCheckKey struct{}

// CheckStart reports whether the send of ctx may still start. A provider
// calls it immediately before it writes a request (a stopped or starved
// process may have been frozen between the engine's own check and the write)
// and, when it gets an error, writes nothing and answers OutcomeRetry with
// Unsent set. It returns nil for a context the engine did not make.
func CheckStart(ctx context.Context) error {
	if check, ok := ctx.Value(startCheckKey{}).(func() error); ok {
		return check()
	}
	return nil
}

// WithStartCheck returns a context whose CheckStart calls check. The engine
// gives every send such a context; it is exported for provider tests and for
// code that calls a Provider itself.
func WithStartCheck(ctx context.Context, check func() error) context.Context {
	return context.WithValue(ctx, startCheckKey{}, check)
}
