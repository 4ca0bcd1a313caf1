package driver

import (
	"context"
	"encoding/json"
	"time"
)

// DeviceExecutor keeps the device registry: registrations, sessions, and
// the deletion of a recipient.
type DeviceExecutor interface {
	// DeviceRegister upserts a device: a token owned by another recipient moves
	// (new id), then the owner keeps its MaxPerRecipient most recently registered
	// devices. Returns ErrSessionRevoked for a revoked session. With
	// KeepOtherOwner, a token owned by another recipient stays with it and the
	// call returns ErrTokenRegistered; the owner is the one the unique index
	// finds, a registration still uncommitted being waited for.
	DeviceRegister(ctx context.Context, p *DeviceRegisterParams) (*Device, error)
	// DeviceUnregister deletes a (transport, token key) registration, only if owned
	// by Recipient when Recipient is not empty. Absent rows are not an error.
	DeviceUnregister(ctx context.Context, p *DeviceUnregisterParams) (int, error)
	// DeviceListByRecipient returns a recipient's devices, newest registration first.
	DeviceListByRecipient(ctx context.Context, recipient string) ([]*Device, error)
	// DeviceGetByToken returns the registration of a (transport, token key),
	// or ErrNotFound.
	DeviceGetByToken(ctx context.Context, transport, tokenKey string) (*Device, error)
	// SessionRevoke records the session as revoked, for good, and deletes its
	// devices, including those of registrations that were still uncommitted
	// when it began (it waits for them; SQLite's single writer does so anyway).
	SessionRevoke(ctx context.Context, session string, now *time.Time) (devicesDeleted int, err error)
	// RecipientDelete deletes a recipient's devices and deliveries (with
	// their ledger), and says what the deliveries held. It touches no other
	// owner's rows: those take part through Config.RecipientDeleters.
	RecipientDelete(ctx context.Context, recipient string) (*RecipientDeleteResult, error)
}

// Device is a registration.
type Device struct {
	ID           int64
	Recipient    string
	Transport    string
	Token        string
	TokenKey     string // what makes a registration unique within a transport
	Platform     string
	Session      string
	Locale       string
	TimeZone     string
	Tags         []string // sorted, distinct
	CreatedAt    time.Time
	RegisteredAt time.Time
}

// DeviceRegisterParams registers a device.
type DeviceRegisterParams struct {
	Now             *time.Time
	Recipient       string
	Transport       string
	Token           string
	TokenKey        string
	Platform        string
	Session         string
	Locale          string
	TimeZone        string
	Tags            []string // sorted, distinct; replaces the registration's
	MaxPerRecipient int
	// KeepOtherOwner refuses to move the token (ErrTokenRegistered): a direct
	// send registers under an implicit recipient and must not take a token
	// from the recipient it belongs to.
	KeepOtherOwner bool
}

// DeviceUnregisterParams removes a registration.
type DeviceUnregisterParams struct {
	Transport string
	TokenKey  string
	Recipient string // "" = whoever owns it
}

// RecipientDeleteResult says what RecipientDelete removed.
type RecipientDeleteResult struct {
	Devices    int
	Deliveries DeletedDeliveries
}

// TagsJSON encodes a device's tags as drivers store them: a JSON array,
// "[]" for none.
func TagsJSON(tags []string) string {
	if len(tags) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(tags) // strings always encode
	return string(b)
}
