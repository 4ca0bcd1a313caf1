package oncepush

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/oncepush/oncepush/driver"
	"github.com/oncepush/oncepush/internal/enginetest"
	"github.com/oncepush/oncepush/internal/wallclock"
)

// A campaign sends one message to an audience that may be millions of
// devices: an uploaded list of recipients, or every registered device a
// filter selects. Starting it writes its message; the campaign loop of any
// started client then expands it into one delivery per recipient, in
// bounded batches, each committing the cursor with the deliveries it wrote,
// so a crash resumes where the last batch ended and no recipient gets two.
// See docs/architecture.md, "Campaigns".

// CampaignStatus is where a campaign is in its life.
type CampaignStatus string

const (
	// CampaignDraft: created, editable; its audience may be uploaded.
	CampaignDraft CampaignStatus = driver.CampaignDraft
	// CampaignScheduled: starts at its StartAt; its audience may still be
	// uploaded.
	CampaignScheduled CampaignStatus = driver.CampaignScheduled
	// CampaignSending: started; its deliveries are being written.
	CampaignSending CampaignStatus = driver.CampaignSending
	// CampaignCompleted: every delivery is written (its totals say how many
	// are still queued).
	CampaignCompleted CampaignStatus = driver.CampaignCompleted
	// CampaignInterrupted: the expansion failed Config.CampaignMaxTries
	// times in a row; ResumeCampaign goes on from the cursor.
	CampaignInterrupted CampaignStatus = driver.CampaignInterrupted
	// CampaignCanceled: final; nothing more of it is submitted.
	CampaignCanceled CampaignStatus = driver.CampaignCanceled
)

// CampaignSpec is what a campaign sends and to whom: what CreateCampaign
// takes and UpdateCampaign replaces.
type CampaignSpec struct {
	// Name is the operator's label, optional (at most 200 bytes).
	Name string
	// Message is the content, checked as Send checks it.
	Message Message
	// Category, Lifetime and Ambiguity are SendOptions' (the lifetime runs
	// from the campaign's start).
	Category  string
	Lifetime  time.Duration
	Ambiguity AmbiguityPolicy
	// Audience is who receives it; Filter narrows it to the devices it
	// selects.
	Audience Audience
	Filter   DeviceFilter
	// RatePerMinute paces the campaign: its deliveries fall due at this
	// rate from its start. 0: as fast as the workers go.
	RatePerMinute int
	// LocalTime, when set, sends each recipient's delivery at a date and
	// wall-clock time in the recipient's time zone. Not with RatePerMinute.
	LocalTime *LocalTime
}

// LocalTime is a wall-clock moment in each recipient's own time zone: the
// zone of the most recently registered device the campaign reaches that
// has one (Device.TimeZone), else DefaultZone. On a day the clocks spring
// forward, a time in the gap is sent just after it; a time that occurs
// twice is sent at its first occurrence. A zone whose moment has passed
// when its delivery is written is sent at once.
type LocalTime struct {
	// Date is the calendar day, "2027-03-28".
	Date string `json:"date"`
	// Time is the wall-clock time, "09:00".
	Time string `json:"time"`
	// DefaultZone is the IANA zone of recipients whose devices have none;
	// "" means UTC.
	DefaultZone string `json:"defaultZone,omitempty"`
}

// localZoneSpan is how far apart the first and the last time zone's
// reading of one wall-clock moment can be (UTC+14 to UTC-12).
const localZoneSpan = 26 * time.Hour

// instant is the moment in loc (Date and Time are checked). A wall-clock
// time that occurs twice (clocks set back) is its first occurrence; one
// that does not occur (clocks set forward) is read with the offset before
// the change, which lands as far after the gap as it is into it (02:30 in
// a gap from 02:00 to 03:00 is 03:30). time.Date promises neither.
func (l *LocalTime) instant(loc *time.Location) time.Time {
	d, _ := time.Parse(time.DateOnly, l.Date)
	c, _ := time.Parse("15:04", l.Time)
	wall := time.Date(d.Year(), d.Month(), d.Day(), c.Hour(), c.Minute(), 0, 0, time.UTC)
	// The offsets in force a day either side: a change of offset on the
	// day itself is between them.
	_, before := wall.Add(-24 * time.Hour).In(loc).Zone()
	_, after := wall.Add(24 * time.Hour).In(loc).Zone()
	var first time.Time
	for _, off := range []int{before, after} {
		t := wall.Add(-time.Duration(off) * time.Second)
		local := t.In(loc)
		if local.Day() == wall.Day() && local.Hour() == wall.Hour() && local.Minute() == wall.Minute() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if first.IsZero() { // in the gap
		first = wall.Add(-time.Duration(before) * time.Second)
	}
	return first
}

// zone returns the location of name, or of the default when name is ""
// or unknown.
func (l *LocalTime) zone(name string) *time.Location {
	for _, n := range []string{name, l.DefaultZone} {
		if n == "" {
			continue
		}
		if loc, err := time.LoadLocation(n); err == nil && n != "Local" {
			return loc
		}
	}
	return time.UTC
}

func (l *LocalTime) check() error {
	if _, err := time.Parse(time.DateOnly, l.Date); err != nil {
		return invalid("localTime.date", "%q is not a date such as 2027-03-28", l.Date)
	}
	// Two digits each, as the API's document has it: time.Parse alone
	// takes "9:00".
	if _, err := time.Parse("15:04", l.Time); err != nil || len(l.Time) != len("15:04") {
		return invalid("localTime.time", "%q is not a time of day HH:MM such as 09:00", l.Time)
	}
	if l.DefaultZone != "" {
		if _, err := time.LoadLocation(l.DefaultZone); err != nil || l.DefaultZone == "Local" {
			return invalid("localTime.defaultZone", "%q is not an IANA time zone", l.DefaultZone)
		}
	}
	return nil
}

// Campaign is a stored campaign.
type Campaign struct {
	ID int64
	CampaignSpec
	Status CampaignStatus
	// StartAt is when a scheduled campaign starts.
	StartAt time.Time
	// MessageID is the campaign's message, written when it starts.
	MessageID int64
	// Cursor is the last recipient whose delivery is written.
	Cursor string
	// Recipients is the size of the uploaded audience.
	Recipients int64
	// Written is the number of deliveries written.
	Written int64
	// MalformedTokens counts the devices the expansion left out because
	// their token is not well formed for its transport; DuplicateTokens the
	// devices left out because another device with the same token was
	// targeted: by the expansion, in one batch, and (read by
	// Client.Campaign, with the totals) when the token had moved to another
	// recipient and another delivery of the campaign had reached it.
	MalformedTokens, DuplicateTokens int64
	// NotWritten counts the recipients the expansion passed without
	// writing them a delivery, by reason: Written plus NotWritten.Total()
	// is the audience the expansion has passed (all of it once completed).
	NotWritten CampaignNotWritten
	// Tries counts the expansion tries begun since the last batch that
	// committed; LastError is the last failure's text.
	Tries     int
	LastError string

	CreatedAt, UpdatedAt, StartedAt, FinishedAt time.Time

	// Totals are filled by Client.Campaign.
	Totals *CampaignTotals
	// Cancel is what CancelCampaign ended, on its answer only: the
	// deliveries it canceled and how many of them had a send in flight,
	// which may still reach their devices (as CancelMessage reports).
	Cancel *CancelResult
}

// CampaignNotWritten counts the recipients of a campaign's audience that
// its expansion wrote no delivery for, each under the first reason that
// applies, as the batch that passed them decided (D155). A recipient who
// was written a delivery and then opted out, or lost its devices, is
// counted in the totals instead (Skipped, NoDevices).
type CampaignNotWritten struct {
	// NoDevice: the recipient had no registered device.
	NoDevice int64
	// FilteredOut: it had devices, and the filter selected none.
	FilteredOut int64
	// MalformedTokens: the filter selected some, and the token of every
	// one is malformed for its transport.
	MalformedTokens int64
	// DuplicateTokens: every well-formed token it had was already another
	// recipient's target in the same batch (the same token registered
	// under two spellings): the campaign reaches a token once.
	DuplicateTokens int64
}

// Total is the number of recipients not written.
func (n CampaignNotWritten) Total() int64 {
	return n.NoDevice + n.FilteredOut + n.MalformedTokens + n.DuplicateTokens
}

// CampaignTotals count a campaign's deliveries and device attempts, as the
// database tallies them with the ledger's rows. They count what happened:
// deliveries that retention or a recipient's deletion removed after they
// finished are still counted; a pending one removed leaves Queued.
type CampaignTotals struct {
	// Deliveries by status: queued (pending), sent, failed, skipped,
	// expired, ambiguous, no devices, canceled.
	Queued, Sent, Failed, Skipped, Expired, Ambiguous, NoDevices, Canceled int
	// Attempts by device: accepted by their provider, refused as invalid
	// tokens (the device is deleted), refused otherwise, ambiguous at least
	// once.
	Accepted, InvalidTokens, Rejected, AmbiguousAttempts int
}

// CampaignQuery selects a page of campaigns, newest first.
type CampaignQuery struct {
	// Status, when set, keeps campaigns in it.
	Status CampaignStatus
	// Before is the cursor: campaigns with ids below it (0: from the newest).
	Before int64
	// Limit is the page's size: 1 to 500, default 50.
	Limit int
}

// CampaignList is a page of campaigns.
type CampaignList struct {
	Campaigns []Campaign
	// Next is the Before of the next page; 0 at the end.
	Next int64
}

// CampaignPageAdded says what an uploaded page added.
type CampaignPageAdded struct {
	// Added is the number of recipients new to the audience.
	Added int
	// Replayed: the page was uploaded before with the same recipients;
	// nothing was written.
	Replayed bool
}

// Campaign limits.
const (
	// MaxCampaignPage is the most recipients one uploaded page holds.
	MaxCampaignPage = 10000
	// MaxFilterValues is the most values of each of a filter's lists.
	MaxFilterValues = 32
	// MaxRatePerMinute bounds CampaignSpec.RatePerMinute.
	MaxRatePerMinute = 10_000_000
)

var (
	// ErrCampaignState: the operation does not apply to the campaign in its
	// status (a *CampaignStateError says which).
	ErrCampaignState = errors.New("oncepush: the campaign's status does not allow this")
	// ErrCampaignPageConflict: the page number was uploaded before with
	// other recipients; nothing was written.
	ErrCampaignPageConflict = errors.New("oncepush: campaign page number already holds other recipients")
)

// CampaignStateError is ErrCampaignState with the status found.
type CampaignStateError struct {
	ID     int64
	Status CampaignStatus
	// Op is what was refused: "update", "upload", "schedule", "start",
	// "resume".
	Op string
}

func (e *CampaignStateError) Error() string {
	return fmt.Sprintf("oncepush: cannot %s campaign %d: it is %s", e.Op, e.ID, e.Status)
}

// Is makes errors.Is(err, ErrCampaignState) hold.
func (e *CampaignStateError) Is(target error) bool { return target == ErrCampaignState }

// campaignContent is the message and options a campaign stores: its
// content column, read back and checked again when it starts.
type campaignContent struct {
	Type      string          `json:"type,omitempty"`
	Title     string          `json:"title,omitempty"`
	Body      string          `json:"body,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Link      string          `json:"link,omitempty"`
	Image     string          `json:"image,omitempty"`
	Category  string          `json:"category,omitempty"`
	Lifetime  time.Duration   `json:"lifetime,omitempty"`
	Ambiguity AmbiguityPolicy `json:"ambiguity,omitempty"`
	LocalTime *LocalTime      `json:"localTime,omitempty"`
}

// campaignParts is a checked spec as the driver stores it.
type campaignParts struct {
	content []byte
	filter  []byte
}

// checkCampaign validates a spec completely, as prepare does a send, and
// returns it encoded.
func (c *clientCore) checkCampaign(s *CampaignSpec) (*campaignParts, error) {
	if err := checkText("name", s.Name); err != nil {
		return nil, err
	}
	if len(s.Name) > maxSmallField {
		return nil, invalid("name", "must be at most %d bytes", maxSmallField)
	}
	if err := c.prepareContent(&prepared{}, &s.Message, s.sendOptions()); err != nil {
		return nil, err
	}
	switch s.Audience {
	case AudienceRecipients, AudienceDevices:
	case "":
		return nil, invalid("audience", "must be %q or %q", AudienceRecipients, AudienceDevices)
	default:
		return nil, invalid("audience", "%q is neither %q nor %q", s.Audience, AudienceRecipients, AudienceDevices)
	}
	if s.RatePerMinute < 0 || s.RatePerMinute > MaxRatePerMinute {
		return nil, invalid("ratePerMinute", "must be between 0 (no pacing) and %d", MaxRatePerMinute)
	}
	if s.LocalTime != nil {
		if err := s.LocalTime.check(); err != nil {
			return nil, err
		}
		if s.RatePerMinute != 0 {
			return nil, invalid("localTime", "cannot be combined with ratePerMinute: each sets when the deliveries fall due")
		}
		if s.Lifetime > MaxLifetime-localZoneSpan {
			return nil, invalid("lifetime", "with a local time, at most %s (the zones' readings of it span %s)", MaxLifetime-localZoneSpan, localZoneSpan)
		}
		// The message lives from the first zone's reading to the last
		// one's plus the lifetime (startLocked): that must be writable.
		first := s.LocalTime.instant(time.FixedZone("UTC+14", 14*3600))
		if first.After(latestTime.Add(-(cmp.Or(s.Lifetime, c.cfg.MessageLifetime) + localZoneSpan))) {
			return nil, invalid("localTime.date", "%s %s in the last time zone (UTC-12), with the lifetime, would end after %s, the latest time RFC 3339 writes",
				s.LocalTime.Date, s.LocalTime.Time, LatestTime)
		}
	}
	f, err := c.checkFilter(s.Filter)
	if err != nil {
		return nil, err
	}
	s.Filter = f
	content := campaignContent{
		Type: s.Message.Type, Title: s.Message.Title, Body: s.Message.Body, Link: s.Message.Link,
		Image: s.Message.Image, Category: s.Category, Lifetime: s.Lifetime, Ambiguity: s.Ambiguity,
		LocalTime: s.LocalTime,
	}
	if s.Message.Data != nil {
		if content.Data, err = json.Marshal(s.Message.Data); err != nil {
			return nil, invalid("data", "cannot be encoded: %v", err)
		}
	}
	parts := &campaignParts{}
	if parts.content, err = json.Marshal(content); err != nil {
		return nil, fmt.Errorf("oncepush: encode campaign: %w", err)
	}
	if parts.filter, err = json.Marshal(f); err != nil {
		return nil, fmt.Errorf("oncepush: encode campaign filter: %w", err)
	}
	return parts, nil
}

func (s *CampaignSpec) sendOptions() *SendOptions {
	return &SendOptions{Category: s.Category, Lifetime: s.Lifetime, Ambiguity: s.Ambiguity}
}

// --- the operations

// CreateCampaign stores a campaign as a draft. The spec is checked as a
// send is: a *ValidationError names the field.
func (c *Client[TTx]) CreateCampaign(ctx context.Context, spec CampaignSpec) (*Campaign, error) {
	parts, err := c.checkCampaign(&spec)
	if err != nil {
		return nil, err
	}
	row := &driver.Campaign{
		Name: spec.Name, Status: driver.CampaignDraft, Content: parts.content, Audience: string(spec.Audience),
		Filter: parts.filter, RatePerMinute: spec.RatePerMinute,
	}
	if now := c.now(); now != nil { // the client's clock when it has one, as for every other time
		row.CreatedAt = *now
	}
	row, err = c.driver.Exec().CampaignInsert(ctx, row)
	if err != nil {
		return nil, fmt.Errorf("oncepush: create campaign: %w", err)
	}
	return campaignFromRow(row)
}

// UpdateCampaign replaces a draft's spec; a campaign in any other status
// is refused with a *CampaignStateError.
func (c *Client[TTx]) UpdateCampaign(ctx context.Context, id int64, spec CampaignSpec) (*Campaign, error) {
	parts, err := c.checkCampaign(&spec)
	if err != nil {
		return nil, err
	}
	return c.changeCampaign(ctx, id, "update", func(_ context.Context, _ driver.Executor, row *driver.Campaign) error {
		if row.Status != driver.CampaignDraft {
			return &CampaignStateError{ID: id, Status: CampaignStatus(row.Status), Op: "update"}
		}
		row.Name, row.Content, row.Audience, row.Filter = spec.Name, parts.content, string(spec.Audience), parts.filter
		row.RatePerMinute = spec.RatePerMinute
		return nil
	})
}

// AddCampaignRecipients adds a page of recipients (at most
// MaxCampaignPage) to the audience of a campaign whose Audience is
// AudienceRecipients, while it is a draft or scheduled. Pages are numbered
// by the caller from 1; a page uploaded again with the same recipients (in
// any order) writes nothing and answers Replayed, so an upload is safe to
// retry, and one with other recipients under a number already used is
// refused with ErrCampaignPageConflict. A recipient in several pages is in
// the audience once.
func (c *Client[TTx]) AddCampaignRecipients(ctx context.Context, id int64, page int, recipients []string) (CampaignPageAdded, error) {
	if page < 1 || page > math.MaxInt32 {
		return CampaignPageAdded{}, invalid("page", "must be a number from 1")
	}
	if len(recipients) == 0 {
		return CampaignPageAdded{}, invalid("recipients", "must name at least one recipient")
	}
	if len(recipients) > MaxCampaignPage {
		return CampaignPageAdded{}, invalid("recipients", "has %d entries, at most %d per page", len(recipients), MaxCampaignPage)
	}
	for i, r := range recipients {
		if err := validateRecipient(fmt.Sprintf("recipients[%d]", i), r); err != nil {
			return CampaignPageAdded{}, err
		}
	}
	if err := refuseImplicitIn("recipients", recipients); err != nil {
		return CampaignPageAdded{}, err
	}
	distinct := slices.Clone(recipients)
	slices.Sort(distinct)
	distinct = slices.Compact(distinct)
	h := sha256.New()
	for _, r := range distinct {
		h.Write([]byte(r))
		h.Write([]byte{0})
	}
	var out CampaignPageAdded
	enginetest.From(ctx).CampaignLocking(id)
	err := c.driver.InTx(ctx, func(ctx context.Context, _ TTx, ex driver.Executor) error {
		row, err := c.lockCampaign(ctx, ex, id)
		if err != nil {
			return err
		}
		if row.Audience != driver.AudienceRecipients {
			return invalid("audience", "campaign %d sends to %s, not to uploaded recipients", id, row.Audience)
		}
		if row.Status != driver.CampaignDraft && row.Status != driver.CampaignScheduled {
			return &CampaignStateError{ID: id, Status: CampaignStatus(row.Status), Op: "upload"}
		}
		out.Added, out.Replayed, err = ex.CampaignPageAdd(ctx, &driver.CampaignPageParams{
			CampaignID: id, Page: page, Digest: h.Sum(nil), Recipients: distinct,
		})
		if errors.Is(err, driver.ErrPageConflict) {
			return ErrCampaignPageConflict
		}
		return err
	})
	return out, c.campaignErr("upload campaign recipients", err)
}

// ScheduleCampaign sets a draft or scheduled campaign to start at at; the
// campaign loop of whichever started client finds it due first starts it,
// once.
func (c *Client[TTx]) ScheduleCampaign(ctx context.Context, id int64, at time.Time) (*Campaign, error) {
	if at.IsZero() {
		return nil, invalid("startAt", "must be a time")
	}
	if at.Before(earliestTime) {
		return nil, invalid("startAt", "%s is before %s, the earliest time RFC 3339 writes", at.UTC().Format(time.RFC3339), EarliestTime)
	}
	return c.changeCampaign(ctx, id, "schedule", func(_ context.Context, _ driver.Executor, row *driver.Campaign) error {
		if row.Status != driver.CampaignDraft && row.Status != driver.CampaignScheduled {
			return &CampaignStateError{ID: id, Status: CampaignStatus(row.Status), Op: "schedule"}
		}
		// Started at at, its message must expire by LatestTime, as a
		// send's must (a local time's own reach was checked when stored).
		spec, err := specFromRow(row)
		if err != nil {
			return err
		}
		lifetime := cmp.Or(spec.Lifetime, c.cfg.MessageLifetime)
		if spec.LocalTime != nil {
			lifetime += localZoneSpan
		}
		if err := endsInTime("startAt", at, lifetime); err != nil {
			return err
		}
		row.Status, row.StartAt = driver.CampaignScheduled, &at
		return nil
	})
}

// StartCampaign starts a draft or scheduled campaign now: it writes the
// campaign's message and moves it to sending, in one transaction holding
// the campaign's row lock, so of two starters only one proceeds; the other
// gets a *CampaignStateError (it found the campaign sending). The started
// clients' campaign loops then write its deliveries.
func (c *Client[TTx]) StartCampaign(ctx context.Context, id int64) (*Campaign, error) {
	out, err := c.changeCampaign(ctx, id, "start", func(ctx context.Context, ex driver.Executor, row *driver.Campaign) error {
		if row.Status != driver.CampaignDraft && row.Status != driver.CampaignScheduled {
			return &CampaignStateError{ID: id, Status: CampaignStatus(row.Status), Op: "start"}
		}
		return c.startLocked(ctx, ex, row)
	})
	if err == nil {
		c.wakeCampaigns()
	}
	return out, err
}

// startLocked starts a campaign whose row the transaction holds: it
// writes its message, with no delivery, and sets row sending (for the
// caller to save).
func (c *clientCore) startLocked(ctx context.Context, ex driver.Executor, row *driver.Campaign) error {
	spec, err := specFromRow(row)
	if err != nil {
		return err
	}
	p := &prepared{}
	opts := spec.sendOptions()
	if l := spec.LocalTime; l != nil {
		// The message lives from the earliest reading of the moment (its
		// zone the first to reach it) for the lifetime, plus the span to
		// the last zone's reading.
		earliest := l.instant(time.FixedZone("UTC+14", 14*3600))
		if now := c.clockNow(); earliest.Before(now) {
			earliest = now
		}
		opts.ScheduledAt = earliest
		opts.Lifetime = cmp.Or(spec.Lifetime, c.cfg.MessageLifetime) + localZoneSpan
	}
	if err := c.prepareContent(p, &spec.Message, opts); err != nil {
		// The content was checked when stored; a configuration changed
		// since (a category no longer declared, say) refuses it now.
		return fmt.Errorf("oncepush: campaign %d can no longer be sent: %w", row.ID, err)
	}
	params := c.insertParams(p, &spec.Message, opts)
	params.Audience = row.Filter
	msgID, _, err := ex.MessageInsert(ctx, params)
	if err != nil {
		return fmt.Errorf("oncepush: write campaign message: %w", err)
	}
	msg, err := ex.MessageGet(ctx, msgID)
	if err != nil {
		return fmt.Errorf("oncepush: read campaign message: %w", err)
	}
	row.Status, row.MessageID, row.StartedAt = driver.CampaignSending, msgID, &msg.CreatedAt
	row.Tries, row.Cursor = 0, ""
	return nil
}

// CancelCampaign cancels a campaign in any status: it stops its expansion
// and ends its pending deliveries canceled, in one transaction holding the
// campaign's row lock. Once it returns, no submission of the campaign
// starts; sends already handed to a provider may finish, and the answer's
// Cancel counts them. Canceling a canceled campaign changes nothing.
func (c *Client[TTx]) CancelCampaign(ctx context.Context, id int64) (*Campaign, error) {
	var ended CancelResult
	out, err := c.changeCampaign(ctx, id, "cancel", func(ctx context.Context, ex driver.Executor, row *driver.Campaign) error {
		ended = CancelResult{}
		if row.Status == driver.CampaignCanceled {
			return nil
		}
		row.Status = driver.CampaignCanceled
		row.FinishedAt = c.nowOr(row.UpdatedAt)
		if row.MessageID == 0 {
			return nil
		}
		res, err := ex.MessageCancel(ctx, &driver.MessageCancelParams{Now: c.now(), MessageID: row.MessageID, CampaignID: row.ID})
		if err != nil {
			return err
		}
		ended = CancelResult{Canceled: res.Canceled, InFlight: res.InFlight}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for range ended.Canceled {
		c.obs.Finished(StatusCanceled)
	}
	out.Cancel = &ended
	return out, nil
}

// ResumeCampaign sends an interrupted campaign on from its cursor, with its
// tries counted from 0.
func (c *Client[TTx]) ResumeCampaign(ctx context.Context, id int64) (*Campaign, error) {
	out, err := c.changeCampaign(ctx, id, "resume", func(_ context.Context, _ driver.Executor, row *driver.Campaign) error {
		if row.Status != driver.CampaignInterrupted {
			return &CampaignStateError{ID: id, Status: CampaignStatus(row.Status), Op: "resume"}
		}
		row.Status, row.Tries = driver.CampaignSending, 0
		return nil
	})
	if err == nil {
		c.wakeCampaigns()
	}
	return out, err
}

// Campaign returns a campaign with its totals, or ErrNotFound. The totals
// are the tally the database keeps with the campaign's delivery and
// device-attempt rows, in the transactions that change them (D95): a few
// rows read, however large the campaign.
func (c *Client[TTx]) Campaign(ctx context.Context, id int64) (*Campaign, error) {
	ex := c.driver.Exec()
	row, err := ex.CampaignGet(ctx, id)
	if err != nil {
		return nil, c.campaignErr("read campaign", err)
	}
	out, err := campaignFromRow(row)
	if err != nil {
		return nil, err
	}
	out.Totals = &CampaignTotals{}
	if row.MessageID == 0 {
		return out, nil
	}
	tally, err := ex.CampaignTally(ctx, row.MessageID)
	if err != nil {
		return nil, fmt.Errorf("oncepush: read campaign totals: %w", err)
	}
	out.Totals = totalsFromTally(tally)
	// Tokens the claim found reached through another delivery of the
	// campaign, after moving between recipients (D107).
	out.DuplicateTokens += int64(tally[tallyAttempt+driver.AttemptDuplicate])
	return out, nil
}

// totalsFromTally reads CampaignTally's states.
func totalsFromTally(n map[string]int) *CampaignTotals {
	return &CampaignTotals{
		Queued: n[driver.StatusPending], Sent: n[driver.StatusSent], Failed: n[driver.StatusFailed],
		Skipped: n[driver.StatusSkipped], Expired: n[driver.StatusExpired], Ambiguous: n[driver.StatusAmbiguous],
		NoDevices: n[driver.StatusNoDevices], Canceled: n[driver.StatusCanceled],
		Accepted: n[tallyAttempt+driver.AttemptAccepted], InvalidTokens: n[tallyAttempt+driver.AttemptInvalid],
		Rejected: n[tallyAttempt+driver.AttemptRejected], AmbiguousAttempts: n[tallyAttempt+driver.AttemptAmbiguous],
	}
}

// tallyAttempt prefixes the tally's attempt states (migration 7).
const tallyAttempt = "attempt:"

// Campaigns returns a page of campaigns, newest first, without totals.
func (c *Client[TTx]) Campaigns(ctx context.Context, q CampaignQuery) (CampaignList, error) {
	switch {
	case q.Limit == 0:
		q.Limit = 50
	case q.Limit < 1 || q.Limit > 500:
		return CampaignList{}, invalid("limit", "must be between 1 and 500")
	}
	if q.Before < 0 {
		return CampaignList{}, invalid("before", "must not be negative")
	}
	if q.Before == 0 {
		q.Before = math.MaxInt64
	}
	switch q.Status {
	case "", CampaignDraft, CampaignScheduled, CampaignSending, CampaignCompleted, CampaignInterrupted, CampaignCanceled:
	default:
		return CampaignList{}, invalid("status", "%q is not a campaign status", q.Status)
	}
	rows, err := c.driver.Exec().CampaignList(ctx, &driver.CampaignListParams{Status: string(q.Status), BeforeID: q.Before, Limit: q.Limit + 1})
	if err != nil {
		return CampaignList{}, fmt.Errorf("oncepush: list campaigns: %w", err)
	}
	var out CampaignList
	for i, r := range rows {
		if i == q.Limit {
			out.Next = rows[i-1].ID
			break
		}
		cp, err := campaignFromRow(r)
		if err != nil {
			return CampaignList{}, err
		}
		out.Campaigns = append(out.Campaigns, *cp)
	}
	return out, nil
}

// changeCampaign locks a campaign, lets change edit it (or refuse, or
// write what goes with the change, in the same transaction), and saves it.
func (c *Client[TTx]) changeCampaign(ctx context.Context, id int64, op string,
	change func(context.Context, driver.Executor, *driver.Campaign) error,
) (*Campaign, error) {
	var row *driver.Campaign
	enginetest.From(ctx).CampaignLocking(id)
	err := c.againOnConflict(ctx, op+" campaign", func() error {
		return c.driver.InTx(ctx, func(ctx context.Context, _ TTx, ex driver.Executor) error {
			var err error
			if row, err = c.lockCampaign(ctx, ex, id); err != nil {
				return err
			}
			if err := change(ctx, ex, row); err != nil {
				return err
			}
			return ex.CampaignSave(ctx, row, c.now())
		})
	})
	if err != nil {
		return nil, c.campaignErr(op+" campaign", err)
	}
	return campaignFromRow(row)
}

// lockCampaign locks a campaign's row in the transaction, and calls the
// test hook that holds it there.
func (c *clientCore) lockCampaign(ctx context.Context, ex driver.Executor, id int64) (*driver.Campaign, error) {
	row, err := ex.CampaignLock(ctx, id)
	if err != nil {
		return nil, err
	}
	enginetest.From(ctx).CampaignLocked(id, row.Status)
	return row, nil
}

// campaignErr passes the errors callers test for as they are and wraps the
// rest.
func (c *clientCore) campaignErr(op string, err error) error {
	var ve *ValidationError
	var se *CampaignStateError
	switch {
	case err == nil, errors.Is(err, ErrNotFound), errors.Is(err, ErrCampaignPageConflict), errors.As(err, &ve), errors.As(err, &se):
		return err
	default:
		return fmt.Errorf("oncepush: %s: %w", op, err)
	}
}

// nowOr is the injected clock's time, or fallback (the database's last
// word on the row) when the client has none.
func (c *clientCore) nowOr(fallback time.Time) *time.Time {
	if n := c.now(); n != nil {
		return n
	}
	t := wallclock.Now()
	if t.Before(fallback) {
		t = fallback
	}
	return &t
}

func specFromRow(r *driver.Campaign) (*CampaignSpec, error) {
	var content campaignContent
	if err := json.Unmarshal(r.Content, &content); err != nil {
		return nil, fmt.Errorf("oncepush: read campaign %d: %w", r.ID, err)
	}
	s := &CampaignSpec{
		Name: r.Name, Category: content.Category, Lifetime: content.Lifetime, Ambiguity: content.Ambiguity,
		Audience: Audience(r.Audience), RatePerMinute: r.RatePerMinute, LocalTime: content.LocalTime,
		Message: Message{Type: content.Type, Title: content.Title, Body: content.Body, Link: content.Link, Image: content.Image},
	}
	if content.Data != nil {
		dec := json.NewDecoder(bytes.NewReader(content.Data))
		dec.UseNumber() // digits as they were given
		if err := dec.Decode(&s.Message.Data); err != nil {
			return nil, fmt.Errorf("oncepush: read campaign %d data: %w", r.ID, err)
		}
	}
	if r.Filter != nil {
		if err := json.Unmarshal(r.Filter, &s.Filter); err != nil {
			return nil, fmt.Errorf("oncepush: read campaign %d filter: %w", r.ID, err)
		}
	}
	return s, nil
}

func campaignFromRow(r *driver.Campaign) (*Campaign, error) {
	spec, err := specFromRow(r)
	if err != nil {
		return nil, err
	}
	out := &Campaign{
		ID: r.ID, CampaignSpec: *spec, Status: CampaignStatus(r.Status), MessageID: r.MessageID, Cursor: r.Cursor,
		Recipients: r.Recipients, Written: r.Written, MalformedTokens: r.InvalidTokens, DuplicateTokens: r.DuplicateTokens,
		NotWritten: CampaignNotWritten{
			NoDevice: r.NoDevice, FilteredOut: r.FilteredOut, MalformedTokens: r.MalformedOnly, DuplicateTokens: r.DuplicateOnly,
		},
		Tries: r.Tries, LastError: r.LastError, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
	for _, t := range []struct {
		to   *time.Time
		from *time.Time
	}{{&out.StartAt, r.StartAt}, {&out.StartedAt, r.StartedAt}, {&out.FinishedAt, r.FinishedAt}} {
		if t.from != nil {
			*t.to = *t.from
		}
	}
	return out, nil
}
