package driver

import (
	"context"
	"time"
)

// LedgerExecutor reads the ledger (messages, deliveries and their device
// attempts) for the Client's reads, and cancels a message's pending
// deliveries.
type LedgerExecutor interface {
	// DeliveryGet returns one delivery.
	DeliveryGet(ctx context.Context, id int64) (*Delivery, error)
	// DeliveryListByMessage lists a message's deliveries, id order, after AfterID.
	DeliveryListByMessage(ctx context.Context, messageID, afterID int64, limit int) ([]*Delivery, error)
	// DeliveryListByRecipient lists a recipient's deliveries with ids below
	// beforeID, newest first (the engine asks for the first page with the
	// largest int64).
	DeliveryListByRecipient(ctx context.Context, recipient string, beforeID int64, limit int) ([]*Delivery, error)
	// DeliveryCountByStatus counts a message's deliveries by status.
	DeliveryCountByStatus(ctx context.Context, messageID int64) (map[string]int, error)
	// MessageGet returns one message, or ErrNotFound.
	MessageGet(ctx context.Context, id int64) (*Message, error)
	// MessageList returns a page of messages, newest first (by creation time,
	// then id), as MessageListParams selects: every page a seek into an index
	// ordered that way (by category when one is given).
	MessageList(ctx context.Context, p *MessageListParams) ([]*Message, error)
	// MessageIDsByDedupKey returns the ids of the messages with a delivery
	// under the key.
	MessageIDsByDedupKey(ctx context.Context, key string) ([]int64, error)
	// MessageCancel ends every pending delivery of the message canceled
	// (leased ones too: a lease's holder marks nothing more of them, see
	// DeviceAttemptMarkSending) and counts them, and those of them with a
	// device attempt sending. ErrNotFound when the message does not exist.
	// A campaign's message is canceled only by its campaign (CampaignID
	// set): otherwise nothing is canceled and the result names the campaign.
	MessageCancel(ctx context.Context, p *MessageCancelParams) (*MessageCancelResult, error)
	// DeviceAttemptAmbiguousCount counts a message's device attempts that were
	// ambiguous at least once.
	DeviceAttemptAmbiguousCount(ctx context.Context, messageID int64) (int, error)
}

// Delivery is a stored delivery with its ledger.
type Delivery struct {
	ID             int64
	MessageID      int64
	Recipient      string
	NotificationID string
	DedupKey       string
	Status         string
	Attempts       int
	NextAttemptAt  time.Time
	LeaseID        int64
	LastError      string
	CreatedAt      time.Time
	FinishedAt     *time.Time
	Devices        []*DeviceAttempt // filled by the list and get methods
}

// AttachAttempts fills each delivery's Devices with its ledger rows, read with
// one DeviceAttemptListByDeliveries call: the drivers' list and get methods
// share it.
func AttachAttempts(ctx context.Context, ex Executor, ds []*Delivery) ([]*Delivery, error) {
	if len(ds) == 0 {
		return ds, nil
	}
	ids := make([]int64, len(ds))
	byID := make(map[int64]*Delivery, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
		byID[d.ID] = d
	}
	as, err := ex.DeviceAttemptListByDeliveries(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, a := range as {
		byID[a.DeliveryID].Devices = append(byID[a.DeliveryID].Devices, a)
	}
	return ds, nil
}

// MessageListParams selects a page of messages. Empty strings and nil
// times select everything.
type MessageListParams struct {
	Category string
	// Status is "done" (no delivery is pending), a delivery status (some
	// delivery has it: "pending", "failed", …) or "" (any).
	Status string
	// CreatedFrom and CreatedTo bound the creation time: [from, to).
	CreatedFrom, CreatedTo *time.Time
	// BeforeAt and BeforeID are the cursor: the page holds messages created
	// before BeforeAt, or at it with an id below BeforeID. The first page
	// passes nil and math.MaxInt64.
	BeforeAt *time.Time
	BeforeID int64
	Limit    int
}

// Message list statuses.
const (
	MessagePending = "pending"
	MessageDone    = "done"
)

// MessageCancelParams cancels one message's pending deliveries.
type MessageCancelParams struct {
	Now       *time.Time
	MessageID int64
	// CampaignID is the campaign canceling its own message, in the
	// transaction holding its row (CampaignLock); 0 for a cancel of the
	// message alone, which a campaign's message refuses.
	CampaignID int64
}

// MessageCancelResult counts what MessageCancel ended.
type MessageCancelResult struct {
	// Canceled is the number of deliveries it ended.
	Canceled int
	// InFlight is how many of them had a device attempt sending: a run had
	// handed (or was about to hand) them to a provider, and records the
	// answers.
	InFlight int
	// CampaignID, when not 0, is the campaign whose message it is: the
	// cancel was refused (MessageCancelParams.CampaignID was 0) and nothing
	// was canceled.
	CampaignID int64
}
