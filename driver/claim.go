package driver

import (
	"context"
	"time"
)

// ClaimExecutor leases due deliveries and reads what a claimed batch needs
// (oncepush's claim phase, claim.go).
type ClaimExecutor interface {
	// WithSavepoint runs fn inside a savepoint of the executor's transaction and
	// rolls back to it when fn fails, so a failing statement of fn (an eligibility
	// rule's query, say) does not abort the surrounding transaction.
	WithSavepoint(ctx context.Context, fn func() error) error

	// DeliveryClaim leases up to Max due pending deliveries to LeaseID: those
	// not of the campaign lane first, then the campaign lane's (a delivery
	// written with CampaignDeliveryInsert), each oldest due first,
	// skipping rows locked by others, moving each row's next_attempt_at to
	// the lease's end. It returns the rows and the instant it used as "now".
	DeliveryClaim(ctx context.Context, p *DeliveryClaimParams) (*DeliveryClaimResult, error)
	// MessageGetMany returns the messages with these ids.
	MessageGetMany(ctx context.Context, ids []int64) ([]*Message, error)
	// DeviceListByRecipients returns the recipients' devices, excluding devices
	// bound to a revoked session, ordered by recipient then id.
	DeviceListByRecipients(ctx context.Context, recipients []string) ([]*Device, error)
	// DeviceAttemptListByDeliveries returns the ledger rows of these deliveries.
	DeviceAttemptListByDeliveries(ctx context.Context, deliveryIDs []int64) ([]*DeviceAttempt, error)
	// ClaimRead is the three reads a claimed batch needs, as MessageGetMany,
	// DeviceListByRecipients and DeviceAttemptListByDeliveries return them; a
	// driver that can send them together does (one round trip on PostgreSQL:
	// the claim's time is mostly its round trips, D91).
	ClaimRead(ctx context.Context, p *ClaimReadParams) (*ClaimReadResult, error)
}

// DeliveryClaimParams leases due deliveries.
type DeliveryClaimParams struct {
	Now     *time.Time
	Max     int
	LeaseID int64
	Lease   time.Duration
	// NoCampaign leaves the campaign lane alone: the per-transport ceiling's
	// window is spent (D96).
	NoCampaign bool
}

// DeliveryClaimResult is what DeliveryClaim leased, and the instant it used as now.
type DeliveryClaimResult struct {
	Now  time.Time
	Rows []*ClaimedDelivery
}

// ClaimReadParams names what ClaimRead reads.
type ClaimReadParams struct {
	MessageIDs  []int64
	Recipients  []string // their devices
	DeliveryIDs []int64  // their ledger rows
}

// ClaimReadResult is what ClaimRead read.
type ClaimReadResult struct {
	Messages []*Message
	Devices  []*Device
	Attempts []*DeviceAttempt
}

// ClaimedDelivery is a delivery leased by DeliveryClaim.
type ClaimedDelivery struct {
	ID             int64
	MessageID      int64
	Recipient      string
	NotificationID string
	Attempts       int
	// Campaign: the delivery is in the campaign lane (written by a
	// campaign's expansion).
	Campaign bool
	// PrevLeaseID is the lease the row carried before this claim: non-zero means a
	// run leased it and never recorded, and its lease has expired.
	PrevLeaseID int64
}
