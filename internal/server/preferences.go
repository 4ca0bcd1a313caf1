package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/oncepush/oncepush"
	"github.com/oncepush/oncepush/driver/serverstore"
)

// quietHours is a daily window in the recipient's time zone.
type quietHours struct {
	Start    string `json:"start" api:"required"`    // "22:00"
	End      string `json:"end" api:"required"`      // "07:00"; before Start means the window crosses midnight
	TimeZone string `json:"timeZone" api:"required"` // IANA, e.g. "Europe/Zurich"
}

// preferencesBody is GET and PUT /v1/recipients/{recipient}/preferences.
type preferencesBody struct {
	// OptOut lists the categories the recipient does not want.
	OptOut     []string    `json:"optOut" api:"nullable"`
	QuietHours *quietHours `json:"quietHours" api:"nullable"`
}

// Preference limits.
const (
	maxOptOuts     = 100
	maxCategoryLen = 100
)

func (p *preferencesBody) check() error {
	if len(p.OptOut) > maxOptOuts {
		return fieldProblem(CodeInvalidField, "optOut", fmt.Sprintf("at most %d categories", maxOptOuts))
	}
	for i, c := range p.OptOut {
		if c == "" || len(c) > maxCategoryLen || !storableText(c) {
			return fieldProblem(CodeInvalidField, fmt.Sprintf("optOut[%d]", i),
				fmt.Sprintf("a category is 1 to %d bytes of UTF-8, without a NUL character", maxCategoryLen))
		}
	}
	if q := p.QuietHours; q != nil {
		start, err := parseClock(q.Start)
		if err != nil {
			return fieldProblem(CodeInvalidField, "quietHours.start", err.Error())
		}
		end, err := parseClock(q.End)
		if err != nil {
			return fieldProblem(CodeInvalidField, "quietHours.end", err.Error())
		}
		if start == end {
			return fieldProblem(CodeInvalidField, "quietHours.end", "must differ from start (an empty window is no quiet hours: send null)")
		}
		if q.TimeZone == "" {
			return fieldProblem(CodeInvalidField, "quietHours.timeZone", "an IANA time zone such as Europe/Zurich")
		}
		if _, err := loadZone(q.TimeZone); err != nil || !storableText(q.TimeZone) {
			return fieldProblem(CodeInvalidField, "quietHours.timeZone", fmt.Sprintf("%q is not an IANA time zone", q.TimeZone))
		}
	}
	return nil
}

// storableText is what the library's text fields hold too: UTF-8 without a
// NUL character, which PostgreSQL cannot store.
func storableText(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// parseClock reads "HH:MM" as minutes after midnight.
func parseClock(s string) (int, error) {
	t, err := time.Parse("15:04", s)
	if err != nil || len(s) != 5 {
		return 0, errors.New("must be a local time HH:MM, 00:00 to 23:59")
	}
	return t.Hour()*60 + t.Minute(), nil
}

// zones caches time.LoadLocation, which reads the zone database each time.
var zones sync.Map // name → *time.Location

func loadZone(name string) (*time.Location, error) {
	if l, ok := zones.Load(name); ok {
		return l.(*time.Location), nil
	}
	if name == "Local" {
		return nil, errors.New("Local is not an IANA zone")
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	zones.Store(name, l)
	return l, nil
}

func viewPreferences(p *serverstore.Preference) preferencesBody {
	v := preferencesBody{OptOut: []string{}}
	if p == nil {
		return v
	}
	if p.OptOut != nil {
		v.OptOut = p.OptOut
	}
	if p.QuietStart != "" {
		v.QuietHours = &quietHours{Start: p.QuietStart, End: p.QuietEnd, TimeZone: p.TimeZone}
	}
	return v
}

func (s *Server[TTx]) getPreferences(w http.ResponseWriter, r *http.Request) error {
	recipient, err := pathRecipient(r)
	if err != nil {
		return err
	}
	p, err := s.store.Exec().PreferenceGet(r.Context(), recipient)
	if err != nil && !errors.Is(err, oncepush.ErrNotFound) {
		return err
	}
	return replyJSON(w, http.StatusOK, viewPreferences(p))
}

func (s *Server[TTx]) putPreferences(w http.ResponseWriter, r *http.Request) error {
	recipient, err := pathRecipient(r)
	if err != nil {
		return err
	}
	var body preferencesBody
	if err := s.decode(w, r, &body); err != nil {
		return err
	}
	if err := body.check(); err != nil {
		return err
	}
	p := &serverstore.Preference{Recipient: recipient, OptOut: slices.Compact(slices.Sorted(slices.Values(body.OptOut)))}
	if q := body.QuietHours; q != nil {
		p.QuietStart, p.QuietEnd, p.TimeZone = q.Start, q.End, q.TimeZone
	}
	if err := s.store.Exec().PreferencePut(r.Context(), p, nil); err != nil {
		return err
	}
	return replyJSON(w, http.StatusOK, viewPreferences(p))
}

// Configure gives cfg the server's part in the engine: the eligibility rule
// that reads preferences, and the deletion of a recipient's preferences with
// the recipient. Every client a server runs on is configured with it, on the
// server's Store.
func Configure[TTx any](cfg *oncepush.Config, store serverstore.Store[TTx]) {
	cfg.Eligibility = PreferenceEligibility(store)
	cfg.RecipientDeleters = append(cfg.RecipientDeleters, PreferenceDeleter(store))
}

// PreferenceDeleter deletes a recipient's preferences as the server's part of
// Client.DeleteRecipient, on the deletion's transaction.
func PreferenceDeleter[TTx any](store serverstore.Store[TTx]) oncepush.RecipientDeleter {
	return func(ctx context.Context, recipient string) error {
		tx, ok := oncepush.RecipientDeleteTx[TTx](ctx)
		if !ok {
			return errors.New("delete preferences: called outside DeleteRecipient's transaction")
		}
		if _, err := store.UnwrapExecutor(tx).PreferenceDeleteByRecipient(ctx, recipient); err != nil {
			return fmt.Errorf("delete preferences: %w", err)
		}
		return nil
	}
}

// PreferenceEligibility is the server's eligibility rule: it reads the
// preferences of every due recipient of the batch with one query on the claim
// transaction, through the server's store (never a second connection: a pool
// of one still works). A recipient who opted out of a message's category is
// skipped; one inside quiet hours — in their own time zone, at the claim's
// now — is delayed to the window's end.
func PreferenceEligibility[TTx any](store serverstore.Store[TTx]) oncepush.Eligibility {
	return func(ctx context.Context, asks []oncepush.Ask) ([]oncepush.Answer, error) {
		ex := store.Exec()
		if tx, ok := oncepush.ClaimTx[TTx](ctx); ok {
			ex = store.UnwrapExecutor(tx)
		}
		var recipients []string
		for _, a := range asks {
			recipients = append(recipients, a.Recipients...)
		}
		slices.Sort(recipients)
		prefs, err := ex.PreferenceGetMany(ctx, slices.Compact(recipients))
		if err != nil {
			return nil, fmt.Errorf("read preferences: %w", err)
		}
		byRecipient := make(map[string]*serverstore.Preference, len(prefs))
		for _, p := range prefs {
			byRecipient[p.Recipient] = p
		}
		out := make([]oncepush.Answer, len(asks))
		for i, a := range asks {
			out[i].Decisions = decidePreferences(a, byRecipient)
		}
		return out, nil
	}
}

// decidePreferences decides one message's due recipients by their stored
// preferences; recipients without any are sent to.
func decidePreferences(a oncepush.Ask, prefs map[string]*serverstore.Preference) map[string]oncepush.Decision {
	n := a.Notice
	out := map[string]oncepush.Decision{}
	for _, r := range a.Recipients {
		p := prefs[r]
		if p == nil {
			continue
		}
		if n.Category != "" && slices.Contains(p.OptOut, n.Category) {
			out[r] = oncepush.DecisionSkip.Because("opted out of category " + n.Category)
			continue
		}
		if end, quiet := quietUntil(p, n.Now); quiet {
			out[r] = oncepush.DelayUntil(end).Because("quiet hours until " + end.Format("15:04") + " " + p.TimeZone)
		}
	}
	return out
}

// quietUntil reports whether now falls in p's quiet hours, and when they end.
func quietUntil(p *serverstore.Preference, now time.Time) (time.Time, bool) {
	if p.QuietStart == "" {
		return time.Time{}, false
	}
	start, err1 := parseClock(p.QuietStart)
	end, err2 := parseClock(p.QuietEnd)
	loc, err3 := loadZone(p.TimeZone)
	if err1 != nil || err2 != nil || err3 != nil {
		return time.Time{}, false // validated when stored; never block on a bad row
	}
	local := now.In(loc)
	m := local.Hour()*60 + local.Minute()
	endToday := time.Date(local.Year(), local.Month(), local.Day(), end/60, end%60, 0, 0, loc)
	switch {
	case start < end && m >= start && m < end: // 13:00–15:00
		return endToday, true
	case start > end && m >= start: // 22:00–07:00, before midnight
		return endToday.AddDate(0, 0, 1), true
	case start > end && m < end: // 22:00–07:00, after midnight
		return endToday, true
	}
	return time.Time{}, false
}
