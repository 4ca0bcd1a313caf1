package sqlite

// The statements of driver.DeviceExecutor (driver/device.go); their SQL is in
// queries_device.sql.

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/oncepush/oncepush/driver"
)

func (e *executor) DeviceRegister(ctx context.Context, p *driver.DeviceRegisterParams) (*driver.Device, error) {
	var dev *driver.Device
	err := e.atomic(ctx, func(db dbtx) error {
		if p.Session != "" {
			var revoked bool
			if err := db.QueryRowContext(ctx, q.Get("SessionIsRevoked"), sql.Named("session", p.Session)).Scan(&revoked); err != nil {
				return err
			}
			if revoked {
				return driver.ErrSessionRevoked
			}
		}
		// A token owned by another recipient moves: that registration is
		// deleted and a new one (a new id) inserted. The write lock is held
		// throughout, so unlike PostgreSQL no other owner can register the
		// token in between and one round suffices.
		if !p.KeepOtherOwner {
			if _, err := db.ExecContext(ctx, q.Get("DeviceDeleteOtherOwner"), sql.Named("transport", p.Transport),
				sql.Named("token_key", p.TokenKey), sql.Named("recipient", p.Recipient)); err != nil {
				return err
			}
		}
		devs, err := query(ctx, db, scanDevice, q.Get("DeviceUpsert"),
			sql.Named("now", nowMicros(p.Now)), sql.Named("recipient", p.Recipient), sql.Named("transport", p.Transport),
			sql.Named("token", p.Token), sql.Named("token_key", p.TokenKey), sql.Named("platform", p.Platform),
			sql.Named("session", p.Session), sql.Named("locale", p.Locale), sql.Named("time_zone", p.TimeZone),
			sql.Named("tags", driver.TagsJSON(p.Tags)))
		if err != nil {
			return err
		}
		if len(devs) == 0 && p.KeepOtherOwner {
			return driver.ErrTokenRegistered
		}
		if len(devs) != 1 {
			return fmt.Errorf("sqlite: device registration for %s wrote %d rows, want 1", p.Transport, len(devs))
		}
		dev = devs[0]
		_, err = db.ExecContext(ctx, q.Get("DeviceTrim"), sql.Named("recipient", p.Recipient), sql.Named("max", p.MaxPerRecipient))
		return err
	})
	if err != nil {
		return nil, err
	}
	return dev, nil
}

func (e *executor) DeviceUnregister(ctx context.Context, p *driver.DeviceUnregisterParams) (int, error) {
	return e.execCount(ctx, q.Get("DeviceUnregister"),
		sql.Named("transport", p.Transport), sql.Named("token_key", p.TokenKey), sql.Named("recipient", p.Recipient))
}

func (e *executor) DeviceListByRecipient(ctx context.Context, recipient string) ([]*driver.Device, error) {
	return query(ctx, e.conn(), scanDevice, q.Get("DeviceListByRecipient"), sql.Named("recipient", recipient))
}

func (e *executor) DeviceGetByToken(ctx context.Context, transport, tokenKey string) (*driver.Device, error) {
	d, err := scanDevice(e.conn().QueryRowContext(ctx, q.Get("DeviceGetByToken"),
		sql.Named("transport", transport), sql.Named("token_key", tokenKey)))
	if err != nil {
		return nil, translate(err)
	}
	return d, nil
}

func (e *executor) SessionRevoke(ctx context.Context, session string, now *time.Time) (int, error) {
	var deleted int
	err := e.atomic(ctx, func(db dbtx) error {
		if _, err := db.ExecContext(ctx, q.Get("SessionRevoke"),
			sql.Named("session", session), sql.Named("now", nowMicros(now))); err != nil {
			return err
		}
		var err error
		deleted, err = rowsAffected(db.ExecContext(ctx, q.Get("DeviceDeleteBySession"), sql.Named("session", session)))
		return err
	})
	return deleted, err
}

func (e *executor) RecipientDelete(ctx context.Context, recipient string) (*driver.RecipientDeleteResult, error) {
	res := &driver.RecipientDeleteResult{}
	err := e.atomic(ctx, func(db dbtx) error {
		arg := sql.Named("recipient", recipient)
		var err error
		if res.Devices, err = rowsAffected(db.ExecContext(ctx, q.Get("DeviceDeleteByRecipient"), arg)); err != nil {
			return err
		}
		if _, err := db.ExecContext(ctx, q.Get("CampaignRecipientDeleteByRecipient"), arg); err != nil {
			return err
		}
		return collectDeleted(ctx, db, &res.Deliveries, q.Get("DeliveryDeleteByRecipient"), arg)
	})
	return res, err
}
