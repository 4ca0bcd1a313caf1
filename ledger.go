package oncepush

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/oncepush/oncepush/driver"
)

// DeliveryStatus is where a delivery stands. Pending is the only status that
// changes; the others are final.
type DeliveryStatus string

// Delivery statuses.
const (
	StatusPending = DeliveryStatus(driver.StatusPending)
	// StatusSent: at least one device accepted.
	StatusSent = DeliveryStatus(driver.StatusSent)
	// StatusFailed: no device accepted and nothing is left to try.
	StatusFailed = DeliveryStatus(driver.StatusFailed)
	// StatusAmbiguous: no device is known to have accepted, and at least one
	// may have (at-most-once policy, or attempts exhausted on lost answers).
	StatusAmbiguous = DeliveryStatus(driver.StatusAmbiguous)
	// StatusSkipped: eligibility said skip.
	StatusSkipped = DeliveryStatus(driver.StatusSkipped)
	// StatusNoDevices: the recipient had no device to send to.
	StatusNoDevices = DeliveryStatus(driver.StatusNoDevices)
	// StatusExpired: the message's lifetime ended first.
	StatusExpired = DeliveryStatus(driver.StatusExpired)
	// StatusCanceled: canceled before it was sent.
	StatusCanceled = DeliveryStatus(driver.StatusCanceled)
)

// deliveryStatuses are the delivery statuses, pending first.
var deliveryStatuses = []DeliveryStatus{
	StatusPending, StatusSent, StatusFailed, StatusAmbiguous, StatusSkipped, StatusNoDevices, StatusExpired, StatusCanceled,
}

// DeliveryStatuses returns every delivery status, pending first.
func DeliveryStatuses() []DeliveryStatus { return slices.Clone(deliveryStatuses) }

// AttemptState is where one (delivery, device) pair stands in the ledger.
type AttemptState string

// Device attempt states.
const (
	AttemptPending   = AttemptState(driver.AttemptPending)
	AttemptSending   = AttemptState(driver.AttemptSending)
	AttemptAccepted  = AttemptState(driver.AttemptAccepted)
	AttemptInvalid   = AttemptState(driver.AttemptInvalid)
	AttemptRetry     = AttemptState(driver.AttemptRetry)
	AttemptRejected  = AttemptState(driver.AttemptRejected)
	AttemptAmbiguous = AttemptState(driver.AttemptAmbiguous)
	// AttemptDuplicate: a campaign delivery's device never submitted to,
	// because another delivery of the campaign had reached its token (it
	// moved between recipients). Settled.
	AttemptDuplicate = AttemptState(driver.AttemptDuplicate)
)

// Delivery is one (message, recipient) with its per-device ledger.
type Delivery struct {
	ID             int64
	MessageID      int64
	Recipient      string
	NotificationID string
	DedupKey       string
	Status         DeliveryStatus
	// Attempts counts recorded retryable failures.
	Attempts      int
	NextAttemptAt time.Time
	// LastError is what the providers said, prefixed by transport and device:
	// "fcm device 17: 503 UNAVAILABLE: The service is unavailable."
	LastError  string
	CreatedAt  time.Time
	FinishedAt *time.Time
	Devices    []DeviceAttempt
}

// DeviceAttempt is the ledger row of one (delivery, device) pair.
type DeviceAttempt struct {
	DeviceID  int64
	Transport Transport
	State     AttemptState
	// Submissions counts calls to the provider for this pair.
	Submissions int
	// Ambiguous counts submissions whose answer was lost.
	Ambiguous int
	// ProviderID is the provider's id of the accepted message.
	ProviderID string
	// Error is the provider's text, prefixed by the transport.
	Error       string
	FirstSentAt *time.Time
	LastSentAt  *time.Time
	UpdatedAt   time.Time
}

// ReachedAtMost is how many of the pair's submissions may have reached the
// device: each whose answer was lost, and the one accepted or still in
// flight. A submission answered "retry later", "rejected" or "invalid token"
// reached nothing, so a retry after one is not a second copy. Two or more
// means the device may have the notification twice: it was sent again after
// an answer was lost (the resend policy, docs/guarantees.md).
func (a DeviceAttempt) ReachedAtMost() int { return reachedAtMost(string(a.State), a.Ambiguous) }

// MayHaveReachedTwice reports whether a device of the delivery may have
// received it more than once (a ReachedAtMost of 2 or more).
func (d Delivery) MayHaveReachedTwice() bool {
	for _, a := range d.Devices {
		if a.ReachedAtMost() > 1 {
			return true
		}
	}
	return false
}

func deliveryFromRow(r *driver.Delivery) Delivery {
	d := Delivery{
		ID: r.ID, MessageID: r.MessageID, Recipient: r.Recipient, NotificationID: r.NotificationID,
		DedupKey: r.DedupKey, Status: DeliveryStatus(r.Status), Attempts: r.Attempts,
		NextAttemptAt: r.NextAttemptAt, LastError: r.LastError, CreatedAt: r.CreatedAt, FinishedAt: r.FinishedAt,
	}
	for _, a := range r.Devices {
		d.Devices = append(d.Devices, DeviceAttempt{
			DeviceID: a.DeviceID, Transport: Transport(a.Transport), State: AttemptState(a.State),
			Submissions: a.Submissions, Ambiguous: a.Ambiguous, ProviderID: a.ProviderID, Error: a.Error,
			FirstSentAt: a.FirstSentAt, LastSentAt: a.LastSentAt, UpdatedAt: a.UpdatedAt,
		})
	}
	return d
}

func deliveriesFromRows(rows []*driver.Delivery) []Delivery {
	out := make([]Delivery, len(rows))
	for i, r := range rows {
		out[i] = deliveryFromRow(r)
	}
	return out
}

// MaxPageSize is the most deliveries one listing returns.
const MaxPageSize = 10000

// Delivery returns one delivery with its ledger, or ErrNotFound.
func (c *Client[TTx]) Delivery(ctx context.Context, id int64) (*Delivery, error) {
	r, err := c.driver.Exec().DeliveryGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("oncepush: get delivery %d: %w", id, err)
	}
	d := deliveryFromRow(r)
	return &d, nil
}

// MessageDeliveries lists a message's deliveries in id order, those after
// afterID (0 = from the start), at most limit (1…MaxPageSize).
func (c *Client[TTx]) MessageDeliveries(ctx context.Context, messageID, afterID int64, limit int) ([]Delivery, error) {
	if limit < 1 || limit > MaxPageSize {
		return nil, invalid("limit", "must be between 1 and %d", MaxPageSize)
	}
	rows, err := c.driver.Exec().DeliveryListByMessage(ctx, messageID, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("oncepush: list deliveries: %w", err)
	}
	return deliveriesFromRows(rows), nil
}

// RecipientDeliveries lists a recipient's deliveries, newest first, those before
// beforeID (0 = from the newest), at most limit (1…MaxPageSize): the history
// that answers "did you send this twice?".
func (c *Client[TTx]) RecipientDeliveries(ctx context.Context, recipient string, beforeID int64, limit int) ([]Delivery, error) {
	if err := validateRecipient("recipient", recipient); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxPageSize {
		return nil, invalid("limit", "must be between 1 and %d", MaxPageSize)
	}
	if beforeID == 0 {
		// One plain bound for every page, so that every plan seeks to it.
		beforeID = math.MaxInt64
	}
	rows, err := c.driver.Exec().DeliveryListByRecipient(ctx, recipient, beforeID, limit)
	if err != nil {
		return nil, fmt.Errorf("oncepush: list deliveries: %w", err)
	}
	return deliveriesFromRows(rows), nil
}

// DeliveryCounts counts a message's deliveries by status.
func (c *Client[TTx]) DeliveryCounts(ctx context.Context, messageID int64) (map[DeliveryStatus]int, error) {
	m, err := c.driver.Exec().DeliveryCountByStatus(ctx, messageID)
	if err != nil {
		return nil, fmt.Errorf("oncepush: count deliveries: %w", err)
	}
	out := make(map[DeliveryStatus]int, len(m))
	for k, v := range m {
		out[DeliveryStatus(k)] = v
	}
	return out, nil
}

// StoredMessage is a message as a send stored it, once for all its
// deliveries.
type StoredMessage struct {
	ID    int64
	Type  string
	Title string
	Body  string
	// Data is the data object as stored (JSON, numbers as written), nil when
	// the message had none.
	Data        json.RawMessage
	Link        string
	Image       string // "" when none, or when an http: image was dropped
	Category    string
	Ambiguity   AmbiguityPolicy
	ScheduledAt time.Time
	ExpiresAt   time.Time
	CreatedAt   time.Time
}

// Message returns one stored message, or ErrNotFound: one that was never
// written, or whose deliveries are all gone (retention, recipient deletion).
func (c *Client[TTx]) Message(ctx context.Context, id int64) (*StoredMessage, error) {
	m, err := c.driver.Exec().MessageGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("oncepush: get message %d: %w", id, err)
	}
	return storedMessage(m), nil
}

// MessagesByID returns the stored messages with these ids, in no order; an
// id with no message is left out. One read, whatever the number of ids.
func (c *Client[TTx]) MessagesByID(ctx context.Context, ids []int64) ([]*StoredMessage, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := c.driver.Exec().MessageGetMany(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("oncepush: get messages: %w", err)
	}
	out := make([]*StoredMessage, len(rows))
	for i, m := range rows {
		out[i] = storedMessage(m)
	}
	return out, nil
}

func storedMessage(m *driver.Message) *StoredMessage {
	return &StoredMessage{
		ID: m.ID, Type: m.Type, Title: m.Title, Body: m.Body, Data: m.Data, Link: m.Link, Image: m.Image,
		Category: m.Category, Ambiguity: AmbiguityPolicy(m.Ambiguity),
		ScheduledAt: m.ScheduledAt, ExpiresAt: m.ExpiresAt, CreatedAt: m.CreatedAt,
	}
}

// AmbiguousAttempts counts the message's (delivery, device) pairs that were
// ambiguous at least once: submitted with no answer, so maybe shown twice
// (resend) or maybe never (at-most-once).
func (c *Client[TTx]) AmbiguousAttempts(ctx context.Context, messageID int64) (int, error) {
	n, err := c.driver.Exec().DeviceAttemptAmbiguousCount(ctx, messageID)
	if err != nil {
		return 0, fmt.Errorf("oncepush: count ambiguous attempts: %w", err)
	}
	return n, nil
}

// Backlog is the delivery backlog: pending deliveries that are due now.
type Backlog struct {
	// Due counts due pending deliveries, at most the limit Client.Backlog was
	// given.
	Due int
	// OldestAge is how long the oldest due delivery has been due; 0 when
	// none is.
	OldestAge time.Duration
	// Transactional and Campaign are the same for each lane: a campaign's
	// deliveries wait in a lane of their own, which the claim takes from
	// only after the other, so a send's wait is the transactional lane's.
	Transactional, Campaign BacklogLane
}

// BacklogLane is one lane's due backlog.
type BacklogLane struct {
	// Due counts the lane's due pending deliveries, at most the limit.
	Due int
	// OldestAge is how long its oldest due delivery has been due; 0 when
	// none is.
	OldestAge time.Duration
}

// Backlog reads the due backlog on the client's clock, counting at most limit
// deliveries (at least 1) so that its cost is bounded however far delivery
// has fallen behind.
func (c *Client[TTx]) Backlog(ctx context.Context, limit int) (Backlog, error) {
	if limit < 1 {
		return Backlog{}, invalid("limit", "must be at least 1")
	}
	st, err := c.driver.Exec().DeliveryDueStats(ctx, c.now(), limit)
	if err != nil {
		return Backlog{}, fmt.Errorf("oncepush: read the backlog: %w", err)
	}
	t, cp := st.Transactional, st.Campaign
	return Backlog{
		Due: min(t.Count+cp.Count, limit), OldestAge: max(t.OldestAge, cp.OldestAge),
		Transactional: BacklogLane{Due: t.Count, OldestAge: t.OldestAge},
		Campaign:      BacklogLane{Due: cp.Count, OldestAge: cp.OldestAge},
	}, nil
}

// MessageStatus selects messages by their deliveries: MessageDone (none is
// pending), or a delivery status, for the messages with a delivery in it —
// MessagePending (a delivery is pending), MessageStatus(StatusFailed) (one
// failed), and so on.
type MessageStatus string

// Message statuses for MessageQuery.
const (
	MessagePending = MessageStatus(driver.MessagePending)
	MessageDone    = MessageStatus(driver.MessageDone)
)

// MessageQuery selects the messages Messages lists; its zero value (with a
// Limit) lists them all.
type MessageQuery struct {
	Status   MessageStatus
	Category string
	// DedupKey lists the messages with a delivery under this key.
	DedupKey string
	// CreatedFrom and CreatedTo bound the creation time, [from, to); zero is
	// unbounded.
	CreatedFrom, CreatedTo time.Time
	// Cursor is where the page starts: "" for the first, else the Next of
	// the page before.
	Cursor string
	// Limit is the page size, 1…MaxPageSize.
	Limit int
}

// MessagePage is one page of Messages.
type MessagePage struct {
	Messages []*StoredMessage
	// Next is the cursor of the next page; "" on the last.
	Next string
}

// Messages lists stored messages, newest first (by creation time, then id),
// a page at a time. Each page is one indexed seek from its cursor, however
// deep; a status filter also reads, for each message it passes over, its
// deliveries until one is pending (at most all of them, for MessageDone).
func (c *Client[TTx]) Messages(ctx context.Context, q MessageQuery) (MessagePage, error) {
	if q.Limit < 1 || q.Limit > MaxPageSize {
		return MessagePage{}, invalid("limit", "must be between 1 and %d", MaxPageSize)
	}
	if q.Status != "" && q.Status != MessageDone && !slices.Contains(deliveryStatuses, DeliveryStatus(q.Status)) {
		names := []string{string(MessageDone)}
		for _, st := range deliveryStatuses {
			names = append(names, string(st))
		}
		return MessagePage{}, invalid("status", "must be one of %s; got %q", strings.Join(names, ", "), q.Status)
	}
	p := &driver.MessageListParams{Category: q.Category, Status: string(q.Status), BeforeID: math.MaxInt64, Limit: q.Limit + 1}
	if !q.CreatedFrom.IsZero() {
		p.CreatedFrom = &q.CreatedFrom
	}
	if !q.CreatedTo.IsZero() {
		p.CreatedTo = &q.CreatedTo
	}
	if q.Cursor != "" {
		at, id, ok := decodeMessageCursor(q.Cursor)
		if !ok {
			return MessagePage{}, invalid("cursor", "is not a cursor Messages returned")
		}
		p.BeforeAt, p.BeforeID = &at, id
	}
	list := c.driver.Exec().MessageList
	if q.DedupKey != "" {
		list = func(ctx context.Context, p *driver.MessageListParams) ([]*driver.Message, error) {
			return c.messagesByDedupKey(ctx, q.DedupKey, p)
		}
	}
	rows, err := list(ctx, p)
	if err != nil {
		return MessagePage{}, fmt.Errorf("oncepush: list messages: %w", err)
	}
	var page MessagePage
	for i, m := range rows {
		if i == q.Limit {
			last := rows[q.Limit-1]
			page.Next = encodeMessageCursor(last.CreatedAt, last.ID)
			break
		}
		page.Messages = append(page.Messages, storedMessage(m))
	}
	return page, nil
}

// A message cursor is the creation time (Unix µs) and id of the last
// message of a page, opaque to callers.
func encodeMessageCursor(at time.Time, id int64) string {
	b := binary.BigEndian.AppendUint64(nil, uint64(at.UnixMicro()))
	return base64.RawURLEncoding.EncodeToString(binary.BigEndian.AppendUint64(b, uint64(id)))
}

func decodeMessageCursor(s string) (time.Time, int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return time.Time{}, 0, false
	}
	id := int64(binary.BigEndian.Uint64(b[8:]))
	return time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))).UTC(), id, id > 0
}

// messagesByDedupKey is MessageList over the messages sent under key: a
// handful (a key names one request, or a few before it was freed), so they
// are read whole and p's filters, order and cursor applied here.
func (c *Client[TTx]) messagesByDedupKey(ctx context.Context, key string, p *driver.MessageListParams) ([]*driver.Message, error) {
	ex := c.driver.Exec()
	ids, err := ex.MessageIDsByDedupKey(ctx, key)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	ms, err := ex.MessageGetMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	keep := ms[:0]
	for _, m := range ms {
		switch {
		case p.Category != "" && m.Category != p.Category,
			p.CreatedFrom != nil && m.CreatedAt.Before(*p.CreatedFrom),
			p.CreatedTo != nil && !m.CreatedAt.Before(*p.CreatedTo),
			p.BeforeAt != nil && !messageBefore(m, *p.BeforeAt, p.BeforeID):
			continue
		}
		if p.Status != "" {
			counts, err := ex.DeliveryCountByStatus(ctx, m.ID)
			if err != nil {
				return nil, err
			}
			if p.Status == driver.MessageDone && counts[driver.StatusPending] > 0 ||
				p.Status != driver.MessageDone && counts[p.Status] == 0 {
				continue
			}
		}
		keep = append(keep, m)
	}
	slices.SortFunc(keep, func(a, b *driver.Message) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	return keep[:min(len(keep), p.Limit)], nil
}

// messageBefore reports whether m comes after the cursor (at, id) in the
// list's order: created earlier, or at the same instant with a smaller id.
func messageBefore(m *driver.Message, at time.Time, id int64) bool {
	return m.CreatedAt.Before(at) || (m.CreatedAt.Equal(at) && m.ID < id)
}
