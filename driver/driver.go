// Package driver defines the storage contract between the oncepush engine and a
// database. The engine owns this contract: it lists exactly the statements the
// engine runs, in the engine's vocabulary, and every driver (driver/postgres,
// driver/sqlite) passes the same conformance suite against it (driver/drivertest).
// The server's own state (API keys, preferences) is a second contract beside
// this one, package driver/serverstore, with migrations of its own.
//
// The package is for driver authors. Applications construct a driver with its
// package's New function and hand it to oncepush.NewClient; they never call these
// methods. The contract may change between minor versions.
//
// Time: every method that needs "now" takes a Now *time.Time. Nil means the
// database's own clock (PostgreSQL's now()); a value means an injected clock (tests).
// Drivers never read the process's wall clock when Now is nil, except where the
// database has no clock of its own worth trusting more than the host's (SQLite, a
// file on the same host).
package driver

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Sentinel errors drivers translate their database errors into, so that the engine
// never sees a driver's own error types.
var (
	// ErrNotFound: the row asked for does not exist.
	ErrNotFound = errors.New("oncepush/driver: not found")
	// ErrSchemaTooNew: the database was migrated by a newer oncepush than this one.
	ErrSchemaTooNew = errors.New("oncepush/driver: database schema is newer than this build")
	// ErrSchemaNotCurrent: migrations are pending; run Migrate.
	ErrSchemaNotCurrent = errors.New("oncepush/driver: database schema is not migrated")
	// ErrSessionRevoked: a device was registered under a session that was revoked.
	ErrSessionRevoked = errors.New("oncepush/driver: session revoked")
	// ErrRequestRecorded: MessageInsert was asked to record a request whose key
	// is recorded already; it wrote nothing.
	ErrRequestRecorded = errors.New("oncepush/driver: request already recorded")
	// ErrTokenRegistered: DeviceRegister with KeepOtherOwner found the token
	// registered to another recipient; it wrote nothing.
	ErrTokenRegistered = errors.New("oncepush/driver: token registered to another recipient")
	// ErrPageConflict: CampaignPageAdd found the page number taken by a page
	// of other recipients; it wrote nothing.
	ErrPageConflict = errors.New("oncepush/driver: campaign page number taken by another page")
)

// Delivery statuses. A delivery is pending until it reaches one of the others,
// which are final.
const (
	StatusPending   = "pending"
	StatusSent      = "sent"
	StatusFailed    = "failed"
	StatusAmbiguous = "ambiguous"
	StatusSkipped   = "skipped"
	StatusNoDevices = "no_devices"
	StatusExpired   = "expired"
	StatusCanceled  = "canceled"
)

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

// Driver is a database that can hold the oncepush ledger. TTx is the driver's
// transaction type (pgx.Tx, *sql.Tx), so that SendTx can join a caller's
// transaction with compile-time type safety.
type Driver[TTx any] interface {
	// Name is a short name for logs: "postgres", "sqlite".
	Name() string

	// InTx runs fn in a new transaction of the driver's own and commits it if fn
	// returns nil. fn gets the transaction itself (so the engine can hand it to
	// code that runs inside the claim, such as eligibility) and an executor on it.
	// Write transactions take their write locks up front (SQLite: BEGIN IMMEDIATE).
	InTx(ctx context.Context, fn func(ctx context.Context, tx TTx, ex Executor) error) error

	// Exec returns an executor that runs each call on its own, outside any
	// caller transaction (each call may still use a transaction internally).
	Exec() Executor

	// UnwrapExecutor wraps a caller's transaction.
	UnwrapExecutor(tx TTx) Executor

	// Notify tells listening workers (of every process) that work may be due,
	// outside any transaction, at once. Drivers without such a channel do nothing.
	Notify(ctx context.Context) error

	// Listen blocks until ctx is done, calling wake whenever another connection
	// or process may have made work due (PostgreSQL LISTEN). Drivers that cannot
	// hear other writers return nil at once; the engine then relies on polling.
	Listen(ctx context.Context, wake func()) error

	// Migrate applies pending migrations in order, each in its own transaction, and
	// is safe to run from several processes at once.
	Migrate(ctx context.Context) (*MigrateResult, error)

	// SchemaVersion reports the applied and the latest known migration version.
	SchemaVersion(ctx context.Context) (current, latest int, err error)
}

// SingleWriter is implemented by a driver whose database lets one
// transaction write at a time (SQLite's one write lock): the engine then
// writes one group of concurrent sends at a time (oncepush.Config.SendGroups),
// since a second group would only wait for the first's lock.
type SingleWriter interface {
	SingleWriter()
}

// ConflictDetector is implemented by a driver whose database may abort a
// statement or a transaction that would succeed on its own, to break a
// deadlock or for a serialization failure (PostgreSQL: SQLSTATE 40P01,
// 40001). The aborted work wrote nothing, and run again in a new
// transaction it may succeed: the engine runs again what it wrote in
// transactions of its own (a group of sends, a send written alone), and
// never retries a caller's transaction, which the abort has ended.
type ConflictDetector interface {
	// Conflict reports whether err, or an error it wraps, is such an abort.
	Conflict(err error) bool
}

// MigrateResult says what Migrate did.
type MigrateResult struct {
	Applied []int // versions applied by this call, in order
	Version int   // version after the call
}

// Executor runs the engine's statements, either in a transaction or on their
// own. It holds what the engine needs and nothing else: the server's own state
// is a contract of its own (package driver/serverstore).
type Executor interface {
	// --- sending

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

	// --- claim

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

	// --- record (also used by the claim for what it finishes itself)

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

	// --- devices

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

	// --- reading the ledger

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

	// --- cleanup and housekeeping

	// LockAcquire takes or renews the named lock for Owner until now+TTL when it is
	// free, expired or already Owner's; it reports whether Owner holds it.
	LockAcquire(ctx context.Context, p *LockParams) (bool, error)
	// LockRelease frees the named lock if Owner holds it.
	LockRelease(ctx context.Context, p *LockParams) error
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

	// --- campaigns (migration 6)

	// CampaignInsert writes a new campaign from its name, status, content,
	// audience, filter, StartAt and RatePerMinute (the rest starts empty;
	// CreatedAt and UpdatedAt are now: the given CreatedAt, the client's
	// clock, or the database's when it is zero) and returns it.
	CampaignInsert(ctx context.Context, c *Campaign) (*Campaign, error)
	// CampaignGet returns one campaign, or ErrNotFound.
	CampaignGet(ctx context.Context, id int64) (*Campaign, error)
	// CampaignLock returns one campaign with its row locked until the
	// transaction ends (PostgreSQL: FOR UPDATE; SQLite's write transaction
	// is the lock), or ErrNotFound. Called in InTx only.
	CampaignLock(ctx context.Context, id int64) (*Campaign, error)
	// CampaignSave writes every field of c but ID and CreatedAt, with
	// UpdatedAt set to now; called under CampaignLock.
	CampaignSave(ctx context.Context, c *Campaign, now *time.Time) error
	// CampaignList returns up to Limit campaigns with ids below BeforeID,
	// newest first, of Status when it is not empty.
	CampaignList(ctx context.Context, p *CampaignListParams) ([]*Campaign, error)
	// CampaignTry picks the campaign due for expansion work first (the
	// lowest id that is sending, or scheduled with StartAt at or before
	// now), skipping rows locked by others, and counts a try on it, on its
	// own (committed when it returns). A campaign that already has MaxTries
	// counted is skipped until its last try began Lease ago (that try may
	// still be running), then becomes interrupted instead, its LastError
	// Abandoned (then the one it had) and Interrupted set. Found is false
	// when no campaign is due.
	CampaignTry(ctx context.Context, p *CampaignTryParams) (*CampaignTryResult, error)
	// CampaignPageAdd records an uploaded page of a campaign's audience and
	// adds its recipients (those already in the audience are left as they
	// are), and returns how many were added. A page whose number is taken
	// with the same Digest writes nothing and returns Replayed; with another
	// digest, ErrPageConflict.
	CampaignPageAdd(ctx context.Context, p *CampaignPageParams) (added int, replayed bool, err error)
	// CampaignRecipientsAfter returns up to limit of a campaign's uploaded
	// recipients after the given one, in order.
	CampaignRecipientsAfter(ctx context.Context, campaignID int64, after string, limit int) ([]string, error)
	// DeviceListAfter returns up to limit devices whose recipient sorts
	// after the given one, ordered by recipient then id, excluding devices
	// bound to a revoked session.
	DeviceListAfter(ctx context.Context, after string, limit int) ([]*Device, error)
	// CampaignDeliveryInsert writes a campaign's deliveries of its message
	// (which exists), in the campaign lane, one per recipient
	// (NotificationIDs[i], due at DueAt[i]), skipping recipients who have a
	// campaign delivery of the message already, and returns how many it
	// wrote. They carry no dedup key: their uniqueness is (message,
	// recipient) among campaign deliveries, which no send can name (D105).
	CampaignDeliveryInsert(ctx context.Context, p *CampaignDeliveryInsertParams) (int, error)
	// DeviceAttemptCountByState counts a message's device attempts by
	// state.
	DeviceAttemptCountByState(ctx context.Context, messageID int64) (map[string]int, error)
	// CampaignTally returns a campaign message's totals as the database
	// keeps them with the rows (migration 7, D95): counts by delivery status,
	// and by "attempt:accepted", "attempt:invalid", "attempt:rejected" and
	// "attempt:ambiguous" (an attempt whose answer was lost at least once).
	// States with no count may be absent.
	CampaignTally(ctx context.Context, messageID int64) (map[string]int, error)
	// CampaignTallyCompact folds the tally's rows of messages that have at
	// least minRows of them into one row per state, and returns how many
	// messages it folded. A driver that keeps one row per state already
	// returns 0.
	CampaignTallyCompact(ctx context.Context, minRows int) (int, error)
	// SendWindowTake takes from the current window of each transport's
	// ceiling (D96): for each i, at most Asked[i] of what is left of
	// Allowance[i] in the window of Transports[i] starting at Starts[i], and
	// returns what it granted per transport. The rows stay locked until the
	// transaction ends.
	SendWindowTake(ctx context.Context, p *SendWindowParams) (map[string]int, error)
	// SendWindowDeleteBefore deletes windows that started before t.
	SendWindowDeleteBefore(ctx context.Context, t time.Time) (int, error)

	// --- recorded requests (SendOptions.RequestHash; migration 2)
	//
	// The engine's, not the server's: MessageInsert writes a record in the
	// send's own statement and cleanup deletes it with the last delivery
	// holding its key, so both ends of its life are in the engine's
	// transactions.

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

// DeviceKey identifies a device exactly, so that a token that moved to another
// recipient (and got a new id) is never matched by an answer about its old owner.
type DeviceKey struct {
	ID        int64
	Recipient string
	Token     string
}

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

// UpdatedDelivery is a delivery DeliveryUpdateMany changed, with its status
// after the change.
type UpdatedDelivery struct {
	ID     int64
	Status string
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

// DeliveryUpdateManyParams applies updates under one lease.
type DeliveryUpdateManyParams struct {
	Now     *time.Time
	LeaseID int64
	Updates []DeliveryUpdate
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

// CampaignTokenKey names a campaign's token held by a delivery.
type CampaignTokenKey struct {
	MessageID  int64
	Transport  string
	TokenKey   string
	DeliveryID int64
}

// DeviceAttemptMarkSendingParams marks pairs sending under one lease.
type DeviceAttemptMarkSendingParams struct {
	Now          *time.Time
	LeaseID      int64
	MinLeaseLeft time.Duration
	Pairs        []DeviceAttemptKey
}

// DeviceAttemptUpsertManyParams writes ledger rows.
type DeviceAttemptUpsertManyParams struct {
	Now  *time.Time
	Rows []DeviceAttemptUpsert
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

// DeletedDeliveries says what a deletion of deliveries removed: how many rows,
// and the messages and dedup keys they held. A message in MessageIDs may now
// have no delivery left (MessageDeleteOrphans), a key in DedupKeys may be held
// by none, and its recorded request must go with it (IdempotencyDeleteFreed).
type DeletedDeliveries struct {
	Count      int
	MessageIDs []int64  // distinct
	DedupKeys  []string // distinct, never ""
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

// Campaign statuses.
const (
	CampaignDraft       = "draft"
	CampaignScheduled   = "scheduled"
	CampaignSending     = "sending"
	CampaignCompleted   = "completed"
	CampaignInterrupted = "interrupted"
	CampaignCanceled    = "canceled"
)

// Campaign audiences.
const (
	AudienceRecipients = "recipients"
	AudienceDevices    = "devices"
)

// Campaign is a stored campaign. Content and Filter are the engine's JSON
// documents, which drivers store as they are.
type Campaign struct {
	ID            int64
	Name          string
	Status        string
	Content       []byte // the message and its options
	Audience      string // AudienceRecipients or AudienceDevices
	Filter        []byte // the device filter, or nil
	StartAt       *time.Time
	RatePerMinute int

	// The expansion's state.
	MessageID       int64 // 0 until started
	Cursor          string
	Written         int64 // deliveries written
	Recipients      int64 // uploaded audience members
	InvalidTokens   int64 // malformed tokens the expansion left out
	DuplicateTokens int64 // second devices with a token key already targeted
	Tries           int
	LastError       string

	CreatedAt  time.Time
	UpdatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
}

// CampaignListParams selects a page of campaigns.
type CampaignListParams struct {
	Status   string // "" = any
	BeforeID int64
	Limit    int
}

// CampaignTryParams picks a campaign for expansion work.
type CampaignTryParams struct {
	Now      *time.Time
	MaxTries int
	// Lease is how long a try may still be running after it began: a
	// campaign whose tries have run out is interrupted only once its last
	// try began at least Lease ago.
	Lease time.Duration
	// Abandoned is the LastError of a campaign interrupted so, followed by
	// the one it had (the engine's words, one place for every driver).
	Abandoned string
}

// CampaignTryResult is the campaign CampaignTry picked.
type CampaignTryResult struct {
	Found       bool
	ID          int64
	Tries       int  // counted, this one included
	Interrupted bool // the tries had run out: it is interrupted now
}

// CampaignPageParams is an uploaded page of recipients.
type CampaignPageParams struct {
	CampaignID int64
	Page       int
	Digest     []byte
	Recipients []string // distinct
}

// CampaignDeliveryInsertParams writes a campaign's deliveries of its
// message.
type CampaignDeliveryInsertParams struct {
	Now             *time.Time
	MessageID       int64
	Recipients      []string
	NotificationIDs []string
	DueAt           []time.Time
}

// SendWindowParams asks windows of the per-transport ceiling for sends:
// for each i, Asked[i] sends of the window of Transports[i] that starts at
// Starts[i] and allows Allowance[i]. Transports are distinct and sorted
// (the rows are locked in that order).
type SendWindowParams struct {
	Transports []string
	Starts     []time.Time
	Asked      []int
	Allowance  []int
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

// TagsJSON encodes a device's tags as drivers store them: a JSON array,
// "[]" for none.
func TagsJSON(tags []string) string {
	if len(tags) == 0 {
		return "[]"
	}
	b, _ := json.Marshal(tags) // strings always encode
	return string(b)
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
