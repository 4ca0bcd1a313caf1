package oncepush

import (
	"context"

	"github.com/oncepush/oncepush/provider"
)

// The words a provider speaks are defined in package provider, which imports
// no part of the engine, so that a provider package depends on them alone
// (D130). This package names each by alias: oncepush.Provider and
// provider.Provider are one type.

// Provider submits notifications to one push service; see provider.Provider.
// Implementations live in provider/<name>; pushtest.Provider is a
// programmable fake.
type Provider = provider.Provider

// TokenValidator is implemented by providers that check device tokens at
// registration beyond their shape; see provider.TokenValidator.
type TokenValidator = provider.TokenValidator

// ClockUser is implemented by providers that tell time: NewClient hands them
// Config.Clock; see provider.ClockUser.
type ClockUser = provider.ClockUser

// Clock tells oncepush the time. Nil in Config means the database's own clock;
// tests inject pushtest.Clock and move it. See provider.Clock.
type Clock = provider.Clock

// Submission is one notification for one device, as a Provider is handed
// it; see provider.Submission.
type Submission = provider.Submission

// Outcome classifies a provider's answer; see provider.Outcome.
type Outcome = provider.Outcome

// The outcomes of a provider's answer; see provider.OutcomeAccepted and the
// rest.
const (
	OutcomeAccepted     = provider.OutcomeAccepted
	OutcomeInvalidToken = provider.OutcomeInvalidToken
	OutcomeRetry        = provider.OutcomeRetry
	OutcomeRejected     = provider.OutcomeRejected
	OutcomeMaybeSent    = provider.OutcomeMaybeSent
)

// Result is a provider's answer about one submission; see provider.Result.
type Result = provider.Result

// Accepted is a convenience for providers; see provider.Accepted.
func Accepted(providerID string) Result { return provider.Accepted(providerID) }

// ErrLateStart is CheckStart's answer when a send may no longer start; it is
// provider.ErrLateStart.
var ErrLateStart = provider.ErrLateStart

// CheckStart reports whether the send of ctx may still start; see
// provider.CheckStart.
func CheckStart(ctx context.Context) error { return provider.CheckStart(ctx) }

// WithStartCheck returns a context whose CheckStart calls check; see
// provider.WithStartCheck. The engine gives every send such a context.
func WithStartCheck(ctx context.Context, check func() error) context.Context {
	return provider.WithStartCheck(ctx, check)
}

// Token is a device token (for Web Push: the subscription JSON), which logs
// itself masked; see provider.Token.
type Token = provider.Token

// MaskToken shortens a token to something a human can match against a device
// without being able to use it; see provider.MaskToken.
func MaskToken(token string) string { return provider.MaskToken(token) }

// ValidationError reports input that oncepush refuses before writing anything;
// see provider.ValidationError.
type ValidationError = provider.ValidationError

// WebPushSubscription is a browser's PushSubscription, as the token of a Web
// Push device; see provider.WebPushSubscription.
type WebPushSubscription = provider.WebPushSubscription

// ParseWebPushSubscription decodes a Web Push device token; see
// provider.ParseWebPushSubscription.
func ParseWebPushSubscription(token string) (*WebPushSubscription, error) {
	return provider.ParseWebPushSubscription(token)
}
