package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/oncepush/oncepush"
)

// tokenField accepts a device token as a JSON string, or — for Web Push — the
// browser's PushSubscription object itself.
type tokenField string

func (t *tokenField) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*t = tokenField(s)
		return nil
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return errors.New("must be a string, or a Web Push subscription object")
	}
	*t = tokenField(b)
	return nil
}

type deviceRequest struct {
	Transport string     `json:"transport" api:"required"`
	Token     tokenField `json:"token" api:"required"`
	Platform  string     `json:"platform,omitempty"`
	Session   string     `json:"session,omitempty"`
	Locale    string     `json:"locale,omitempty"`
	TimeZone  string     `json:"timeZone,omitempty"`
	// Tags replace the device's: none given, none kept.
	Tags []string `json:"tags,omitempty"`
}

// deviceView shows a device with its token masked.
type deviceView struct {
	ID           int64     `json:"id"`
	Recipient    string    `json:"recipient"`
	Transport    string    `json:"transport"`
	Token        string    `json:"token"`
	Platform     string    `json:"platform"`
	Session      string    `json:"session"`
	Locale       string    `json:"locale"`
	TimeZone     string    `json:"timeZone"`
	Tags         []string  `json:"tags"`
	CreatedAt    time.Time `json:"createdAt"`
	RegisteredAt time.Time `json:"registeredAt"`
}

func viewDevice(d oncepush.Device) deviceView {
	return deviceView{
		ID: d.ID, Recipient: d.Recipient, Transport: string(d.Transport), Token: oncepush.MaskToken(string(d.Token)),
		Platform: d.Platform, Session: d.Session, Locale: d.Locale, TimeZone: d.TimeZone, Tags: orEmpty(d.Tags),
		CreatedAt: d.CreatedAt.UTC(), RegisteredAt: d.RegisteredAt.UTC(),
	}
}

// orEmpty is a list as the API answers it: [] for none, never null.
func orEmpty[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

func (s *Server[TTx]) putDevice(w http.ResponseWriter, r *http.Request) error {
	recipient, err := pathRecipient(r)
	if err != nil {
		return err
	}
	var req deviceRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	d, err := s.client.RegisterDevice(r.Context(), oncepush.Device{
		Recipient: recipient, Transport: oncepush.Transport(req.Transport), Token: oncepush.Token(req.Token),
		Platform: req.Platform, Session: req.Session, Locale: req.Locale, TimeZone: req.TimeZone, Tags: req.Tags,
	})
	if err != nil {
		return err
	}
	return replyJSON(w, http.StatusOK, viewDevice(*d))
}

type devicePage struct {
	Devices    []deviceView `json:"devices"`
	NextCursor *string      `json:"nextCursor"`
}

// listDevices: a recipient has at most MaxDevicesPerRecipient devices, so the
// list is one page; nextCursor is always null.
func (s *Server[TTx]) listDevices(w http.ResponseWriter, r *http.Request) error {
	recipient, err := pathRecipient(r)
	if err != nil {
		return err
	}
	if _, _, err := pageParams(r); err != nil {
		return err
	}
	ds, err := s.client.Devices(r.Context(), recipient)
	if err != nil {
		return err
	}
	p := devicePage{Devices: []deviceView{}}
	for _, d := range ds {
		p.Devices = append(p.Devices, viewDevice(d))
	}
	return replyJSON(w, http.StatusOK, p)
}

type lookupRequest struct {
	Transport string     `json:"transport" api:"required"`
	Token     tokenField `json:"token" api:"required"`
}

// lookupDevice answers the registration of a token, masked, or 404. The
// token is in the body, never in the URL (docs/decisions.md D73).
func (s *Server[TTx]) lookupDevice(w http.ResponseWriter, r *http.Request) error {
	var req lookupRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	d, err := s.client.DeviceByToken(r.Context(), oncepush.Transport(req.Transport), oncepush.Token(req.Token))
	if errors.Is(err, oncepush.ErrNotFound) {
		return problem(http.StatusNotFound, CodeNotFound, "no device is registered with this token")
	}
	if err != nil {
		return err
	}
	return replyJSON(w, http.StatusOK, viewDevice(*d))
}

type unregisterRequest struct {
	Transport string     `json:"transport" api:"required"`
	Token     tokenField `json:"token" api:"required"`
	// Recipient, when set, removes the registration only if it is theirs.
	Recipient string `json:"recipient,omitempty"`
}

// deleteDevice answers 204 whether the token was registered, someone else's or
// absent: the answer says nothing about other people's devices.
func (s *Server[TTx]) deleteDevice(w http.ResponseWriter, r *http.Request) error {
	var req unregisterRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	return noContent(w, s.client.UnregisterDevice(r.Context(), req.Recipient, oncepush.Transport(req.Transport), oncepush.Token(req.Token)))
}

func (s *Server[TTx]) revokeSession(w http.ResponseWriter, r *http.Request) error {
	if err := noBody(r); err != nil {
		return err
	}
	return noContent(w, s.client.RevokeSession(r.Context(), r.PathValue("session")))
}

func (s *Server[TTx]) deleteRecipient(w http.ResponseWriter, r *http.Request) error {
	recipient, err := pathRecipient(r)
	if err != nil {
		return err
	}
	if err := noBody(r); err != nil {
		return err
	}
	return noContent(w, s.client.DeleteRecipient(r.Context(), recipient))
}

// noContent answers 204 for a change that succeeded (err is nil), and
// returns err otherwise.
func noContent(w http.ResponseWriter, err error) error {
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
