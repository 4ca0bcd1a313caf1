package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/api"
)

// notificationRequest is the body of POST /v1/notifications.
// The api tags say what the document's schema says (see decode); the json
// encoding of the decoded request is its identity for dedupeKey.
type notificationRequest struct {
	Recipients  *[]string      `json:"recipients,omitempty"`
	Type        string         `json:"type,omitempty"`
	Title       string         `json:"title,omitempty"`
	Body        string         `json:"body,omitempty"`
	Data        map[string]any `json:"data,omitempty" api:"nullable"`
	Link        *string        `json:"link,omitempty"`
	Image       *string        `json:"image,omitempty"`
	Category    string         `json:"category,omitempty"`
	DedupeKey   string         `json:"dedupeKey,omitempty"`
	ScheduledAt *string        `json:"scheduledAt,omitempty" api:"nullable"`
	TTLSeconds  *json.Number   `json:"ttlSeconds,omitempty" api:"nullable"`
	Ambiguity   *string        `json:"ambiguity,omitempty"`

	// Devices, for a direct send, or Recipients: exactly one (addressees).
	// Pointers, so that an empty list is present: it is refused, not taken
	// for the other.
	Devices *[]deviceAddress `json:"devices,omitempty"`
}

// sendAnswer is the 202 body; a replay adds duplicate: true.
type sendAnswer struct {
	ID         int64 `json:"id"`
	Queued     int   `json:"queued"`
	Duplicates int   `json:"duplicates"`
	Duplicate  bool  `json:"duplicate"`
}

// The library's field names where the API spells them differently.
var apiFieldNames = map[string]string{"lifetime": "ttlSeconds", "dedupKey": "dedupeKey", "cursor": "cursor", "status": "status"}

func (s *Server[TTx]) postNotification(w http.ResponseWriter, r *http.Request) error {
	var req notificationRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	recipients, devices, err := s.addressees(&req)
	if err != nil {
		return err
	}
	key := req.DedupeKey
	if h := r.Header.Get("Idempotency-Key"); h != "" {
		if key != "" && key != h {
			return fieldProblem(CodeInvalidField, "dedupeKey", "differs from the Idempotency-Key header; send one, or the same in both")
		}
		key = h
	}
	req.DedupeKey = key
	if err := presentMeansSet(namedText{"link", req.Link}, namedText{"image", req.Image}, namedText{"ambiguity", req.Ambiguity}); err != nil {
		return err
	}
	msg := oncepush.Message{
		Type: req.Type, Title: req.Title, Body: req.Body, Data: req.Data, Link: deref(req.Link), Image: deref(req.Image),
	}
	opts := &oncepush.SendOptions{DedupKey: key, Category: req.Category, Ambiguity: oncepush.AmbiguityPolicy(deref(req.Ambiguity))}
	if req.ScheduledAt != nil {
		t, err := parseDateTime("scheduledAt", *req.ScheduledAt)
		if err != nil {
			return err
		}
		if t.IsZero() {
			// An instant like any other, long past, never "none" (the
			// library's zero): the library would send it now. Refused
			// with a key too — unlike another past time, whose request
			// may be a retry of one written earlier, no request can have
			// written this one.
			return fieldProblem(CodeInvalidField, "scheduledAt",
				"0001-01-01T00:00:00Z is so far in the past that its lifetime has ended: give a later time, or none (now)")
		}
		opts.ScheduledAt = t
	}
	if p := s.overloaded(opts.ScheduledAt); p != nil {
		return p
	}
	if opts.Lifetime, err = ttlSeconds(req.TTLSeconds); err != nil {
		return err
	}

	// A keyed request records itself: its identity is what it would write,
	// defaults applied (Client.RequestHash), computed by the send as it
	// validates it, so neither spelling nor an explicit default makes
	// another request.
	opts.RecordRequest = key != ""
	// One atomic write: the message, its deliveries and the request's record.
	res, err := s.send(r.Context(), recipients, devices, msg, opts)
	if errors.Is(err, oncepush.ErrDedupConflict) {
		p := problem(http.StatusConflict, CodeIdempotencyConflict,
			"this dedupeKey was used with a different request; use a new key for a new notification")
		p.Field = "dedupeKey"
		return p
	}
	if err != nil {
		return renameField(err)
	}
	return replyJSON(w, http.StatusAccepted, sendAnswer{ID: res.MessageID, Queued: res.Queued, Duplicates: res.Duplicates, Duplicate: res.Replayed})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// namedText is an optional text field of a request and its API name.
type namedText struct {
	name string
	v    *string
}

// presentMeansSet refuses an optional field given as "": the schema's
// pattern or enum takes no empty string, and leaving it out says none.
func presentMeansSet(fields ...namedText) error {
	for _, f := range fields {
		if f.v != nil && *f.v == "" {
			return fieldProblem(CodeInvalidField, f.name, "must not be empty; leave the field out for none")
		}
	}
	return nil
}

// wholeNumber reads an integer in JSON Schema's sense (60.0 is 60); ok is
// false for a fraction. A number beyond a float's range is infinite, for
// the caller's bounds to refuse.
func wholeNumber(n json.Number) (v float64, ok bool) {
	v, err := strconv.ParseFloat(n.String(), 64)
	if (err != nil && !errors.Is(err, strconv.ErrRange)) || v != math.Trunc(v) {
		return 0, false
	}
	return v, true
}

// ttlSeconds reads the ttlSeconds field, the API's lifetime: a whole,
// positive number of seconds up to MaxLifetime; 0 (the server's default)
// when absent or null.
func ttlSeconds(n *json.Number) (time.Duration, error) {
	if n == nil {
		return 0, nil
	}
	secs, ok := wholeNumber(*n)
	const most = int64(oncepush.MaxLifetime / time.Second)
	switch {
	case !ok:
		return 0, fieldProblem(CodeInvalidField, "ttlSeconds", "must be a whole number of seconds")
	case secs <= 0:
		return 0, fieldProblem(CodeInvalidField, "ttlSeconds", "must be a positive number of seconds")
	case secs > float64(most):
		return 0, fieldProblem(CodeInvalidField, "ttlSeconds", fmt.Sprintf("must be at most %d (28 days)", most))
	}
	return time.Duration(secs) * time.Second, nil
}

// renameField gives a library validation error the API's field name.
func renameField(err error) error { return renameFieldBy(err, apiFieldNames) }

// renameFieldBy gives a library validation error the field name that names
// maps it to, when it maps it.
func renameFieldBy(err error, names map[string]string) error {
	var ve *oncepush.ValidationError
	if errors.As(err, &ve) {
		if name, ok := names[ve.Field]; ok {
			return fieldProblem(CodeInvalidField, name, ve.Message)
		}
	}
	return err
}

// notificationView is GET /v1/notifications/{id}.
type notificationView struct {
	notificationSummary
	Data              json.RawMessage `json:"data"` // as stored: numbers keep their digits
	Link              string          `json:"link"`
	Image             string          `json:"image"`
	AmbiguousAttempts int             `json:"ambiguousAttempts"`
}

func (s *Server[TTx]) getNotification(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	m, err := s.message(r.Context(), id)
	if err != nil {
		return err
	}
	sum, err := s.summarize(r.Context(), m)
	if err != nil {
		return err
	}
	amb, err := s.client.AmbiguousAttempts(r.Context(), id)
	if err != nil {
		return err
	}
	v := notificationView{
		notificationSummary: sum, Link: m.Link, Image: m.Image, AmbiguousAttempts: amb, Data: json.RawMessage(`{}`),
	}
	if len(m.Data) > 0 {
		if !json.Valid(m.Data) {
			return fmt.Errorf("stored data of message %d is not JSON", id)
		}
		v.Data = m.Data
	}
	return replyJSON(w, http.StatusOK, v)
}

// The answers' delivery types are the API's wire format (package api),
// which Go clients of the API decode too.
type (
	deliveryView = api.Delivery
	attemptView  = api.DeviceAttempt
	deliveryPage = api.DeliveryPage
)

// viewDelivery is a delivery as the API answers it; m is its notification
// (nil: one no longer stored, whose type and title are left empty).
func viewDelivery(d oncepush.Delivery, m *oncepush.StoredMessage) deliveryView {
	v := deliveryView{
		ID: d.ID, NotificationID: d.MessageID, Recipient: d.Recipient, OncepushID: d.NotificationID, DedupeKey: d.DedupKey,
		Status: string(d.Status), Attempts: d.Attempts, LastError: d.LastError, CreatedAt: d.CreatedAt.UTC(),
		FinishedAt: utcPtr(d.FinishedAt), MayHaveReachedTwice: d.MayHaveReachedTwice(), Devices: []attemptView{},
	}
	if m != nil {
		v.Type, v.Title = m.Type, m.Title
	}
	if d.Status == oncepush.StatusPending {
		next := d.NextAttemptAt.UTC()
		v.NextAttemptAt = &next
	}
	for _, a := range d.Devices {
		v.Devices = append(v.Devices, attemptView{
			DeviceID: a.DeviceID, Transport: string(a.Transport), State: string(a.State), Submissions: a.Submissions,
			Ambiguous: a.Ambiguous, ReachedAtMost: a.ReachedAtMost(), ProviderID: a.ProviderID, Error: a.Error, FirstSentAt: utcPtr(a.FirstSentAt),
			LastSentAt: utcPtr(a.LastSentAt), UpdatedAt: a.UpdatedAt.UTC(),
		})
	}
	return v
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// deliveryPage is a page of deliveries.

// message reads a message, answering 404 for one that does not exist.
func (s *Server[TTx]) message(ctx context.Context, id int64) (*oncepush.StoredMessage, error) {
	m, err := s.client.Message(ctx, id)
	if errors.Is(err, oncepush.ErrNotFound) {
		return nil, problem(http.StatusNotFound, CodeNotFound, fmt.Sprintf("no notification %d", id))
	}
	return m, err
}

// notificationSummary is an item of GET /v1/notifications: the content
// without the data, where it stands and its deliveries by status (GET
// /v1/notifications/{id}, the notificationView, adds the rest).
type notificationSummary struct {
	ID          int64     `json:"id"`
	Type        string    `json:"type"`
	Title       string    `json:"title"`
	Body        string    `json:"body"`
	Category    string    `json:"category"`
	Ambiguity   string    `json:"ambiguity"`
	ScheduledAt time.Time `json:"scheduledAt"`
	ExpiresAt   time.Time `json:"expiresAt"`
	CreatedAt   time.Time `json:"createdAt"`
	// Status is "pending" while a delivery is, else "done".
	Status string         `json:"status"`
	Counts map[string]int `json:"counts"`
}

// summarize reads the message's delivery counts (one indexed read of its
// deliveries) and makes its summary.
func (s *Server[TTx]) summarize(ctx context.Context, m *oncepush.StoredMessage) (notificationSummary, error) {
	counts, err := s.client.DeliveryCounts(ctx, m.ID)
	if err != nil {
		return notificationSummary{}, err
	}
	v := notificationSummary{
		ID: m.ID, Type: m.Type, Title: m.Title, Body: m.Body, Category: m.Category, Ambiguity: string(m.Ambiguity),
		ScheduledAt: m.ScheduledAt.UTC(), ExpiresAt: m.ExpiresAt.UTC(), CreatedAt: m.CreatedAt.UTC(),
		Status: string(oncepush.MessageDone), Counts: map[string]int{},
	}
	for _, st := range oncepush.DeliveryStatuses() {
		v.Counts[string(st)] = counts[st]
	}
	if counts[oncepush.StatusPending] > 0 {
		v.Status = string(oncepush.MessagePending)
	}
	return v, nil
}

type notificationPage struct {
	Notifications []notificationSummary `json:"notifications"`
	NextCursor    *string               `json:"nextCursor"`
}

func (s *Server[TTx]) listNotifications(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	limit, err := pageLimit(v)
	if err != nil {
		return err
	}
	status, err := statusParam(v, true)
	if err != nil {
		return err
	}
	q := oncepush.MessageQuery{
		Status: oncepush.MessageStatus(status), Category: v.Get("category"), DedupKey: v.Get("dedupeKey"),
		Cursor: v.Get("cursor"), Limit: limit,
	}
	for _, t := range []struct {
		name string
		to   *time.Time
	}{{"createdFrom", &q.CreatedFrom}, {"createdTo", &q.CreatedTo}} {
		if raw := v.Get(t.name); raw != "" {
			at, err := parseDateTime(t.name, raw)
			if err != nil {
				return err
			}
			*t.to = at
		}
	}
	if v.Get("createdTo") != "" && q.CreatedTo.IsZero() {
		// Created before the zero instant, which the library would read
		// as no bound: nothing was.
		return replyJSON(w, http.StatusOK, notificationPage{Notifications: []notificationSummary{}})
	}
	page, err := s.client.Messages(r.Context(), q)
	if err != nil {
		return renameField(err)
	}
	out := notificationPage{Notifications: []notificationSummary{}}
	for _, m := range page.Messages {
		sum, err := s.summarize(r.Context(), m)
		if err != nil {
			return err
		}
		out.Notifications = append(out.Notifications, sum)
	}
	if page.Next != "" {
		out.NextCursor = &page.Next
	}
	return replyJSON(w, http.StatusOK, out)
}

// cancelView is the answer to a cancel.
type cancelView struct {
	ID       int64 `json:"id"`
	Canceled int   `json:"canceled"`
	InFlight int   `json:"inFlight"`
}

func (s *Server[TTx]) cancelNotification(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := noBody(r); err != nil {
		return err
	}
	res, err := s.client.CancelMessage(r.Context(), id)
	if errors.Is(err, oncepush.ErrNotFound) {
		return problem(http.StatusNotFound, CodeNotFound, fmt.Sprintf("no notification %d", id))
	}
	var ce *oncepush.CampaignMessageError
	if errors.As(err, &ce) {
		// Canceling the notification alone would leave its campaign writing
		// deliveries of it; the campaign's cancel stops both, under the
		// campaign's own scope (D100).
		return problem(http.StatusConflict, CodeCampaignMessage, fmt.Sprintf(
			"notification %d is campaign %d's: cancel the campaign with POST /v1/campaigns/%d/cancel (scope campaigns), which also stops its expansion; nothing was canceled",
			id, ce.CampaignID, ce.CampaignID))
	}
	if err != nil {
		return err
	}
	return replyJSON(w, http.StatusOK, cancelView{ID: id, Canceled: res.Canceled, InFlight: res.InFlight})
}

func (s *Server[TTx]) listNotificationDeliveries(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if _, err := s.message(r.Context(), id); err != nil {
		return err
	}
	return s.writeDeliveryPage(w, r, func(ctx context.Context, after int64, n int) ([]oncepush.Delivery, error) {
		return s.client.MessageDeliveries(ctx, id, after, n)
	})
}

func (s *Server[TTx]) listRecipientDeliveries(w http.ResponseWriter, r *http.Request) error {
	recipient, err := pathRecipient(r)
	if err != nil {
		return err
	}
	return s.writeDeliveryPage(w, r, func(ctx context.Context, before int64, n int) ([]oncepush.Delivery, error) {
		return s.client.RecipientDeliveries(ctx, recipient, before, n)
	})
}

// statusScanMax bounds the deliveries one page with ?status= reads: a page
// holds the matching deliveries among at most this many after its cursor,
// so a page of a large fan-out answers in bounded time, and may hold fewer
// than asked (even none) with a cursor to go on.
const statusScanMax = 2000

// writeDeliveryPage answers the page of deliveries that ?cursor=, ?limit=
// and ?status= ask for; list reads n deliveries from the cursor (0: from
// the start).
func (s *Server[TTx]) writeDeliveryPage(w http.ResponseWriter, r *http.Request, list func(ctx context.Context, cursor int64, n int) ([]oncepush.Delivery, error)) error {
	cursor, limit, err := pageParams(r)
	if err != nil {
		return err
	}
	status, err := statusParam(r.URL.Query(), false)
	if err != nil {
		return err
	}
	var ds []oncepush.Delivery
	var next int64
	if status == "" {
		if ds, err = list(r.Context(), cursor, limit+1); err != nil {
			return err
		}
		if len(ds) > limit {
			ds, next = ds[:limit], ds[limit-1].ID
		}
	} else if ds, next, err = deliveriesIn(r.Context(), list, oncepush.DeliveryStatus(status), cursor, limit); err != nil {
		return err
	}
	p := deliveryPage{Deliveries: []deliveryView{}}
	if next != 0 {
		c := encodeCursor(deliveryCursor, next)
		p.NextCursor = &c
	}
	msgs, err := s.messagesOf(r.Context(), ds)
	if err != nil {
		return err
	}
	for _, d := range ds {
		p.Deliveries = append(p.Deliveries, viewDelivery(d, msgs[d.MessageID]))
	}
	return replyJSON(w, http.StatusOK, p)
}

// deliveriesIn reads from the cursor until it has limit deliveries in the
// status, the list ends, or it has read statusScanMax; next is the cursor
// after the last delivery read, 0 when the list ended.
func deliveriesIn(ctx context.Context, list func(ctx context.Context, cursor int64, n int) ([]oncepush.Delivery, error),
	status oncepush.DeliveryStatus, cursor int64, limit int,
) (kept []oncepush.Delivery, next int64, err error) {
	const chunk = 250
	for read := 0; read < statusScanMax; {
		n := min(chunk, statusScanMax-read)
		ds, err := list(ctx, cursor, n)
		if err != nil {
			return nil, 0, err
		}
		for _, d := range ds {
			read++
			cursor = d.ID
			if d.Status != status {
				continue
			}
			if kept = append(kept, d); len(kept) == limit {
				return kept, cursor, nil
			}
		}
		if len(ds) < n {
			return kept, 0, nil
		}
	}
	return kept, cursor, nil
}

// messagesOf reads the notifications of the deliveries, by id, in one read.
func (s *Server[TTx]) messagesOf(ctx context.Context, ds []oncepush.Delivery) (map[int64]*oncepush.StoredMessage, error) {
	var ids []int64
	for _, d := range ds {
		if !slices.Contains(ids, d.MessageID) {
			ids = append(ids, d.MessageID)
		}
	}
	ms, err := s.client.MessagesByID(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]*oncepush.StoredMessage, len(ms))
	for _, m := range ms {
		out[m.ID] = m
	}
	return out, nil
}

// statusParam reads ?status=: a delivery status, or "" when absent; with
// done, also "done" (no delivery pending), which only the notifications
// list takes. An unknown value is refused naming the parameter and the
// values it takes.
func statusParam(q url.Values, done bool) (string, error) {
	v := q.Get("status")
	if v == "" {
		return "", nil
	}
	var names []string
	if done {
		names = append(names, string(oncepush.MessageDone))
	}
	for _, st := range oncepush.DeliveryStatuses() {
		names = append(names, string(st))
	}
	if !slices.Contains(names, v) {
		return "", fieldProblem(CodeInvalidField, "status", fmt.Sprintf("must be one of %s; got %q", strings.Join(names, ", "), v))
	}
	return v, nil
}

// Page sizes.
const (
	pageLimitDefault = 100
	pageLimitMax     = 1000
)

// pageLimit reads ?limit=: pageLimitDefault when absent.
func pageLimit(q url.Values) (int, error) { return limitParam(q, pageLimitDefault, pageLimitMax) }

// limitParam reads ?limit=, from 1 to most: def when absent.
func limitParam(q url.Values, def, most int) (int, error) {
	l := q.Get("limit")
	if l == "" {
		return def, nil
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 1 || n > most {
		return 0, fieldProblem(CodeInvalidField, "limit", fmt.Sprintf("must be a number from 1 to %d", most))
	}
	return n, nil
}

// pageParams reads ?cursor= and ?limit=.
func pageParams(r *http.Request) (cursor int64, limit int, err error) {
	q := r.URL.Query()
	if limit, err = pageLimit(q); err != nil {
		return 0, 0, err
	}
	if c := q.Get("cursor"); c != "" {
		if cursor, err = decodeCursor(deliveryCursor, c); err != nil {
			return 0, 0, fieldProblem(CodeInvalidField, "cursor", "is not a cursor this API returned")
		}
	}
	return cursor, limit, nil
}

// Cursors are opaque to clients: a letter saying what the list is ("d"
// deliveries, "c" campaigns) + the last id seen, base64url, so that one
// list's cursor is refused by another.
const (
	deliveryCursor = "d"
	campaignCursor = "c"
)

func encodeCursor(kind string, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(kind + strconv.FormatInt(id, 10)))
}

func decodeCursor(kind, c string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, err
	}
	s, ok := strings.CutPrefix(string(b), kind)
	if !ok {
		return 0, fmt.Errorf("not a cursor of kind %q", kind)
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("not a cursor of kind %q", kind)
	}
	return id, nil
}

func pathID(r *http.Request, name string) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, fieldProblem(CodeInvalidField, name, "must be a positive integer")
	}
	return id, nil
}

// pathRecipient is the {recipient} of the path, checked as the library checks
// recipients before it reaches a query.
func pathRecipient(r *http.Request) (string, error) {
	rec := r.PathValue("recipient")
	if err := oncepush.ValidateRecipient(rec); err != nil {
		return "", err
	}
	return rec, nil
}
