package driver

import (
	"context"
	"time"
)

// RequestExecutor reads and frees recorded requests
// (SendOptions.RequestHash; migration 2). They are the engine's, not the
// server's: MessageInsert writes a record in the send's own statement and
// cleanup deletes it with the last delivery holding its key, so both ends
// of its life are in the engine's transactions.
type RequestExecutor interface {
	// IdempotencyGet returns the recorded request of key, or ErrNotFound.
	IdempotencyGet(ctx context.Context, key string) (*IdempotencyRecord, error)
	// IdempotencyDeleteFreed deletes the records of those keys that no
	// delivery holds any more, and returns how many. The engine calls it in
	// the transaction that deleted the deliveries (DeletedDeliveries.DedupKeys);
	// two transactions deleting deliveries of one key at once must not both
	// keep its record (PostgreSQL locks the records before it looks).
	IdempotencyDeleteFreed(ctx context.Context, keys []string) (int, error)
}

// IdempotencyRecord is what a recorded request did: the hash of the request
// and the first send's result. It lives exactly as long as its key: until no
// delivery holds Key any more.
type IdempotencyRecord struct {
	Key         string
	RequestHash []byte
	MessageID   int64 // 0 when nothing was queued
	Queued      int
	Duplicates  int
	CreatedAt   time.Time
}
