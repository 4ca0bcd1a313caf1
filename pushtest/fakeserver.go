package pushtest

import (
	"testing"

	"github.com/oncepush/oncepush/internal/fakepush"
)

// FakeServer is one local HTTPS server (HTTP/2, with a certificate of its own)
// that speaks the push providers' wire protocols, so that the real provider
// clients of oncepush (provider/fcm, provider/apns, provider/webpush,
// provider/rustore, provider/hms) can be tested end to end with no
// credentials and no network:
//
//   - FCM HTTP v1 send, under /fcm (and Google's OAuth token endpoint under
//     /oauth2/token, verifying the RS256 assertion against a key it generated);
//   - APNs under /3/device/{token}, verifying the ES256 provider JWT;
//   - Web Push endpoints under /webpush/{id}, decrypting the aes128gcm payload
//     with the subscription's private key and checking the VAPID header;
//   - RuStore under /rustore;
//   - Huawei Push Kit (v3) under /hms, verifying the PS256 service-account
//     JWT.
//
// It records every request (transport, token, collapse id, notification id,
// payload) the moment it has read it whole, and then what became of it
// (FakeFate): answered, dropped, or abandoned by a client that went away
// while the answer was held. It answers what the test programs (Program, Mix):
// a status and body per token or for the whole transport, Retry-After,
// latency, or accepting the request and dropping the connection. Helpers hand
// out matching credential files (FCMServiceAccount, APNsKey,
// NewWebPushSubscription, RuStoreToken, HMSServiceAccount).
//
// The server is the one `oncepush fake-providers` runs; its methods are
// documented where it is defined, in oncepush's internal/fakepush (Server).
type FakeServer = fakepush.Server

// FakeFate is what became of a request the fake received.
type FakeFate = fakepush.Fate

// The fates of a request. Every request is recorded as FateHeld the moment
// its body has been read whole, and settles into one of the others.
const (
	// FateHeld: received, its answer not written yet (programmed latency).
	FateHeld = fakepush.FateHeld
	// FateAnswered: answered with Status.
	FateAnswered = fakepush.FateAnswered
	// FateDropped: read whole, then the stream was reset without an answer
	// (FakeAnswer.Drop): a provider that accepted it and whose answer was lost.
	FateDropped = fakepush.FateDropped
	// FateAbandoned: the client went away (its context ended, its connection
	// closed) while the fake held the answer. The fake had the whole request.
	FateAbandoned = fakepush.FateAbandoned
)

// FakeRequest is one request the fake server received: its Seq, Transport,
// Token, CollapseID, NotificationID, APNsID, Payload, Header, Status, Fate,
// ReceivedAt, At and RemoteAddr.
type FakeRequest = fakepush.Request

// FakeStats counts the requests received since the last Reset.
type FakeStats = fakepush.Stats

// FakeAnswer is a programmed answer: Status (0: the protocol's success),
// Body, Header, Latency, or Drop.
type FakeAnswer = fakepush.Answer

// FakeChoice is one answer of a mix (FakeServer.Mix), drawn with probability
// Weight / (the sum of the mix's weights).
type FakeChoice = fakepush.Choice

// FakeOptions configure StartFakeServer and NewFakeServerWith: the address
// to listen on (Addr) and the fake's clock (Clock; give it the client's,
// oncepush.Config.Clock, so that tokens expire as the test moves it).
type FakeOptions = fakepush.Options

// NewFakeServer starts a fake server on the wall clock for the test and
// closes it when the test ends.
func NewFakeServer(t testing.TB) *FakeServer {
	t.Helper()
	return NewFakeServerWith(t, nil)
}

// NewFakeServerWith is NewFakeServer with options: say, the test's Clock.
func NewFakeServerWith(t testing.TB, opts *FakeOptions) *FakeServer {
	t.Helper()
	return fakepush.StartForTest(t, opts)
}

// StartFakeServer starts a fake server; Close stops it.
func StartFakeServer(opts *FakeOptions) (*FakeServer, error) { return fakepush.Start(opts) }

// ControlPrefix is where a FakeServer serves its control endpoints: HTTP
// access to what Program, Mix, SetLatency, Requests, ReceivedAfter, Held,
// Stats, Reset and NewWebPushSubscription do in Go, for tests that run the
// fake in another process (`oncepush fake-providers`) or are written in
// another language. Bodies are JSON; the shapes are the Control… types of
// this package.
//
//	GET  /_fake/requests[?transport=T]  → 200 [ControlRequest, …] answered or dropped, in arrival order
//	GET  /_fake/received[?after=SEQ&limit=N&fate=held]
//	                                    → 200 [ControlReceipt, …] every request received, in arrival order
//	GET  /_fake/stats                   → 200 FakeStats
//	POST /_fake/program                 ControlProgram → 204
//	POST /_fake/mix                     ControlMix → 204
//	POST /_fake/latency                 ControlLatency → 204
//	POST /_fake/reset                   → 204 (forgets requests, programs, mixes and latencies)
//	POST /_fake/webpush/subscriptions   → 201 ControlSubscription
//
// A malformed request is answered 400 {"error": "…"} naming the field. The
// endpoints have no authentication: they are test tooling, and the fake is
// meant to listen on a loopback address only. They are served over the fake's
// own TLS certificate, like the providers (trust CertificatePEM).
const ControlPrefix = fakepush.ControlPrefix

// The control endpoints' bodies (see ControlPrefix).
type (
	// ControlRequest is a FakeRequest as GET /_fake/requests returns it.
	ControlRequest = fakepush.ControlRequest
	// ControlReceipt is a FakeRequest as GET /_fake/received returns it,
	// without payload and headers.
	ControlReceipt = fakepush.ControlReceipt
	// ControlMix is the body of POST /_fake/mix.
	ControlMix = fakepush.ControlMix
	// ControlChoice is a FakeChoice in JSON.
	ControlChoice = fakepush.ControlChoice
	// ControlProgram is the body of POST /_fake/program.
	ControlProgram = fakepush.ControlProgram
	// ControlAnswer is a FakeAnswer in JSON.
	ControlAnswer = fakepush.ControlAnswer
	// ControlLatency is the body of POST /_fake/latency.
	ControlLatency = fakepush.ControlLatency
	// ControlSubscription is the answer of POST /_fake/webpush/subscriptions.
	ControlSubscription = fakepush.ControlSubscription
	// ControlHeaderValues are one header's values: in JSON a string or an
	// array of strings.
	ControlHeaderValues = fakepush.ControlHeaderValues
)

// ControlAnswerOf returns a in the JSON form POST /_fake/program takes, so a
// Go test can program a fake in another process with this package's answer
// helpers (FCMError, FCMDeviceRateExceeded, FCMProjectQuotaExceeded, APNsError,
// WebPushError, RuStoreError, HMSError).
func ControlAnswerOf(a FakeAnswer) ControlAnswer { return fakepush.ControlAnswerOf(a) }

// FCMError is an FCM HTTP v1 error answer: status is the HTTP status,
// statusName the Google status ("NOT_FOUND"), message its text, and errorCode
// the FcmError detail's errorCode ("UNREGISTERED"); "" sends no FcmError
// detail. For example:
//
//	pushtest.FCMError(404, "NOT_FOUND", "Requested entity was not found.", "UNREGISTERED")
func FCMError(status int, statusName, message, errorCode string) FakeAnswer {
	return fakepush.FCMError(status, statusName, message, errorCode)
}

// FCMDeviceRateExceeded is FCM's answer to messages sent too fast to one
// device (or topic): 429 RESOURCE_EXHAUSTED with an FcmError detail, errorCode
// QUOTA_EXCEEDED. Only sends to that target must slow down. Add a Retry-After
// header to the answer's Header to send one.
func FCMDeviceRateExceeded() FakeAnswer { return fakepush.FCMDeviceRateExceeded() }

// FCMProjectQuotaExceeded is FCM's answer once the project's send quota for
// the minute is spent: 429 RESOURCE_EXHAUSTED with a google.rpc.ErrorInfo
// detail (reason RATE_LIMIT_EXCEEDED, quota_limit SendsPerMinutePerProject,
// quota_unit 1/min/{project}) and a google.rpc.Help link, as Google's API
// front end answers it. Every send of the project meets it until the minute
// ends. Add a Retry-After header to the answer's Header to send one.
func FCMProjectQuotaExceeded() FakeAnswer { return fakepush.FCMProjectQuotaExceeded() }

// FCMInvalidTokenArgument is FCM's answer to a registration token that is not
// one: 400 INVALID_ARGUMENT with a BadRequest detail naming message.token.
func FCMInvalidTokenArgument() FakeAnswer { return fakepush.FCMInvalidTokenArgument() }

// APNsError is an APNs error answer for Program: the status and
// {"reason": reason}, with a "timestamp" on 410 as APNs sends it.
func APNsError(status int, reason string) FakeAnswer { return fakepush.APNsError(status, reason) }

// WebPushError returns a push service's error answer for a status, with a
// JSON body in the style of Mozilla's autopush ({"code", "errno", "error",
// "message"}). Add a Retry-After header to the answer's Header for 429/503.
func WebPushError(status int) FakeAnswer { return fakepush.WebPushError(status) }

// RuStoreError is a RuStore error answer {"error": {"code", "message",
// "status"}}, for example:
//
//	pushtest.RuStoreError(404, "NOT_FOUND", "Requested entity was not found.")
func RuStoreError(status int, statusName, message string) FakeAnswer {
	return fakepush.RuStoreError(status, statusName, message)
}

// HMSError is a Huawei Push Kit answer {"code", "msg", "requestId"}: status
// is the HTTP status, code Push Kit's result code, for example:
//
//	pushtest.HMSError(400, "80300007", "All the tokens are invalid.")
//
// Add a Retry-After header to the answer's Header to send one.
func HMSError(status int, code, msg string) FakeAnswer { return fakepush.HMSError(status, code, msg) }
