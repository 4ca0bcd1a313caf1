package driver

import (
	"context"
	"time"
)

// CampaignExecutor keeps campaigns (migration 6): the campaign rows, their
// uploaded audiences, the expansion into deliveries of the campaign lane,
// the totals the database keeps (migration 7) and the per-transport
// ceiling's windows (D96).
type CampaignExecutor interface {
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
	// The recipients the expansion passed without writing a delivery, by
	// reason (migration 10, D155): no registered device; devices, none
	// the filter selects; selected devices, every token malformed;
	// well-formed tokens, every one another recipient's target in the
	// batch. Written plus these is the audience passed so far.
	NoDevice, FilteredOut, MalformedOnly, DuplicateOnly int64

	Tries     int
	LastError string

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
