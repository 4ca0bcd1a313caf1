package oncepush

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/oncepush/oncepush/driver"
)

// DeviceAddress names a device of a direct send (SendToDevices) by its token
// alone, without a recipient of the caller's.
type DeviceAddress struct {
	Transport Transport
	// Token is the provider's device token (for Web Push, the subscription
	// JSON), in any spelling its transport accepts.
	Token Token
}

// LogValue implements slog.LogValuer: the token is masked.
func (d DeviceAddress) LogValue() slog.Value {
	return slog.GroupValue(slog.String("transport", string(d.Transport)), slog.Any("token", d.Token))
}

// DeviceRecipient returns the implicit recipient a direct send to the token
// delivers under: "device:", the transport, ":", and the first 32 hex digits
// of the SHA-256 of the token's key (TransportSpec.NormalizeToken: for the
// built-in transports the token itself for fcm and rustore, the token in
// lower case for apns, the subscription's endpoint for webpush). Every
// spelling of one device gives the same id, and the id does not hold the
// token, which is a secret: recipient ids appear in logs and URLs.
//
// The derivation is a contract, stable across processes and releases: read
// a direct send's ledger under it (RecipientDeliveries, GET
// /v1/recipients/{recipient}/deliveries), or delete it (DeleteRecipient).
// The error is a *ValidationError naming "transport" or "token".
func (c *Client[TTx]) DeviceRecipient(transport Transport, token Token) (string, error) {
	_, key, err := c.transports.normalizeToken(transport, string(token))
	if err != nil {
		return "", err
	}
	return deviceRecipient(transport, key), nil
}

func deviceRecipient(t Transport, key string) string {
	sum := sha256.Sum256([]byte(key))
	return implicitPrefix + string(t) + ":" + hex.EncodeToString(sum[:16])
}

// implicitPrefix begins every implicit recipient, and no recipient a
// caller names: the ids under it are the engine's (D106).
const implicitPrefix = "device:"

// refuseImplicit refuses, naming field, a recipient a caller names to write
// under — a send's, a registration's, a campaign audience's — that is a
// direct send's implicit recipient. A send to one would reach the device by
// an id that appears in logs and URLs, without its token, which is the
// secret; a registration under one would add a token to every later direct
// send to the device; either would take the direct sends' dedup keys.
// Reads and deletions under such an id stay open: that is how a direct
// send's ledger is read and erased.
func refuseImplicit(field, recipient string) error {
	if !strings.HasPrefix(recipient, implicitPrefix) {
		return nil
	}
	return invalid(field, "%q: recipient ids starting %q are the implicit recipients of direct sends "+
		"(SendToDevices; over HTTP, a notification's devices): send to the device that way, or choose another id", recipient, implicitPrefix)
}

// refuseImplicitIn is refuseImplicit for a list, naming field[i].
func refuseImplicitIn(field string, recipients []string) error {
	for i, r := range recipients {
		if strings.HasPrefix(r, implicitPrefix) {
			return refuseImplicit(fmt.Sprintf("%s[%d]", field, i), r)
		}
	}
	return nil
}

// SendToDevices is Send for callers who hold device tokens and no recipients
// of their own (a move from gorush): each device is registered under its
// implicit recipient (DeviceRecipient) and msg is sent to those recipients
// in one transaction, with Send's guarantees — one delivery per device and
// dedup key, recorded requests (SendOptions.RequestHash over the implicit
// recipients), the workers woken after the commit. A device listed twice, in
// any spelling, gets one delivery and counts in Duplicates.
//
// Nothing is written when any device is refused: a *ValidationError names
// "devices[i].transport" or "devices[i].token", and a token registered to a
// recipient (RegisterDevice) is refused with a *TokenRegisteredError
// (ErrTokenRegistered) rather than moved, which would take it from its
// owner. A token registered to a recipient after a direct send moves to it
// as any token does; the direct send's delivery, if still pending, then ends
// no_devices.
func (c *Client[TTx]) SendToDevices(ctx context.Context, devices []DeviceAddress, msg Message, opts *SendOptions) (SendResult, error) {
	ds, p, err := c.prepareDirect(devices, &msg, opts)
	if err != nil {
		return SendResult{}, err
	}
	opts = p.recorded(opts)
	return c.sendGrouped(ctx, &groupMember{p: p, msg: &msg, devices: ds}, opts)
}

// SendToDevicesTx is SendToDevices inside the caller's transaction, as SendTx
// is Send: if it rolls back, neither the registrations nor the deliveries
// exist. A refusal (ErrTokenRegistered) leaves the transaction as it was.
func (c *Client[TTx]) SendToDevicesTx(ctx context.Context, tx TTx, devices []DeviceAddress, msg Message, opts *SendOptions) (SendResult, error) {
	ds, p, err := c.prepareDirect(devices, &msg, opts)
	if err != nil {
		return SendResult{}, err
	}
	opts = p.recorded(opts)
	ex := c.driver.UnwrapExecutor(tx)
	// Always in a savepoint: devices registered before a refused one must go.
	return c.writeInSavepoint(ctx, ex, p, opts, func() (SendResult, error) {
		return c.writeDirect(ctx, ex, ds, p, &msg, opts)
	})
}

// directDevice is a checked device of a direct send.
type directDevice struct {
	field     string // "devices[i]", as listed first
	transport Transport
	token     string // canonical
	key       string
	recipient string
}

// DeviceRecipients returns the implicit recipients of a direct send's
// devices (DeviceRecipient), in order, checking the devices as SendToDevices
// does: a *ValidationError names "devices[i].transport" or
// "devices[i].token". With them, RequestHash gives a direct send's identity.
func (c *Client[TTx]) DeviceRecipients(devices []DeviceAddress) ([]string, error) {
	ds, err := c.checkDevices(devices)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.recipient
	}
	return out, nil
}

// checkDevices checks each listed device and derives its implicit recipient.
func (c *clientCore) checkDevices(devices []DeviceAddress) ([]directDevice, error) {
	if len(devices) == 0 {
		return nil, invalid("devices", "must name at least one device")
	}
	if len(devices) > MaxRecipients {
		return nil, invalid("devices", "has %d entries, at most %d per send", len(devices), MaxRecipients)
	}
	ds := make([]directDevice, len(devices))
	for i, d := range devices {
		field := fmt.Sprintf("devices[%d]", i)
		token, key, err := c.transports.normalizeToken(d.Transport, string(d.Token))
		if err == nil {
			err = c.providerAccepts(d.Transport, token)
		}
		if err != nil {
			if ve := (*ValidationError)(nil); errors.As(err, &ve) {
				return nil, &ValidationError{Field: field + "." + ve.Field, Message: ve.Message}
			}
			return nil, err
		}
		ds[i] = directDevice{field: field, transport: d.Transport, token: token, key: key, recipient: deviceRecipient(d.Transport, key)}
	}
	return ds, nil
}

// prepareDirect checks a direct send completely before anything is written:
// the distinct devices, and the send to their implicit recipients.
func (c *clientCore) prepareDirect(devices []DeviceAddress, msg *Message, opts *SendOptions) ([]directDevice, *prepared, error) {
	listed, err := c.checkDevices(devices)
	if err != nil {
		return nil, nil, err
	}
	var ds []directDevice
	recipients := make([]string, len(listed))
	seen := make(map[string]bool, len(listed))
	for i, d := range listed {
		recipients[i] = d.recipient
		if !seen[d.recipient] {
			seen[d.recipient] = true
			ds = append(ds, d)
		}
	}
	// prepare counts the devices listed twice as duplicates, as it does
	// recipients listed twice.
	p, err := c.prepare(recipients, msg, opts)
	if err != nil {
		return nil, nil, err
	}
	return ds, p, nil
}

// writeDirect registers each device under its implicit recipient, keeping a
// token registered to another recipient with it, then writes the send. The
// devices are registered in (transport, token key) order, whatever the
// caller's: two sends to the same new tokens listed in opposite orders
// would otherwise each hold the registration the other waits for
// (docs/architecture.md, "Lock order").
func (c *clientCore) writeDirect(ctx context.Context, ex driver.Executor, ds []directDevice, p *prepared, msg *Message, opts *SendOptions) (SendResult, error) {
	// A retry of a recorded request answers as the first did, before any
	// registration: a token registered to a recipient since the first send
	// must not turn the retry into a refusal. (A first send racing this one
	// is still caught by the write's own record.)
	if opts != nil && opts.DedupKey != "" && opts.RequestHash != nil {
		if _, err := ex.IdempotencyGet(ctx, opts.DedupKey); err == nil {
			return SendResult{}, driver.ErrRequestRecorded
		} else if !errors.Is(err, driver.ErrNotFound) {
			return SendResult{}, fmt.Errorf("oncepush: read recorded request: %w", err)
		}
	}
	for _, d := range lockOrder(ds) {
		_, err := c.storeDevice(ctx, ex, &driver.DeviceRegisterParams{
			Recipient: d.recipient, Transport: string(d.transport), Token: d.token, TokenKey: d.key, KeepOtherOwner: true,
		})
		if errors.Is(err, ErrTokenRegistered) {
			return SendResult{}, &TokenRegisteredError{Field: d.field + ".token"}
		}
		if err != nil {
			return SendResult{}, err
		}
	}
	return c.write(ctx, ex, p, msg, opts)
}

// lockOrder returns the devices sorted by (transport, token key): the order
// in which a direct send registers them.
func lockOrder(ds []directDevice) []directDevice {
	return slices.SortedStableFunc(slices.Values(ds), compareDevices)
}

func compareDevices(a, b directDevice) int {
	return cmp.Or(strings.Compare(string(a.transport), string(b.transport)), strings.Compare(a.key, b.key))
}
