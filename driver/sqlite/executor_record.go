package sqlite

// The statements of driver.RecordExecutor (driver/record.go); their SQL is in
// queries_record.sql.

import (
	"context"
	"database/sql"
	"slices"

	"github.com/oncepush/oncepush/driver"
)

// deliveryUpdate is one element of DeliveryUpdateMany's @updates.
type deliveryUpdate struct {
	ID        int64   `json:"id"`
	Status    string  `json:"status"`
	Attempts  int     `json:"attempts"`
	NextAt    *int64  `json:"next_at"`
	DelayUS   int64   `json:"delay_us"`
	LastError *string `json:"last_error"`
}

func (e *executor) DeliveryUpdateMany(ctx context.Context, p *driver.DeliveryUpdateManyParams) ([]driver.UpdatedDelivery, error) {
	if len(p.Updates) == 0 {
		return nil, nil
	}
	us := make([]deliveryUpdate, len(p.Updates))
	for i, u := range p.Updates {
		us[i] = deliveryUpdate{ID: u.ID, Status: u.Status, Attempts: u.Attempts, DelayUS: durMicros(u.Delay), LastError: u.LastError}
		if u.NextAttemptAt != nil {
			at := u.NextAttemptAt.UnixMicro()
			us[i].NextAt = &at
		}
	}
	list, err := jsonList(us)
	if err != nil {
		return nil, err
	}
	return written(ctx, e, func(db dbtx) ([]driver.UpdatedDelivery, error) {
		return query(ctx, db, func(r scanner) (driver.UpdatedDelivery, error) {
			var u driver.UpdatedDelivery
			err := r.Scan(&u.ID, &u.Status)
			return u, err
		}, q.Get("DeliveryUpdateMany"),
			sql.Named("now", nowMicros(p.Now)), sql.Named("lease_id", p.LeaseID), sql.Named("updates", list))
	})
}

// attemptUpsert is one element of DeviceAttemptUpsertMany's @rows.
type attemptUpsert struct {
	DeliveryID  int64  `json:"delivery_id"`
	DeviceID    int64  `json:"device_id"`
	Transport   string `json:"transport"`
	TokenKey    string `json:"token_key"`
	State       string `json:"state"`
	Submissions int    `json:"submissions"`
	Ambiguous   int    `json:"ambiguous"`
	ProviderID  string `json:"provider_id"`
	Error       string `json:"error"`
}

func (e *executor) DeviceAttemptUpsertMany(ctx context.Context, p *driver.DeviceAttemptUpsertManyParams) error {
	if len(p.Rows) == 0 {
		return nil
	}
	rows := make([]attemptUpsert, len(p.Rows))
	for i, r := range p.Rows {
		rows[i] = attemptUpsert{
			DeliveryID: r.DeliveryID, DeviceID: r.DeviceID, Transport: r.Transport, TokenKey: r.TokenKey, State: r.State,
			Submissions: r.SubmissionsDelta, Ambiguous: r.AmbiguousDelta, ProviderID: r.ProviderID, Error: r.Error,
		}
	}
	list, err := jsonList(rows)
	if err != nil {
		return err
	}
	return e.exec(ctx, q.Get("DeviceAttemptUpsertMany"), sql.Named("now", nowMicros(p.Now)), sql.Named("rows", list))
}

// attemptKey is one element of DeviceAttemptMarkSending's @pairs (and,
// without a device, of DeviceAttemptStateMany's).
type attemptKey struct {
	DeliveryID int64  `json:"delivery_id"`
	DeviceID   int64  `json:"device_id,omitempty"`
	Transport  string `json:"transport"`
	TokenKey   string `json:"token_key"`
}

// campaignToken is a token of a campaign and the delivery holding it: an
// element of CampaignTokenTake's @tokens and CampaignTokenFree's @keys.
type campaignToken struct {
	MessageID  int64  `json:"message_id"`
	Transport  string `json:"transport"`
	TokenKey   string `json:"token_key"`
	DeliveryID int64  `json:"delivery_id"`
}

// duplicatePair is an element of DeviceAttemptDuplicateMany's @pairs.
type duplicatePair struct {
	attemptKey
	Holder int64 `json:"holder"`
}

// DeviceAttemptMarkSending implements driver.Executor in steps, under the
// write lock PostgreSQL's one statement does without: the leased
// deliveries, their campaign pairs' tokens, the holders' states where
// another delivery holds one, then the marks and the duplicates.
func (e *executor) DeviceAttemptMarkSending(ctx context.Context, p *driver.DeviceAttemptMarkSendingParams) ([]driver.MarkedPair, error) {
	if len(p.Pairs) == 0 {
		return nil, nil
	}
	now := nowMicros(p.Now)
	if !slices.ContainsFunc(p.Pairs, func(k driver.DeviceAttemptKey) bool { return k.CampaignMessageID > 0 }) {
		return e.markSending(ctx, p)
	}
	return written(ctx, e, func(db dbtx) ([]driver.MarkedPair, error) {
		var ids []int64
		for _, k := range p.Pairs {
			ids = append(ids, k.DeliveryID)
		}
		idList, err := jsonList(ids)
		if err != nil {
			return nil, err
		}
		owned, err := query(ctx, db, scanValue[int64], q.Get("DeviceAttemptMarkOwn"), sql.Named("ids", idList),
			sql.Named("now", now), sql.Named("lease_id", p.LeaseID), sql.Named("min_left_us", durMicros(p.MinLeaseLeft)))
		if err != nil {
			return nil, err
		}
		own := make(map[int64]bool, len(owned))
		for _, id := range owned {
			own[id] = true
		}
		var tokens []campaignToken
		seen := map[campaignToken]bool{}
		for _, k := range p.Pairs {
			t := campaignToken{MessageID: k.CampaignMessageID, Transport: k.Transport, TokenKey: k.TokenKey}
			if own[k.DeliveryID] && k.CampaignMessageID > 0 && !seen[t] {
				seen[t] = true
				t.DeliveryID = k.DeliveryID
				tokens = append(tokens, t)
			}
		}
		holders := map[campaignToken]int64{}
		if len(tokens) > 0 {
			list, err := jsonList(tokens)
			if err != nil {
				return nil, err
			}
			held, err := query(ctx, db, func(r scanner) (campaignToken, error) {
				var t campaignToken
				return t, r.Scan(&t.MessageID, &t.Transport, &t.TokenKey, &t.DeliveryID)
			}, q.Get("CampaignTokenTake"), sql.Named("tokens", list))
			if err != nil {
				return nil, err
			}
			for _, t := range held {
				holders[campaignToken{MessageID: t.MessageID, Transport: t.Transport, TokenKey: t.TokenKey}] = t.DeliveryID
			}
		}
		// Pairs whose token another delivery holds: that holder's attempt.
		var others []attemptKey
		for _, k := range p.Pairs {
			h := holders[campaignToken{MessageID: k.CampaignMessageID, Transport: k.Transport, TokenKey: k.TokenKey}]
			if own[k.DeliveryID] && k.CampaignMessageID > 0 && h != k.DeliveryID {
				others = append(others, attemptKey{DeliveryID: h, Transport: k.Transport, TokenKey: k.TokenKey})
			}
		}
		states := map[attemptKey]string{}
		if len(others) > 0 {
			list, err := jsonList(others)
			if err != nil {
				return nil, err
			}
			rows, err := query(ctx, db, func(r scanner) (driver.MarkedPair, error) {
				var m driver.MarkedPair
				return m, r.Scan(&m.DeliveryID, &m.Transport, &m.TokenKey, &m.State)
			}, q.Get("DeviceAttemptStateMany"), sql.Named("pairs", list))
			if err != nil {
				return nil, err
			}
			for _, m := range rows {
				states[attemptKey{DeliveryID: m.DeliveryID, Transport: m.Transport, TokenKey: m.TokenKey}] = m.State
			}
		}
		var out []driver.MarkedPair
		var marks []attemptKey
		var dups []duplicatePair
		for _, k := range p.Pairs {
			if !own[k.DeliveryID] {
				continue
			}
			key := attemptKey{DeliveryID: k.DeliveryID, DeviceID: k.DeviceID, Transport: k.Transport, TokenKey: k.TokenKey}
			state := driver.AttemptSending
			if k.CampaignMessageID > 0 {
				h := holders[campaignToken{MessageID: k.CampaignMessageID, Transport: k.Transport, TokenKey: k.TokenKey}]
				if h != k.DeliveryID {
					switch states[attemptKey{DeliveryID: h, Transport: k.Transport, TokenKey: k.TokenKey}] {
					case driver.AttemptAccepted, driver.AttemptInvalid, driver.AttemptRejected, driver.AttemptAmbiguous:
						state = driver.AttemptDuplicate
						dups = append(dups, duplicatePair{attemptKey: key, Holder: h})
					default:
						state = driver.MarkHeld
					}
				}
			}
			if state == driver.AttemptSending {
				marks = append(marks, key)
			}
			out = append(out, driver.MarkedPair{DeliveryID: k.DeliveryID, Transport: k.Transport, TokenKey: k.TokenKey, State: state})
		}
		if len(marks) > 0 {
			list, err := jsonList(marks)
			if err != nil {
				return nil, err
			}
			if _, err := db.ExecContext(ctx, q.Get("DeviceAttemptMarkSending"), sql.Named("now", now),
				sql.Named("lease_id", p.LeaseID), sql.Named("min_left_us", durMicros(p.MinLeaseLeft)), sql.Named("pairs", list)); err != nil {
				return nil, err
			}
		}
		if len(dups) > 0 {
			list, err := jsonList(dups)
			if err != nil {
				return nil, err
			}
			if _, err := db.ExecContext(ctx, q.Get("DeviceAttemptDuplicateMany"), sql.Named("now", now), sql.Named("pairs", list)); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
}

// markSending marks pairs none of which is a campaign's, in the one
// statement the mark was before campaign tokens: it marks every pair of
// each leased delivery, and answers their delivery ids.
func (e *executor) markSending(ctx context.Context, p *driver.DeviceAttemptMarkSendingParams) ([]driver.MarkedPair, error) {
	ks := make([]attemptKey, len(p.Pairs))
	for i, k := range p.Pairs {
		ks[i] = attemptKey{DeliveryID: k.DeliveryID, DeviceID: k.DeviceID, Transport: k.Transport, TokenKey: k.TokenKey}
	}
	list, err := jsonList(ks)
	if err != nil {
		return nil, err
	}
	ids, err := written(ctx, e, func(db dbtx) ([]int64, error) {
		return query(ctx, db, scanValue[int64], q.Get("DeviceAttemptMarkSending"), sql.Named("now", nowMicros(p.Now)),
			sql.Named("lease_id", p.LeaseID), sql.Named("min_left_us", durMicros(p.MinLeaseLeft)), sql.Named("pairs", list))
	})
	if err != nil {
		return nil, err
	}
	own := make(map[int64]bool, len(ids))
	for _, id := range ids {
		own[id] = true
	}
	var out []driver.MarkedPair
	for _, k := range p.Pairs {
		if own[k.DeliveryID] {
			out = append(out, driver.MarkedPair{DeliveryID: k.DeliveryID, Transport: k.Transport, TokenKey: k.TokenKey, State: driver.AttemptSending})
		}
	}
	return out, nil
}

func (e *executor) CampaignTokenFree(ctx context.Context, keys []driver.CampaignTokenKey) error {
	if len(keys) == 0 {
		return nil
	}
	ks := make([]campaignToken, len(keys))
	for i, k := range keys {
		ks[i] = campaignToken{MessageID: k.MessageID, Transport: k.Transport, TokenKey: k.TokenKey, DeliveryID: k.DeliveryID}
	}
	_, err := execList(ctx, e, q.Get("CampaignTokenFree"), "keys", ks)
	return err
}

// deviceKey is one element of DeviceDeleteMany's @keys.
type deviceKey struct {
	ID        int64  `json:"id"`
	Recipient string `json:"recipient"`
	Token     string `json:"token"`
}

func (e *executor) DeviceDeleteMany(ctx context.Context, keys []driver.DeviceKey) (int, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	ks := make([]deviceKey, len(keys))
	for i, k := range keys {
		ks[i] = deviceKey{ID: k.ID, Recipient: k.Recipient, Token: k.Token}
	}
	return execList(ctx, e, q.Get("DeviceDeleteMany"), "keys", ks)
}

func (e *executor) DeliveryLeaseGetMany(ctx context.Context, ids []int64) (map[int64]int64, error) {
	list, err := jsonList(ids)
	if err != nil {
		return nil, err
	}
	return queryMap[int64, int64](ctx, e.conn(), q.Get("DeliveryLeaseGetMany"), sql.Named("ids", list))
}
