package provider

// Transport names a push service.
type Transport string

// The transports oncepush ships providers for (provider/<name>). Their specs
// are oncepush.BuiltinTransports.
const (
	TransportFCM     Transport = "fcm"
	TransportAPNs    Transport = "apns"
	TransportWebPush Transport = "webpush"
	TransportRuStore Transport = "rustore"
)

// TransportSpec is what the engine knows of one transport: its name and the
// rules its device tokens and payloads follow. How to talk to it is its
// provider's business (provider/<name>); a client knows the transports of
// oncepush.Config.Transports.
type TransportSpec struct {
	// Name is the transport's name in devices, the ledger, logs, metrics and
	// the HTTP API: 1 to 32 lower-case letters and digits, starting with a
	// letter.
	Name Transport
	// NormalizeToken checks a device token's shape and returns its canonical
	// form, which is stored and handed to the provider, and its key, which is
	// unique among the transport's devices (a token registered again under
	// another spelling is the same device). It is called after the engine's
	// own checks: the token is not empty, is UTF-8 without NUL and at most
	// 4096 bytes. Its errors should be *ValidationError naming "token";
	// others are reported as such. Required.
	NormalizeToken func(token string) (canonical, key string, err error)
	// MaxPayload is the most bytes of title, body, data, link and image
	// together that the transport carries. A message goes to every transport,
	// so it must fit the smallest MaxPayload of the client's transports.
	// Required.
	MaxPayload int
	// ReservedDataKey reports data keys the transport refuses; a message whose
	// data uses one is refused for every transport. Optional.
	ReservedDataKey func(key string) bool
	// ExampleToken returns a token of the transport's shape (not one a
	// service issued), distinct for distinct n and accepted by
	// NormalizeToken: for tests, such as the conformance suite in
	// driver/drivertest, which registers devices with it. Optional.
	ExampleToken func(n int) Token
}
