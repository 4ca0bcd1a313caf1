package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/oncepush/oncepush"
)

// The campaign routes: /v1/campaigns… over Client.CreateCampaign and the
// calls beside it. A campaign is the engine's (docs/architecture.md,
// "Campaigns"); these handlers decode, call the client once and say what
// its errors mean over HTTP: a status that does not allow the operation is
// 409 campaign_state, a page number reused with other recipients 409
// campaign_page_conflict, a field at fault 400 named as the body spells it.

// campaignRequest is the body of POST /v1/campaigns and PUT
// /v1/campaigns/{id}: the whole spec, which an update replaces.
type campaignRequest struct {
	Name          string          `json:"name,omitempty"`
	Message       campaignMessage `json:"message" api:"required"`
	Category      string          `json:"category,omitempty"`
	TTLSeconds    *json.Number    `json:"ttlSeconds,omitempty" api:"nullable"`
	Ambiguity     *string         `json:"ambiguity,omitempty"`
	Audience      string          `json:"audience" api:"required"`
	Filter        deviceFilter    `json:"filter"`
	RatePerMinute *json.Number    `json:"ratePerMinute,omitempty"`
	LocalTime     *localTime      `json:"localTime,omitempty"`
}

// localTime is oncepush.LocalTime on the wire.
type localTime struct {
	Date        string `json:"date" api:"required"`
	Time        string `json:"time" api:"required"`
	DefaultZone string `json:"defaultZone,omitempty"`
}

// campaignMessage is what a campaign sends, as a notification's fields.
type campaignMessage struct {
	Type  string         `json:"type,omitempty"`
	Title string         `json:"title,omitempty"`
	Body  string         `json:"body,omitempty"`
	Data  map[string]any `json:"data,omitempty" api:"nullable"`
	Link  *string        `json:"link,omitempty"`
	Image *string        `json:"image,omitempty"`
}

// deviceFilter is oncepush.DeviceFilter on the wire.
type deviceFilter struct {
	Transports []string `json:"transports,omitempty"`
	Platforms  []string `json:"platforms,omitempty"`
	Locales    []string `json:"locales,omitempty"`
	Tags       []string `json:"tags,omitempty"`
}

// campaignFieldNames are the library's field names where a campaign's body
// nests or spells them otherwise; the rest ("name", "audience",
// "filter.tags[1]", "ratePerMinute") are the body's already.
var campaignFieldNames = map[string]string{
	"type": "message.type", "title": "message.title", "body": "message.body", "data": "message.data",
	"link": "message.link", "image": "message.image", "lifetime": "ttlSeconds",
}

// spec checks what the library cannot see (empty optional strings, the
// numbers' ranges) and returns the request as a CampaignSpec.
func (req *campaignRequest) spec() (oncepush.CampaignSpec, error) {
	if err := presentMeansSet(namedText{"message.link", req.Message.Link}, namedText{"message.image", req.Message.Image},
		namedText{"ambiguity", req.Ambiguity}); err != nil {
		return oncepush.CampaignSpec{}, err
	}
	lifetime, err := ttlSeconds(req.TTLSeconds)
	if err != nil {
		return oncepush.CampaignSpec{}, err
	}
	rate := 0
	if req.RatePerMinute != nil {
		n, ok := wholeNumber(*req.RatePerMinute)
		if !ok || n < 0 || n > oncepush.MaxRatePerMinute {
			return oncepush.CampaignSpec{}, fieldProblem(CodeInvalidField, "ratePerMinute",
				fmt.Sprintf("must be a whole number from 0 (no pacing) to %d", oncepush.MaxRatePerMinute))
		}
		rate = int(n)
	}
	m := req.Message
	spec := oncepush.CampaignSpec{
		Name:      req.Name,
		Message:   oncepush.Message{Type: m.Type, Title: m.Title, Body: m.Body, Data: m.Data, Link: deref(m.Link), Image: deref(m.Image)},
		Category:  req.Category,
		Lifetime:  lifetime,
		Ambiguity: oncepush.AmbiguityPolicy(deref(req.Ambiguity)),
		Audience:  oncepush.Audience(req.Audience),
		Filter: oncepush.DeviceFilter{
			Platforms: req.Filter.Platforms, Locales: req.Filter.Locales, Tags: req.Filter.Tags,
		},
		RatePerMinute: rate,
	}
	if l := req.LocalTime; l != nil {
		spec.LocalTime = &oncepush.LocalTime{Date: l.Date, Time: l.Time, DefaultZone: l.DefaultZone}
	}
	for _, t := range req.Filter.Transports {
		spec.Filter.Transports = append(spec.Filter.Transports, oncepush.Transport(t))
	}
	return spec, nil
}

// campaignView is a campaign as the API answers it. Totals are read only
// for GET /v1/campaigns/{id}, Cancel only answers a cancel; every other
// answer has null.
type campaignView struct {
	ID            int64               `json:"id"`
	Name          string              `json:"name"`
	Status        string              `json:"status"`
	Message       campaignMessageView `json:"message"`
	Category      string              `json:"category"`
	TTLSeconds    *int64              `json:"ttlSeconds"`
	Ambiguity     *string             `json:"ambiguity"`
	Audience      string              `json:"audience"`
	Filter        filterView          `json:"filter"`
	RatePerMinute int                 `json:"ratePerMinute"`
	LocalTime     *localTime          `json:"localTime"`
	StartAt       *time.Time          `json:"startAt"`
	// NotificationID is the campaign's message, once started: GET
	// /v1/notifications/{id}/deliveries lists its deliveries.
	NotificationID  *int64 `json:"notificationId"`
	Cursor          string `json:"cursor"`
	Recipients      int64  `json:"recipients"`
	Written         int64  `json:"written"`
	MalformedTokens int64  `json:"malformedTokens"`
	DuplicateTokens int64  `json:"duplicateTokens"`
	// NotWritten counts, by reason, the recipients passed without a
	// delivery; Expanded is Written plus their total (D155).
	NotWritten campaignNotWritten `json:"notWritten"`
	Expanded   int64              `json:"expanded"`
	Tries      int                `json:"tries"`
	LastError  string             `json:"lastError"`
	CreatedAt  time.Time          `json:"createdAt"`
	UpdatedAt  time.Time          `json:"updatedAt"`
	StartedAt  *time.Time         `json:"startedAt"`
	FinishedAt *time.Time         `json:"finishedAt"`
	Totals     *campaignTotals    `json:"totals"`
	// Cancel is what POST /v1/campaigns/{id}/cancel ended, in its answer
	// only; null in every other.
	Cancel *campaignCancel `json:"cancel"`
}

// campaignCancel is what a campaign's cancel ended, as a notification's
// cancel answers it.
type campaignCancel struct {
	Canceled int `json:"canceled"`
	InFlight int `json:"inFlight"`
}

type campaignMessageView struct {
	Type  string          `json:"type"`
	Title string          `json:"title"`
	Body  string          `json:"body"`
	Data  json.RawMessage `json:"data"` // as stored: numbers keep their digits
	Link  string          `json:"link"`
	Image string          `json:"image"`
}

type filterView struct {
	Transports []string `json:"transports"`
	Platforms  []string `json:"platforms"`
	Locales    []string `json:"locales"`
	Tags       []string `json:"tags"`
}

// campaignNotWritten is oncepush.CampaignNotWritten on the wire.
type campaignNotWritten struct {
	NoDevice        int64 `json:"noDevice"`
	FilteredOut     int64 `json:"filteredOut"`
	MalformedTokens int64 `json:"malformedTokens"`
	DuplicateTokens int64 `json:"duplicateTokens"`
	Total           int64 `json:"total"`
}

// campaignTotals are oncepush.CampaignTotals on the wire.
type campaignTotals struct {
	Queued            int `json:"queued"`
	Sent              int `json:"sent"`
	Failed            int `json:"failed"`
	Skipped           int `json:"skipped"`
	Expired           int `json:"expired"`
	Ambiguous         int `json:"ambiguous"`
	NoDevices         int `json:"noDevices"`
	Canceled          int `json:"canceled"`
	Accepted          int `json:"accepted"`
	InvalidTokens     int `json:"invalidTokens"`
	Rejected          int `json:"rejected"`
	AmbiguousAttempts int `json:"ambiguousAttempts"`
}

func viewCampaign(c *oncepush.Campaign) (campaignView, error) {
	v := campaignView{
		ID: c.ID, Name: c.Name, Status: string(c.Status), Category: c.Category, Audience: string(c.Audience),
		RatePerMinute: c.RatePerMinute, Cursor: c.Cursor, Recipients: c.Recipients, Written: c.Written,
		MalformedTokens: c.MalformedTokens, DuplicateTokens: c.DuplicateTokens, Tries: c.Tries, LastError: c.LastError,
		NotWritten: campaignNotWritten{
			NoDevice: c.NotWritten.NoDevice, FilteredOut: c.NotWritten.FilteredOut,
			MalformedTokens: c.NotWritten.MalformedTokens, DuplicateTokens: c.NotWritten.DuplicateTokens,
			Total: c.NotWritten.Total(),
		},
		Expanded:  c.Written + c.NotWritten.Total(),
		CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC(),
		StartAt: utcUnlessZero(c.StartAt), StartedAt: utcUnlessZero(c.StartedAt), FinishedAt: utcUnlessZero(c.FinishedAt),
		Message: campaignMessageView{
			Type: c.Message.Type, Title: c.Message.Title, Body: c.Message.Body, Link: c.Message.Link, Image: c.Message.Image,
			Data: json.RawMessage(`{}`),
		},
		Filter: filterView{
			Platforms: orEmpty(c.Filter.Platforms), Locales: orEmpty(c.Filter.Locales), Tags: orEmpty(c.Filter.Tags),
			Transports: []string{},
		},
	}
	for _, t := range c.Filter.Transports {
		v.Filter.Transports = append(v.Filter.Transports, string(t))
	}
	if l := c.LocalTime; l != nil {
		v.LocalTime = &localTime{Date: l.Date, Time: l.Time, DefaultZone: l.DefaultZone}
	}
	if c.Lifetime > 0 {
		secs := int64(c.Lifetime / time.Second)
		v.TTLSeconds = &secs
	}
	if c.Ambiguity != "" {
		a := string(c.Ambiguity)
		v.Ambiguity = &a
	}
	if id := c.MessageID; id != 0 {
		v.NotificationID = &id
	}
	if len(c.Message.Data) > 0 {
		data, err := json.Marshal(c.Message.Data)
		if err != nil {
			return v, fmt.Errorf("encode the data of campaign %d: %w", c.ID, err)
		}
		v.Message.Data = data
	}
	if cr := c.Cancel; cr != nil {
		v.Cancel = &campaignCancel{Canceled: cr.Canceled, InFlight: cr.InFlight}
	}
	if t := c.Totals; t != nil {
		v.Totals = &campaignTotals{
			Queued: t.Queued, Sent: t.Sent, Failed: t.Failed, Skipped: t.Skipped, Expired: t.Expired, Ambiguous: t.Ambiguous,
			NoDevices: t.NoDevices, Canceled: t.Canceled, Accepted: t.Accepted, InvalidTokens: t.InvalidTokens,
			Rejected: t.Rejected, AmbiguousAttempts: t.AmbiguousAttempts,
		}
	}
	return v, nil
}

func utcUnlessZero(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// writeCampaign answers a campaign with status.
func writeCampaign(w http.ResponseWriter, status int, c *oncepush.Campaign) error {
	v, err := viewCampaign(c)
	if err != nil {
		return err
	}
	return replyJSON(w, status, v)
}

// allowedIn says, for each operation a status can refuse, which statuses
// allow it: the detail of a 409 campaign_state.
var allowedIn = map[string]string{
	"update":   "only a draft can be updated",
	"upload":   "recipients are uploaded while it is a draft or scheduled",
	"schedule": "only a draft or a scheduled campaign can be scheduled",
	"start":    "only a draft or a scheduled campaign can be started",
	"resume":   "only an interrupted campaign can be resumed",
}

// campaignProblem says what the client's error means for campaign id over
// HTTP; errors it does not know pass as they are.
func campaignProblem(id int64, err error) error {
	var se *oncepush.CampaignStateError
	switch {
	case errors.Is(err, oncepush.ErrNotFound):
		return problem(http.StatusNotFound, CodeNotFound, fmt.Sprintf("no campaign %d", id))
	case errors.As(err, &se):
		return problem(http.StatusConflict, CodeCampaignState, fmt.Sprintf("campaign %d is %s: %s", id, se.Status, allowedIn[se.Op]))
	case errors.Is(err, oncepush.ErrCampaignPageConflict):
		return problem(http.StatusConflict, CodeCampaignPageConflict,
			"this page number was uploaded before with other recipients; nothing was written: upload them under a new number")
	}
	return renameFieldBy(err, campaignFieldNames)
}

// decodeCampaign reads a campaign's body into its spec.
func (s *Server[TTx]) decodeCampaign(w http.ResponseWriter, r *http.Request) (oncepush.CampaignSpec, error) {
	var req campaignRequest
	if err := s.decode(w, r, &req); err != nil {
		return oncepush.CampaignSpec{}, err
	}
	return req.spec()
}

func (s *Server[TTx]) postCampaign(w http.ResponseWriter, r *http.Request) error {
	spec, err := s.decodeCampaign(w, r)
	if err != nil {
		return err
	}
	c, err := s.client.CreateCampaign(r.Context(), spec)
	if err != nil {
		return campaignProblem(0, err)
	}
	w.Header().Set("Location", "/v1/campaigns/"+strconv.FormatInt(c.ID, 10))
	return writeCampaign(w, http.StatusCreated, c)
}

func (s *Server[TTx]) putCampaign(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	spec, err := s.decodeCampaign(w, r)
	if err != nil {
		return err
	}
	c, err := s.client.UpdateCampaign(r.Context(), id, spec)
	if err != nil {
		return campaignProblem(id, err)
	}
	return writeCampaign(w, http.StatusOK, c)
}

func (s *Server[TTx]) getCampaign(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	c, err := s.client.Campaign(r.Context(), id)
	if err != nil {
		return campaignProblem(id, err)
	}
	return writeCampaign(w, http.StatusOK, c)
}

type campaignPage struct {
	Campaigns  []campaignView `json:"campaigns"`
	NextCursor *string        `json:"nextCursor"`
}

// Campaign list pages: the client's bounds (CampaignQuery.Limit).
const (
	campaignLimitDefault = 50
	campaignLimitMax     = 500
)

func (s *Server[TTx]) listCampaigns(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	limit, err := limitParam(v, campaignLimitDefault, campaignLimitMax)
	if err != nil {
		return err
	}
	q := oncepush.CampaignQuery{Status: oncepush.CampaignStatus(v.Get("status")), Limit: limit}
	if c := v.Get("cursor"); c != "" {
		if q.Before, err = decodeCursor(campaignCursor, c); err != nil {
			return fieldProblem(CodeInvalidField, "cursor", "is not a cursor this API returned")
		}
	}
	list, err := s.client.Campaigns(r.Context(), q)
	if err != nil {
		return renameField(err)
	}
	out := campaignPage{Campaigns: []campaignView{}}
	for i := range list.Campaigns {
		cv, err := viewCampaign(&list.Campaigns[i])
		if err != nil {
			return err
		}
		out.Campaigns = append(out.Campaigns, cv)
	}
	if list.Next != 0 {
		next := encodeCursor(campaignCursor, list.Next)
		out.NextCursor = &next
	}
	return replyJSON(w, http.StatusOK, out)
}

// recipientsRequest is the body of PUT /v1/campaigns/{id}/recipients/{page}.
type recipientsRequest struct {
	Recipients []string `json:"recipients" api:"required"`
}

// pageAnswer is what an uploaded page added.
type pageAnswer struct {
	Added    int  `json:"added"`
	Replayed bool `json:"replayed"`
}

func (s *Server[TTx]) putCampaignRecipients(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	page, err := strconv.ParseInt(r.PathValue("page"), 10, 32)
	if err != nil || page < 1 {
		return fieldProblem(CodeInvalidField, "page", "must be a page number from 1")
	}
	var req recipientsRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	res, err := s.client.AddCampaignRecipients(r.Context(), id, int(page), req.Recipients)
	var ve *oncepush.ValidationError
	if errors.As(err, &ve) && ve.Field == "audience" {
		// The campaign sends to registered devices: nothing is uploaded to
		// it, whatever the page holds.
		return problem(http.StatusConflict, CodeCampaignState, ve.Message)
	}
	if err != nil {
		return campaignProblem(id, err)
	}
	return replyJSON(w, http.StatusOK, pageAnswer{Added: res.Added, Replayed: res.Replayed})
}

// scheduleRequest is the body of POST /v1/campaigns/{id}/schedule.
type scheduleRequest struct {
	StartAt string `json:"startAt" api:"required"`
}

func (s *Server[TTx]) scheduleCampaign(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var req scheduleRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	at, err := parseDateTime("startAt", req.StartAt)
	if err != nil {
		return err
	}
	if at.IsZero() {
		// The library's "no time": say what to send instead.
		return fieldProblem(CodeInvalidField, "startAt",
			"0001-01-01T00:00:00Z cannot be told from no time here: give a later time (one in the past starts the campaign at once)")
	}
	c, err := s.client.ScheduleCampaign(r.Context(), id, at)
	if err != nil {
		return campaignProblem(id, err)
	}
	return writeCampaign(w, http.StatusOK, c)
}

func (s *Server[TTx]) startCampaign(w http.ResponseWriter, r *http.Request) error {
	return s.campaignAction(w, r, func(ctx context.Context, id int64) (*oncepush.Campaign, error) {
		c, err := s.client.StartCampaign(ctx, id)
		var ve *oncepush.ValidationError
		if errors.As(err, &ve) {
			// The content was valid when stored; the server's configuration
			// changed since (a category no longer declared). Nothing in this
			// request is at fault, so not a 400.
			return nil, problem(http.StatusConflict, CodeCampaignState, fmt.Sprintf(
				"campaign %d can no longer be sent (%s: %s): update it while it is a draft, or cancel it", id, ve.Field, ve.Message))
		}
		return c, err
	})
}

func (s *Server[TTx]) cancelCampaign(w http.ResponseWriter, r *http.Request) error {
	return s.campaignAction(w, r, s.client.CancelCampaign)
}

func (s *Server[TTx]) resumeCampaign(w http.ResponseWriter, r *http.Request) error {
	return s.campaignAction(w, r, s.client.ResumeCampaign)
}

// campaignAction serves a bodiless operation on campaign {id}.
func (s *Server[TTx]) campaignAction(w http.ResponseWriter, r *http.Request,
	act func(ctx context.Context, id int64) (*oncepush.Campaign, error),
) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := noBody(r); err != nil {
		return err
	}
	c, err := act(r.Context(), id)
	if err != nil {
		return campaignProblem(id, err)
	}
	return writeCampaign(w, http.StatusOK, c)
}
