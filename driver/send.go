package driver

import (
	"context"
	"time"
)

// SendExecutor writes sends: a message and its deliveries, one send or a
// group of them in one commit (oncepush's Send, SendTx, SendToDevices).
type SendExecutor interface {
	// MessageInsert writes a message and one delivery per recipient, skipping
	// recipients whose (recipient, dedup key) exists, and returns the message id
	// and how many deliveries it inserted. It is atomic on its own (PostgreSQL:
	// one statement; SQLite: one write transaction when not in one already).
	MessageInsert(ctx context.Context, p *MessageInsertParams) (id int64, inserted int, err error)
	// MessageInsertMany writes several sends as MessageInsert would, each
	// independently of the others, and returns one result per element of
	// ps, in order (a group commit: the engine calls it in InTx, so that the
	// sends share one commit; outside a transaction it runs in one of its
	// own). A send with a RequestHash whose key is recorded already writes
	// nothing and its result's Err is ErrRequestRecorded, the others being
	// written as if it had not been there (a savepoint each); a send without
	// one cannot fail on its own. Any other error is returned, and then
	// nothing of any send may be committed: the caller rolls back.
	// PostgreSQL sends all of them in one round trip.
	MessageInsertMany(ctx context.Context, ps []*MessageInsertParams) ([]MessageInserted, error)
	// MessageDelete deletes a message (one whose deliveries were all duplicates).
	MessageDelete(ctx context.Context, id int64) error
	// Wake tells listening workers that work may be due, delivered only when the
	// surrounding transaction commits. Drivers without such a channel do nothing.
	Wake(ctx context.Context) error
}

// Message is a stored message.
type Message struct {
	ID          int64
	Type        string
	Title       string
	Body        string
	Data        []byte // a JSON object, or nil
	Link        string
	Image       string
	Category    string
	Ambiguity   string
	ScheduledAt time.Time
	ExpiresAt   time.Time
	CreatedAt   time.Time
	// Audience is a campaign's device filter (JSON, the engine's); nil for
	// every other message.
	Audience []byte
}

// MessageInsertParams writes a message and its deliveries: Recipients[i] gets
// NotificationIDs[i]. Lifetime is added to ScheduledAt (or now, when
// ScheduledAt is nil) to give expires_at; deliveries fall due at ScheduledAt,
// or now.
type MessageInsertParams struct {
	Now         *time.Time
	Type        string
	Title       string
	Body        string
	Data        []byte
	Link        string
	Image       string
	Category    string
	Ambiguity   string
	ScheduledAt *time.Time
	Lifetime    time.Duration
	Audience    []byte // a campaign's device filter, or nil

	Recipients      []string
	NotificationIDs []string
	DedupKey        string // "" = none

	// RequestHash, when set, records the request under DedupKey in the same
	// atomic write: the hash, the message id, the number queued, and
	// Duplicates plus the recipients not queued. If the key is recorded
	// already, nothing at all is written and the error is ErrRequestRecorded
	// (a concurrent writer of the key is waited for first).
	RequestHash []byte
	Duplicates  int
}

// MessageInserted is one send's result of MessageInsertMany: what
// MessageInsert would have returned.
type MessageInserted struct {
	ID       int64
	Inserted int
	// Err is nil or ErrRequestRecorded (then nothing of the send was written).
	Err error
}
