package driver

import (
	"context"
	"time"
)

// RecordExecutor writes what a run's submissions did: the per-device
// ledger, the deliveries' statuses under their lease, the marks before a
// provider call (oncepush's record phase, record.go; the claim uses it too,
// for what it finishes itself).
type RecordExecutor interface {
	// DeliveryUpdateMany applies each update to a delivery still leased to
	// LeaseID and returns the rows it changed, with the status they now have.
	// Rows leased to another run, or gone, are left alone and absent from the
	// answer. A delivery canceled while leased (MessageCancel) keeps its
	// status, last error and finish time; its lease is released and it is in
	// the answer, as canceled.
	DeliveryUpdateMany(ctx context.Context, p *DeliveryUpdateManyParams) ([]UpdatedDelivery, error)
	// DeviceAttemptUpsertMany writes ledger rows (insert, or add deltas and set state).
	DeviceAttemptUpsertMany(ctx context.Context, p *DeviceAttemptUpsertManyParams) error
	// DeviceAttemptMarkSending marks pairs sending just before their provider
	// calls, on its own (committed when it returns, outside any transaction):
	// state sending, one more submission, the device id of this registration.
	// Only pairs of deliveries still leased to LeaseID, pending, and whose lease
	// ends at least MinLeaseLeft after now are marked; the rows are locked
	// against a concurrent claim while checked.
	//
	// A pair with a CampaignMessageID is marked only if its delivery holds
	// the token in the campaign (oncepush_campaign_token, D107): it takes
	// the token first, insert-first on (message, transport, token key), or
	// takes it over when the holder's last submission provably did not
	// reach it (CampaignTokenFree). A pair whose token another delivery
	// holds is not marked: if the holder's attempt on the token is settled
	// or ambiguous, the pair's attempt is written AttemptDuplicate (one
	// statement with the marks); if it is still sending, the pair is
	// answered MarkHeld and nothing is written.
	//
	// It answers every pair of the deliveries it found leased, with its
	// state: AttemptSending (marked), AttemptDuplicate or MarkHeld. Pairs of
	// other deliveries are absent.
	DeviceAttemptMarkSending(ctx context.Context, p *DeviceAttemptMarkSendingParams) ([]MarkedPair, error)
	// CampaignTokenFree frees campaign tokens held by the given deliveries
	// (each key's DeliveryID; keys held by another delivery are left): the
	// holder's submission provably did not reach the device, so another
	// delivery of the campaign may take the token over.
	CampaignTokenFree(ctx context.Context, keys []CampaignTokenKey) error
	// DeviceDeleteMany deletes devices matching (id, recipient, token) exactly and
	// returns how many it deleted.
	DeviceDeleteMany(ctx context.Context, keys []DeviceKey) (int, error)
	// DeliveryLeaseGetMany returns the current lease of each delivery that still
	// exists (0 = unleased); used only to explain a lost record in the log.
	DeliveryLeaseGetMany(ctx context.Context, ids []int64) (map[int64]int64, error)
}

// Device attempt states (the per-device ledger).
const (
	// AttemptPending: known to the ledger but never submitted (a pair released by
	// the run budget before its first send).
	AttemptPending = "pending"
	// AttemptSending: marked before the provider call; still here after the lease
	// means the run died or lost its answer, and the attempt is ambiguous.
	AttemptSending = "sending"
	// AttemptAccepted: the provider accepted it. Settled.
	AttemptAccepted = "accepted"
	// AttemptInvalid: the provider said the token is dead; the device was deleted.
	AttemptInvalid = "invalid"
	// AttemptRetry: the provider asked to try later; it will be.
	AttemptRetry = "retry"
	// AttemptRejected: the provider refused the message or our credentials. Settled.
	AttemptRejected = "rejected"
	// AttemptAmbiguous: maybe submitted. Under the resend policy it will be sent
	// again with the same collapse id; under at-most-once it is settled.
	AttemptAmbiguous = "ambiguous"
	// AttemptDuplicate: a campaign delivery's pair never submitted, because
	// another delivery of the campaign reached its token (it moved between
	// recipients). Settled.
	AttemptDuplicate = "duplicate"
)

// MarkHeld is DeviceAttemptMarkSending's answer for a campaign pair whose
// token another delivery of the campaign has in flight: not marked, and
// not settled either, since that submission may yet fail. It is no ledger
// state: nothing is written for the pair.
const MarkHeld = "held"

// DeviceAttempt is a ledger row. A pair is identified by (DeliveryID,
// Transport, TokenKey): the token, not the registration row, so a device that
// unregisters and registers the same token again (a new DeviceID) is the same
// pair and is never submitted the same notification twice.
type DeviceAttempt struct {
	DeliveryID  int64
	DeviceID    int64 // the registration last submitted to
	Transport   string
	TokenKey    string
	State       string
	Submissions int
	Ambiguous   int
	ProviderID  string
	Error       string
	FirstSentAt *time.Time
	LastSentAt  *time.Time
	UpdatedAt   time.Time
}

// DeviceAttemptKey names one pair about to be submitted.
type DeviceAttemptKey struct {
	DeliveryID int64
	DeviceID   int64
	Transport  string
	TokenKey   string
	// CampaignMessageID is the message of a campaign delivery's pair, 0 for
	// any other: the token must be the delivery's in its campaign.
	CampaignMessageID int64
}

// MarkedPair is DeviceAttemptMarkSending's answer for one pair: State is
// AttemptSending, AttemptDuplicate or MarkHeld.
type MarkedPair struct {
	DeliveryID int64
	Transport  string
	TokenKey   string
	State      string
}

// DeviceAttemptMarkSendingParams marks pairs sending under one lease.
type DeviceAttemptMarkSendingParams struct {
	Now          *time.Time
	LeaseID      int64
	MinLeaseLeft time.Duration
	Pairs        []DeviceAttemptKey
}

// DeviceAttemptUpsert writes one ledger row. On insert the deltas are the
// starting values.
type DeviceAttemptUpsert struct {
	DeliveryID       int64
	DeviceID         int64
	Transport        string
	TokenKey         string
	State            string
	SubmissionsDelta int
	AmbiguousDelta   int
	// ProviderID, when not empty, replaces the recorded provider id.
	ProviderID string
	// Error replaces the recorded text unless State is AttemptSending (a
	// release restores the previous text by passing it here).
	Error string
}

// DeviceAttemptUpsertManyParams writes ledger rows.
type DeviceAttemptUpsertManyParams struct {
	Now  *time.Time
	Rows []DeviceAttemptUpsert
}

// DeliveryUpdate changes one leased delivery.
type DeliveryUpdate struct {
	ID int64
	// Status is the new status; StatusPending keeps it pending. Either way the
	// lease is released.
	Status   string
	Attempts int // the new attempt count (absolute; the lease makes it safe)
	// NextAttemptAt, when set, is the next due time; otherwise now + Delay.
	NextAttemptAt *time.Time
	Delay         time.Duration
	// LastError, when set, replaces the recorded error text.
	LastError *string
}

// DeliveryUpdateManyParams applies updates under one lease.
type DeliveryUpdateManyParams struct {
	Now     *time.Time
	LeaseID int64
	Updates []DeliveryUpdate
}

// UpdatedDelivery is a delivery DeliveryUpdateMany changed, with its status
// after the change.
type UpdatedDelivery struct {
	ID     int64
	Status string
}

// CampaignTokenKey names a campaign's token held by a delivery.
type CampaignTokenKey struct {
	MessageID  int64
	Transport  string
	TokenKey   string
	DeliveryID int64
}

// DeviceKey identifies a device exactly, so that a token that moved to another
// recipient (and got a new id) is never matched by an answer about its old owner.
type DeviceKey struct {
	ID        int64
	Recipient string
	Token     string
}
