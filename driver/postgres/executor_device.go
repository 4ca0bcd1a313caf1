package postgres

// The statements of driver.DeviceExecutor (driver/device.go); their SQL is in
// queries_device.sql.

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncepush/oncepush/driver"
)

func (e *executor) DeviceRegister(ctx context.Context, p *driver.DeviceRegisterParams) (*driver.Device, error) {
	var dev *driver.Device
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		if p.Session != "" {
			// Shared with other registrations, exclusive with a revocation:
			// a revocation waits for this transaction, so it sees this row.
			if _, err := tx.Exec(ctx, q.Get("SessionLockShared"), named{"session": p.Session}); err != nil {
				return err
			}
			var revoked bool
			if err := tx.QueryRow(ctx, q.Get("SessionIsRevoked"), named{"session": p.Session}).Scan(&revoked); err != nil {
				return err
			}
			if revoked {
				return driver.ErrSessionRevoked
			}
		}
		key := named{"transport": p.Transport, "token_key": p.TokenKey, "recipient": p.Recipient}
		// A conflict with another owner updates nothing; that registration is
		// deleted and the insert tried again, so a moved token gets a new identity.
		// Two rounds suffice unless another owner re-registers in between.
		for range 5 {
			if !p.KeepOtherOwner {
				if _, err := tx.Exec(ctx, q.Get("DeviceDeleteOtherOwner"), key); err != nil {
					return err
				}
			}
			devs, err := query(ctx, tx, scanDevice, q.Get("DeviceUpsert"), named{
				"now": p.Now, "recipient": p.Recipient, "transport": p.Transport, "token": p.Token,
				"token_key": p.TokenKey, "platform": p.Platform, "session": p.Session,
				"locale": p.Locale, "time_zone": p.TimeZone, "tags": driver.TagsJSON(p.Tags),
			})
			if err != nil {
				return err
			}
			if len(devs) == 1 {
				dev = devs[0]
				break
			}
			// The upsert's conflict waited for any registration of the token
			// still in flight, so the owner it saw has committed.
			if p.KeepOtherOwner {
				return driver.ErrTokenRegistered
			}
		}
		if dev == nil {
			return errRegisterContended
		}
		_, err := tx.Exec(ctx, q.Get("DeviceTrim"), named{"recipient": p.Recipient, "max": p.MaxPerRecipient})
		return err
	})
	return dev, err
}

var errRegisterContended = contendedError{}

type contendedError struct{}

func (contendedError) Error() string {
	return "postgres: device registration kept conflicting with another recipient registering the same token"
}

func (e *executor) DeviceUnregister(ctx context.Context, p *driver.DeviceUnregisterParams) (int, error) {
	tag, err := e.db.Exec(ctx, q.Get("DeviceUnregister"), named{
		"transport": p.Transport, "token_key": p.TokenKey, "recipient": p.Recipient,
	})
	return int(tag.RowsAffected()), err
}

func (e *executor) DeviceListByRecipient(ctx context.Context, recipient string) ([]*driver.Device, error) {
	return query(ctx, e.db, scanDevice, q.Get("DeviceListByRecipient"), named{"recipient": recipient})
}

func (e *executor) DeviceGetByToken(ctx context.Context, transport, tokenKey string) (*driver.Device, error) {
	return queryOne(ctx, e.db, scanDevice, q.Get("DeviceGetByToken"), named{"transport": transport, "token_key": tokenKey})
}

func (e *executor) SessionRevoke(ctx context.Context, session string, now *time.Time) (int, error) {
	var deleted int
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		// Waits for registrations of the session still in flight, so the
		// delete below sees their rows (READ COMMITTED: a statement after the
		// lock sees what committed before it).
		if _, err := tx.Exec(ctx, q.Get("SessionLock"), named{"session": session}); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q.Get("SessionRevoke"), named{"session": session, "now": now}); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, q.Get("DeviceDeleteBySession"), named{"session": session})
		deleted = int(tag.RowsAffected())
		return err
	})
	return deleted, err
}

func (e *executor) RecipientDelete(ctx context.Context, recipient string) (*driver.RecipientDeleteResult, error) {
	res := &driver.RecipientDeleteResult{}
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		args := named{"recipient": recipient}
		tag, err := tx.Exec(ctx, q.Get("DeviceDeleteByRecipient"), args)
		if err != nil {
			return err
		}
		res.Devices = int(tag.RowsAffected())
		if _, err := tx.Exec(ctx, q.Get("CampaignRecipientDeleteByRecipient"), args); err != nil {
			return err
		}
		return scanDeleted(tx.QueryRow(ctx, q.Get("DeliveryDeleteByRecipient"), args), &res.Deliveries)
	})
	return res, err
}
