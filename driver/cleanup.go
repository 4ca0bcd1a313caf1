package driver

import (
	"context"
	"time"
)

// CleanupExecutor is housekeeping: the cleanup job's lock and deletions,
// and the backlog's counts.
type CleanupExecutor interface {
	// LockAcquire takes or renews the named lock for Owner until now+TTL when it is
	// free, expired or already Owner's; it reports whether Owner holds it.
	LockAcquire(ctx context.Context, p *LockParams) (bool, error)
	// DeliveryDeleteFinished deletes up to Limit deliveries finished before
	// now-Age, oldest first, skipping rows locked by others, and says what
	// they held.
	DeliveryDeleteFinished(ctx context.Context, p *CleanupParams) (*DeletedDeliveries, error)
	// MessageDeleteOrphans deletes those of the messages that have no delivery
	// left, and returns how many. The engine calls it in the transaction that
	// deleted the deliveries (DeletedDeliveries.MessageIDs); as with
	// IdempotencyDeleteFreed, two transactions deleting deliveries of one
	// message at once must not both keep it.
	MessageDeleteOrphans(ctx context.Context, ids []int64) (int, error)
	// MessageSweepOrphans looks at the Limit messages after AfterID in id
	// order, deletes those without deliveries, and returns how many it deleted
	// and the last id it looked at (0 when there was no message after
	// AfterID). It finds the orphans no deletion of deliveries left: a send
	// whose recipients were all duplicates, interrupted before it deleted its
	// message again.
	MessageSweepOrphans(ctx context.Context, p *SweepParams) (deleted int, last int64, err error)
	// DeliveryOverdue counts pending deliveries due before now-Age, and the oldest due time.
	DeliveryOverdue(ctx context.Context, p *CleanupParams) (count int, oldest time.Time, err error)
	// DeliveryDueStats reports, for each lane (transactional, campaign), the
	// number of due pending deliveries, counting no more than max of them
	// (so that its cost is bounded however large the backlog), and the age
	// of the oldest.
	DeliveryDueStats(ctx context.Context, now *time.Time, max int) (DueStats, error)
}

// LockParams names a lock and its holder.
type LockParams struct {
	Now   *time.Time
	Name  string
	Owner string
	TTL   time.Duration
}

// CleanupParams bounds a cleanup step.
type CleanupParams struct {
	Now   *time.Time
	Age   time.Duration
	Limit int
}

// SweepParams is one batch of the orphan sweep: Limit messages after AfterID.
type SweepParams struct {
	AfterID int64
	Limit   int
}

// DeletedDeliveries says what a deletion of deliveries removed: how many rows,
// and the messages and dedup keys they held. A message in MessageIDs may now
// have no delivery left (MessageDeleteOrphans), a key in DedupKeys may be held
// by none, and its recorded request must go with it (IdempotencyDeleteFreed).
type DeletedDeliveries struct {
	Count      int
	MessageIDs []int64  // distinct
	DedupKeys  []string // distinct, never ""
}

// DueStats is the due backlog of each lane: a campaign's deliveries wait in
// a lane of their own, claimed after the other (Delivery.Campaign).
type DueStats struct {
	Transactional, Campaign DueLane
}

// DueLane is one lane's due backlog.
type DueLane struct {
	// Count is the number of due pending deliveries, at most the max asked.
	Count int
	// OldestAge is how long the oldest has been due; 0 when none is.
	OldestAge time.Duration
}
