-- The sqlite driver's statements of driver.DeviceExecutor (driver/device.go); conventions in queries.sql.

-- name: SessionIsRevoked :one
SELECT EXISTS (SELECT 1 FROM oncepush_revoked_session WHERE session = @session);

-- name: DeviceDeleteOtherOwner :exec
DELETE FROM oncepush_device
WHERE transport = @transport AND token_key = @token_key AND recipient <> @recipient;

-- name: DeviceUpsert :one
-- Updates only the same owner's row. DeviceRegister first deletes another
-- owner's registration in the same write transaction, so a conflict here is
-- with the same owner, unless it keeps the other owner's: then no row.
INSERT INTO oncepush_device AS d (recipient, transport, token, token_key, platform, session, locale,
                                  time_zone, tags, created_at, registered_at)
VALUES (@recipient, @transport, @token, @token_key, @platform, @session, @locale, @time_zone, @tags, @now, @now)
ON CONFLICT (transport, token_key) DO UPDATE
SET token         = excluded.token,
    platform      = excluded.platform,
    session       = excluded.session,
    locale        = excluded.locale,
    time_zone     = excluded.time_zone,
    tags          = excluded.tags,
    registered_at = excluded.registered_at
WHERE d.recipient = excluded.recipient
RETURNING id, recipient, transport, token, token_key, platform, session, locale, time_zone, tags,
          created_at, registered_at;

-- name: DeviceTrim :exec
-- A recipient keeps its @max most recently registered devices.
DELETE FROM oncepush_device
WHERE recipient = @recipient
  AND id NOT IN (SELECT id FROM oncepush_device
                 WHERE recipient = @recipient
                 ORDER BY registered_at DESC, id DESC
                 LIMIT @max);

-- name: DeviceUnregister :execrows
DELETE FROM oncepush_device
WHERE transport = @transport AND token_key = @token_key
  AND (@recipient = '' OR recipient = @recipient);

-- name: DeviceListByRecipient :many
SELECT id, recipient, transport, token, token_key, platform, session, locale, time_zone, tags,
       created_at, registered_at
FROM oncepush_device
WHERE recipient = @recipient
ORDER BY registered_at DESC, id DESC;

-- name: DeviceGetByToken :one
SELECT id, recipient, transport, token, token_key, platform, session, locale, time_zone, tags,
       created_at, registered_at
FROM oncepush_device
WHERE transport = @transport AND token_key = @token_key;

-- name: SessionRevoke :exec
INSERT INTO oncepush_revoked_session (session, revoked_at)
VALUES (@session, @now)
ON CONFLICT (session) DO NOTHING;

-- name: DeviceDeleteBySession :execrows
-- session <> '' lets the planner use the partial index oncepush_device_session
-- (it cannot know that @session is never empty).
DELETE FROM oncepush_device WHERE session = @session AND session <> '';

-- name: DeviceDeleteByRecipient :execrows
DELETE FROM oncepush_device WHERE recipient = @recipient;

-- name: CampaignRecipientDeleteByRecipient :exec
DELETE FROM oncepush_campaign_recipient WHERE recipient = @recipient;

-- name: DeliveryDeleteByRecipient :many
-- Ledger rows go with their deliveries (ON DELETE CASCADE, foreign_keys=ON).
-- Returns the message and the dedup key (NULL when none) of each row deleted.
DELETE FROM oncepush_delivery WHERE recipient = @recipient
RETURNING message_id, dedup_key;
